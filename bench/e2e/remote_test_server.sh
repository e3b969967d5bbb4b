# bench/e2e/remote_test_server.sh: the test server's start-up that remote_vs_local.sh,
# remote_cold_ab.sh and remote_ranks.sh share; sourced (`. "$(dirname "$0")/remote_test_server.sh"`),
# not run.
#
#   serve_photo_shards SLUICE_BINARY
#
# writes shared/datasets/imagenet-photos (SLUICE_DATASETS overrides the datasets folder) as 8 MiB
# shards (sluice prepare shards) with their index files beside them (what `sluice inspect
# --shards` leaves, uploaded with the shards) in a temporary folder, serves that folder from
# tests/support/remote_server.py on 127.0.0.1 and waits for its port. It sets
#   tmp             the temporary folder (the shards are under $tmp/root/shards)
#   count, last     the shard count, and the last shard's number as written in its name
#   local_pattern   the shards on disk, as a brace range
#   remote_pattern  the same shards by URL
#   set_bytes       the shards' bytes
#   port, server    the server's port and process id
# and, at the calling script's exit (an EXIT trap), stops the server and removes the folder.
#
#   faults JSON     PUT /__faults on the server: '{"latency_ms": 40}' (remote_server.py's header)
#   served_bytes    the body bytes the server has sent so far (its /__stats)

serve_photo_shards() {
  local sluice=${1:?serve_photo_shards SLUICE_BINARY}
  local repo data
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  data=${SLUICE_DATASETS:-/work/shared/datasets}/imagenet-photos
  tmp=$(mktemp -d)
  server=
  trap _stop_photo_shards EXIT
  "$sluice" prepare shards --data "$data" --out "$tmp/root/shards" --shard-size 8MiB --prefix photos >/dev/null
  count=$(ls "$tmp/root/shards"/photos-*.tar | wc -l)
  last=$(printf '%06d' $((count - 1)))
  local_pattern="$tmp/root/shards/photos-{000000..$last}.tar"
  "$sluice" inspect --shards "$local_pattern" >/dev/null  # writes each shard's index file beside it
  set_bytes=$(cat "$tmp/root/shards"/photos-*.tar | wc -c)
  /usr/bin/python3 "$repo/tests/support/remote_server.py" --root "$tmp/root" >"$tmp/port" &
  server=$!
  for _ in $(seq 100); do [[ -s "$tmp/port" ]] && break; sleep 0.1; done
  [[ -s "$tmp/port" ]] || { echo "the test server did not start" >&2; return 1; }
  port=$(head -1 "$tmp/port")
  remote_pattern="http://127.0.0.1:$port/shards/photos-{000000..$last}.tar"
}

_stop_photo_shards() {
  [[ -n "${server:-}" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  [[ -n "${tmp:-}" ]] && rm -rf "$tmp"
  return 0
}

faults() { curl -s -X PUT -d "$1" "http://127.0.0.1:$port/__faults" >/dev/null; }

served_bytes() {
  curl -s "http://127.0.0.1:$port/__stats" | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['bytes'])"
}

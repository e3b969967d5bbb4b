#!/usr/bin/env bash
# bench/e2e/remote_vs_local.sh: shards read from local disk and the same shards named by URL,
# served on 127.0.0.1 by tests/support/remote_server.py with LATENCY_MS before each response's
# first byte (and an optional bandwidth cap), in one run: the turns alternate (local, remote with
# a cold cache, remote with a warm one, local again) so the load of the shared machine falls on
# all alike. Prints each turn's images/s, build() seconds (fetching and indexing: the wait before
# the first batch can be made), the time from build()'s start to the first batch in hand (a cold
# start's wait) and the ratios to the mean local rate, with the load average.
#
#   bench/e2e/remote_vs_local.sh SLUICE_BINARY [LATENCY_MS=40] [BANDWIDTH_BYTES_PER_S=0: the server's whole pipe]
#
# Data: shared/datasets/imagenet-photos written as 8 MiB shards (sluice prepare shards) in a
# temporary folder, removed at the end with the server stopped.
set -euo pipefail
sluice=${1:?usage: remote_vs_local.sh SLUICE_BINARY [LATENCY_MS] [BANDWIDTH]}
latency=${2:-40}
bandwidth=${3:-0}
here=$(cd "$(dirname "$0")/../.." && pwd)
data=${SLUICE_DATASETS:-/work/shared/datasets}/imagenet-photos
tmp=$(mktemp -d)
server=
cleanup() { [[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

"$sluice" prepare shards --data "$data" --out "$tmp/root/shards" --shard-size 8MiB --prefix photos >/dev/null
count=$(ls "$tmp/root/shards"/photos-*.tar | wc -l)
last=$(printf '%06d' $((count - 1)))
/usr/bin/python3 "$here/tests/support/remote_server.py" --root "$tmp/root" >"$tmp/port" &
server=$!
for _ in $(seq 100); do [[ -s "$tmp/port" ]] && break; sleep 0.1; done
port=$(head -1 "$tmp/port")
curl -s -X PUT -d "{\"latency_ms\": $latency, \"bandwidth_total\": $bandwidth}" "http://127.0.0.1:$port/__faults" >/dev/null

run() {  # $1: turn name, $2: shard pattern; prints "name images_per_sec setup_seconds first_batch_seconds"
  "$sluice" bench --shards "$2" --remote-cache "$tmp/cache" --remote-cache-limit 4GiB --transform eval --size 224 \
    --threads 2 --batch 64 --json | tail -1 |
    /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); print('$1', r['images_per_sec'], r['setup_seconds'], r['first_batch_seconds'])"
}
local_pattern="$tmp/root/shards/photos-{000000..$last}.tar"
remote_pattern="http://127.0.0.1:$port/shards/photos-{000000..$last}.tar"
{
  run local "$local_pattern"
  run remote_cold "$remote_pattern"
  run remote_warm "$remote_pattern"
  run local "$local_pattern"
} >"$tmp/turns"
echo "load average: $(cat /proc/loadavg)"
echo "$count shards, latency ${latency} ms, bandwidth cap ${bandwidth} B/s (0: none)"
/usr/bin/python3 - "$tmp/turns" <<'PY'
import sys
rows = [line.split() for line in open(sys.argv[1])]
local = [float(r[1]) for r in rows if r[0] == "local"]
mean_local = sum(local) / len(local)
for name, rate, setup, first in rows:
    print(f"{name:12s} {float(rate):8.1f} images/s  {float(rate) / mean_local:5.2f}x local  build() {float(setup):6.2f} s"
          f"  first batch {float(first):6.2f} s")
PY

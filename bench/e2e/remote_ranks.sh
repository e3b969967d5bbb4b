#!/usr/bin/env bash
# bench/e2e/remote_ranks.sh: what each shard_by mode costs a rank of W, on local shards and on the
# same shards named by URL (served on 127.0.0.1 by tests/support/remote_server.py with LATENCY_MS
# before each response's first byte). For each mode (shards, samples) and W in 1 2 4, every rank
# r runs one epoch as `sluice bench --spec` with "shard": "launcher" (RANK=r WORLD_SIZE=W), from
# local shards and then remotely with a cache folder of its own (a cold cache: as a rank on
# another node); the bytes each remote rank fetched are the server's counter before and after.
# Prints one line per rank and a summary per (mode, W) with the load average: images/s of the
# epoch, and the rank's whole wait from build() to the epoch's end (a rank that splits by shards
# fetches its shards when the epoch starts, inside the epoch's time; one that fetches every
# shard does so in build()).
#
#   bench/e2e/remote_ranks.sh SLUICE_BINARY [LATENCY_MS=40]
#
# Data: shared/datasets/imagenet-photos written as 8 MiB shards (sluice prepare shards), indexed
# once in place (sluice inspect writes each shard's index file beside it, which a rank that splits
# by shards fetches instead of every shard), in a temporary folder removed at the end
# (remote_test_server.sh).
set -euo pipefail
sluice=${1:?usage: remote_ranks.sh SLUICE_BINARY [LATENCY_MS]}
latency=${2:-40}
. "$(dirname "$0")/remote_test_server.sh"
serve_photo_shards "$sluice"
faults "{\"latency_ms\": $latency}"

spec() {  # $1: pattern, $2: shard_by, $3: cache folder
  cat >"$tmp/spec.json" <<EOF
{"source": {"shards": {"path": "$1", "shard_by": "$2", "remote": {"cache_dir": "$3", "cache_limit": "4GiB"}}},
 "shard": "launcher", "shuffle_files": {"seed": 1},
 "stages": ["read", "decode_jpeg", {"preset": {"name": "imagenet_eval", "size": 224}}, {"batch": {"size": 64}}],
 "build": {"threads": 2, "seed": 1}}
EOF
}

run() {  # $1 mode, $2 world, $3 rank, $4 pattern, $5 cache: prints "images_per_sec seconds_from_build_to_end"
  spec "$4" "$1" "$5"
  RANK=$3 WORLD_SIZE=$2 "$sluice" bench --spec "$tmp/spec.json" --json | tail -1 |
    /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); print(r['images_per_sec'], r['setup_seconds'] + r['seconds'])"
}

echo "load average before: $(cat /proc/loadavg)"
echo "$count shards ($set_bytes bytes), latency ${latency} ms"
for mode in shards samples; do
  for world in 1 2 4; do
    for ((rank = 0; rank < world; rank++)); do
      read -r local_rate local_setup < <(run "$mode" "$world" "$rank" "$local_pattern" "$tmp/unused")
      before=$(served_bytes)
      read -r remote_rate remote_setup < <(run "$mode" "$world" "$rank" "$remote_pattern" "$tmp/cache-$mode-$world-$rank")
      fetched=$(( $(served_bytes) - before ))
      echo "$mode $world $rank $local_rate $remote_rate $fetched $local_setup $remote_setup" >>"$tmp/rows"
    done
  done
done
echo "load average after: $(cat /proc/loadavg)"
/usr/bin/python3 - "$tmp/rows" "$set_bytes" <<'PY'
import sys
rows = [line.split() for line in open(sys.argv[1])]
whole = int(sys.argv[2])
print(f"{'shard_by':8s} {'W':>2s} {'rank':>4s} {'local img/s':>11s} {'remote img/s':>12s} {'remote/local':>12s} "
      f"{'fetched MB':>10s} {'of the set':>10s} {'build+epoch local/remote s':>26s}")
for mode, w, r, lr, rr, fetched, ls, rs in rows:
    print(f"{mode:8s} {w:>2s} {r:>4s} {float(lr):11.1f} {float(rr):12.1f} {float(rr) / float(lr):11.2f}x "
          f"{int(fetched) / 1e6:10.1f} {int(fetched) / whole:9.2f}x {float(ls):10.2f} / {float(rs):.2f}")
print("summary (mean over the ranks)")
for mode in ("shards", "samples"):
    for w in ("1", "2", "4"):
        sel = [x for x in rows if x[0] == mode and x[1] == w]
        lr = sum(float(x[3]) for x in sel) / len(sel)
        rr = sum(float(x[4]) for x in sel) / len(sel)
        fetched = sum(int(x[5]) for x in sel) / len(sel)
        lt = sum(float(x[6]) for x in sel) / len(sel)
        rt = sum(float(x[7]) for x in sel) / len(sel)
        print(f"{mode:8s} W={w}: {lr:7.1f} local, {rr:7.1f} remote images/s per rank ({rr / lr:.2f}x); "
              f"build+epoch {lt:5.2f} s local, {rt:5.2f} s remote ({rt / lt:.2f}x); "
              f"{fetched / 1e6:6.1f} MB fetched per rank ({fetched / whole:.2f}x the set)")
PY

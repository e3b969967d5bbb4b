#!/usr/bin/env bash
# bench/e2e/remote_vs_local.sh: shards read from local disk and the same shards named by URL,
# served on 127.0.0.1 by tests/support/remote_server.py with LATENCY_MS before each response's
# first byte, in one run, for two cases: no bandwidth cap, and CAP bytes/s through the server's
# whole pipe. ROUNDS rounds, each running both cases' turns interleaved (local, remote with a cold
# cache, remote again with the warm cache, local), so the load of the shared machine falls on
# all alike; the figures are the rounds' medians.
#
# Per turn, two epochs (bench --epochs 2):
#   epoch 0 rate = images / epoch 0 seconds, counted from the end of build(): the stream itself
#                  (build()'s fixed set-up, the batch ring's memory faulted in, is not the
#                  network's)
#   epoch 1 rate = images / epoch 1 seconds
#   build()      = its seconds, reported apart
#   first batch  = from build()'s start to the first batch in hand: the whole cold start
# Ratios are to the mean of the round's two local turns of the same case. With the cap, the cap's
# own rate (CAP / the set's mean bytes per image) is printed beside it: the goal is within 10% of
# min(local rate, the cap's images/s).
#
#   bench/e2e/remote_vs_local.sh SLUICE_BINARY [LATENCY_MS=40] [CAP_BYTES_PER_S=50000000] [ROUNDS=3]
#
# Data: shared/datasets/imagenet-photos written as 8 MiB shards (sluice prepare shards) with
# their index files beside them (what `sluice inspect --shards` leaves, uploaded with the shards)
# in a temporary folder, removed at the end with the server stopped (remote_test_server.sh).
set -euo pipefail
sluice=${1:?usage: remote_vs_local.sh SLUICE_BINARY [LATENCY_MS] [CAP] [ROUNDS]}
latency=${2:-40}
cap=${3:-50000000}
rounds=${4:-3}
. "$(dirname "$0")/remote_test_server.sh"
serve_photo_shards "$sluice"

turn() {  # $1 round, $2 case, $3 turn name, $4 pattern, $5 cache folder
  "$sluice" bench --shards "$4" --remote-cache "$5" --remote-cache-limit 4GiB --transform eval --size 224 \
    --threads 2 --batch 64 --epochs 2 --json | tail -1 |
    /usr/bin/python3 -c "
import json, sys
r = json.load(sys.stdin); e = r['per_epoch']
print('$1', '$2', '$3', e[0]['images'] / e[0]['seconds'], e[1]['images_per_sec'],
      r['setup_seconds'], r['first_batch_seconds'], e[0]['images'])"
}
loads=()
for round in $(seq "$rounds"); do
  for case in latency capped; do
    if [[ $case == latency ]]; then faults "{\"latency_ms\": $latency}"; else faults "{\"latency_ms\": $latency, \"bandwidth_total\": $cap}"; fi
    rm -rf "$tmp/cache"
    turn "$round" "$case" local "$local_pattern" "$tmp/cache-unused"
    turn "$round" "$case" remote_cold "$remote_pattern" "$tmp/cache"
    turn "$round" "$case" remote_warm "$remote_pattern" "$tmp/cache"
    turn "$round" "$case" local "$local_pattern" "$tmp/cache-unused"
  done >>"$tmp/turns"
  loads+=("$(cut -d' ' -f1-3 /proc/loadavg)")
done
echo "$count shards ($set_bytes bytes), latency ${latency} ms, cap $cap B/s, $rounds rounds"
echo "load average after each round: ${loads[*]}"
/usr/bin/python3 - "$tmp/turns" "$set_bytes" "$cap" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
set_bytes, cap = int(sys.argv[2]), float(sys.argv[3])
med = statistics.median
for case in ("latency", "capped"):
    ratios = {"remote_cold": ([], []), "remote_warm": ([], [])}
    local0, local1, firsts, builds = [], [], {}, {}
    for rnd in sorted({r[0] for r in rows}):
        turns = [r for r in rows if r[0] == rnd and r[1] == case]
        loc = [t for t in turns if t[2] == "local"]
        l0 = sum(float(t[3]) for t in loc) / len(loc)
        l1 = sum(float(t[4]) for t in loc) / len(loc)
        local0.append(l0); local1.append(l1)
        for t in turns:
            firsts.setdefault(t[2], []).append(float(t[6])); builds.setdefault(t[2], []).append(float(t[5]))
            if t[2] in ratios:
                ratios[t[2]][0].append(float(t[3]) / l0); ratios[t[2]][1].append(float(t[4]) / l1)
    images = int(rows[0][7])
    print(f"\n{case}: local {med(local0):.1f} images/s epoch 0 (from the end of build()), {med(local1):.1f} epoch 1")
    if case == "capped":
        cap_rate = cap / (set_bytes / images)
        goal = [min(l, cap_rate) for l in local0]
        cold = [float(t[3]) for t in rows if t[1] == case and t[2] == "remote_cold"]
        print(f"  the cap alone: {cap_rate:.1f} images/s; remote cold epoch 0 at {med([c / g for c, g in zip(cold, goal)]):.2f}x"
              f" min(local, the cap's rate)")
    for name, (r0, r1) in ratios.items():
        print(f"  {name:12s} epoch 0 {med(r0):.2f}x local ({', '.join(f'{x:.2f}' for x in r0)})"
              f"  epoch 1 {med(r1):.2f}x ({', '.join(f'{x:.2f}' for x in r1)})")
    for name in ("local", "remote_cold", "remote_warm"):
        print(f"  {name:12s} build() {med(builds[name]):.2f} s, first batch {med(firsts[name]):.2f} s (medians)")
PY

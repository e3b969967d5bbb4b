#!/usr/bin/env bash
# bench/e2e/remote_cold_ab.sh: the cold first epoch of remote shards, several variants alternated
# in one run. Serves shared/datasets/imagenet-photos as 8 MiB shards (with their index files) from
# tests/support/remote_server.py on 127.0.0.1 with LATENCY_MS before each response's first byte, no
# cap; each round runs a local turn, then every variant once with a cold cache, then a local turn
# again (so the machine's load falls on all alike), and prints per variant the medians over the
# rounds of:
#   epoch 0 / local        images per second of epoch 0, counted from the end of build(), over
#                          the round's two local turns' mean (as remote_vs_local.sh counts it)
#   build + epoch 0        (build() seconds + epoch 0 seconds) of the local turns' mean over the
#                          variant's: the whole cold start, so a stream started earlier in build()
#                          is not counted as free
#   cpu - local            user + sys seconds of the bench process, minus the local turns' mean
#                          (the local turns' own medians are printed first)
#   server cpu             user + sys seconds of the test server during the turn
#   machine cpu - local    busy seconds of the whole machine (/proc/stat: user, nice, system,
#                          irq, softirq, steal) during the turn, minus the local turns' mean: what
#                          the kernel spends for the turn outside the process (writeback, the
#                          network stack's softirqs) too, and anything else running
#
#   bench/e2e/remote_cold_ab.sh LATENCY_MS ROUNDS NAME=BINARY[:CACHE_LIMIT[:CACHE_PARENT]] ...
#
# The local turns run the first variant's binary. CACHE_LIMIT defaults to 4GiB (0: streamed
# through memory, nothing written); CACHE_PARENT (default: the temporary folder, under /tmp) is
# the folder the cache folder is made in, e.g. /dev/shm to see what the disk's file system costs.
set -euo pipefail
latency=${1:?usage: remote_cold_ab.sh LATENCY_MS ROUNDS NAME=BINARY[:CACHE_LIMIT] ...}
rounds=${2:?rounds}
shift 2
variants=("$@")
first=${variants[0]#*=}
first=${first%%:*}
. "$(dirname "$0")/remote_test_server.sh"
serve_photo_shards "$first"
faults "{\"latency_ms\": $latency}"

server_cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }  # clock ticks
machine_busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }  # clock ticks
turn() {  # $1 round, $2 name, $3 binary, $4 pattern, $5 cache limit, $6 cache parent
  local cache="${6:-$tmp}/sluice-ab-cache"
  rm -rf "$cache"
  local before after busy0 busy1
  before=$(server_cpu)
  busy0=$(machine_busy)
  /usr/bin/time -f "%U %S" -o "$tmp/time" "$3" bench --shards "$4" --remote-cache "$cache" --remote-cache-limit "$5" \
    --transform eval --size 224 --threads 2 --batch 64 --epochs 2 --json --checksum | tail -1 >"$tmp/json"
  busy1=$(machine_busy)
  after=$(server_cpu)
  rm -rf "$cache"
  /usr/bin/python3 -c "
import json, sys
r = json.load(open('$tmp/json')); e = r['per_epoch']; u, s = open('$tmp/time').read().split()[-2:]
print('$1', '$2', e[0]['seconds'], r['setup_seconds'], float(u) + float(s), ($after - $before) / 100.0, r['checksum'], ($busy1 - $busy0) / 100.0)"
}
loads=()
for round in $(seq "$rounds"); do
  turn "$round" local "$first" "$local_pattern" 4GiB
  for v in "${variants[@]}"; do
    name=${v%%=*}; spec=${v#*=}; bin=${spec%%:*}; limit=4GiB; parent=
    [[ $spec == *:* ]] && limit=${spec#*:}
    [[ $limit == *:* ]] && { parent=${limit#*:}; limit=${limit%%:*}; }
    turn "$round" "$name" "$bin" "$remote_pattern" "$limit" "$parent"
  done
  turn "$round" local "$first" "$local_pattern" 4GiB
  loads+=("$(cut -d' ' -f1 /proc/loadavg)")
done >"$tmp/turns"
echo "$count shards, latency ${latency} ms, $rounds rounds; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "load average (1 min) after each round: ${loads[*]}"
/usr/bin/python3 - "$tmp/turns" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = statistics.median
sums = {r[6] for r in rows}
print("checksums:", "all equal" if len(sums) == 1 else f"DIFFER {sums}")
loc = [r for r in rows if r[1] == "local"]
print(f"local turns (medians): epoch 0 {med([float(r[2]) for r in loc]):.3f} s, build {med([float(r[3]) for r in loc]):.3f} s,"
      f" user + sys {med([float(r[4]) for r in loc]):.2f} s, machine busy {med([float(r[7]) for r in loc]):.2f} s")
names = []
for r in rows:
    if r[1] != "local" and r[1] not in names: names.append(r[1])
for name in names:
    e0, whole, cpu, srv, mach = [], [], [], [], []
    for rnd in sorted({r[0] for r in rows}, key=int):
        loc = [r for r in rows if r[0] == rnd and r[1] == "local"]
        le0 = sum(float(r[2]) for r in loc) / len(loc)
        lwhole = sum(float(r[2]) + float(r[3]) for r in loc) / len(loc)
        lcpu = sum(float(r[4]) for r in loc) / len(loc)
        lmach = sum(float(r[7]) for r in loc) / len(loc)
        for r in rows:
            if r[0] == rnd and r[1] == name:
                e0.append(le0 / float(r[2])); whole.append(lwhole / (float(r[2]) + float(r[3])))
                cpu.append(float(r[4]) - lcpu); srv.append(float(r[5])); mach.append(float(r[7]) - lmach)
    f = lambda xs: f"{med(xs):.2f} ({', '.join(f'{x:.2f}' for x in xs)})"
    mine = [r for r in rows if r[1] == name]
    print(f"{name:10s} epoch 0 / local {f(e0)}; build + epoch 0 {f(whole)}; cpu - local {f(cpu)} s; server cpu {f(srv)} s;"
          f" machine cpu - local {f(mach)} s; medians: epoch 0 {med([float(r[2]) for r in mine]):.3f} s,"
          f" build {med([float(r[3]) for r in mine]):.3f} s")
PY

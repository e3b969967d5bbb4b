#!/usr/bin/env bash
# One memory limit for the whole training job (docs/memory.md): does the planned split
# of the limit train as fast as the best split a person could choose by hand?
#
# At a limit where the caches can hold part of the data set (the job's minimum at accumulation 1,
# plus FRACTION of the training split's decoded size), `sluice train --memory-limit L
# --accumulate auto` runs with the planned split (training gets the tightest region of the
# fewest micro-batches that fit, the pipelines their minimums, the rest the caches), and the hand
# splits run with `--memory prealloc:S` for S = (100 - p)% of L, p the pipelines' share from
# GRID: each then gets the fewest micro-batches that fit its S and caches what is left of L. The
# score is the second epoch's images per second of wall time (its steps and its waits for data,
# the cache warm), the median over ROUNDS rounds with the configurations in a rotated order
# each round; the ratio planned / best hand split is the acceptance (>= 0.95). The runs leave the
# evaluation out (--no-eval, see `common` below). Then one run at a limit that holds the decoded
# training split, with the evaluation, reports the second epoch's cache hits and misses per split
# (a miss is a file read).
#
#   bench/e2e/job_memory_split.sh [BUILD_DIR]
#   env: MODEL (fashion-cnn), BATCH (128), IMAGES (6000: `sluice prepare --limit`, each split),
#        FRACTION (0.5), GRID ("10 20 30 40 50 60 70 80 90"), ROUNDS (3), THREADS (2),
#        LOADER_THREADS (1), SOURCE (/usr/share/datasets/fashion-mnist)
# Prints each run's JSON line to stderr and Markdown tables to stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build}
model=${MODEL:-fashion-cnn}
batch=${BATCH:-128}
images=${IMAGES:-6000}
fraction=${FRACTION:-0.5}
grid=${GRID:-"10 20 30 40 50 60 70 80 90"}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
loader_threads=${LOADER_THREADS:-1}
source_dir=${SOURCE:-/usr/share/datasets/fashion-mnist}
sluice="$build_dir/src/cli/sluice"
[[ -x "$sluice" ]] || { echo "job_memory_split: build $sluice first" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="$work/fashion-mnist"
"$sluice" prepare fashion-mnist --source "$source_dir" --out "$data" --limit "$images" >&2
# --no-eval: the evaluation's batch (256) does not shrink with accumulation, so with it every split
# whose training share is below the evaluation's peak fails, and the grid would only measure that.
common=(--data "$data" --model "$model" --batch "$batch" --epochs 2 --threads "$threads"
        --loader-threads "$loader_threads" --seed 1 --no-eval)

# The job at accumulation 1 with room for everything: the minimum and the training split's set.
big=$("$sluice" plan "${common[@]}" --memory-limit 64GiB --json | tail -n 1)
read -r minimum train_set <<< "$(/usr/bin/python3 -c '
import json, sys
p = json.loads(sys.argv[1])["job_plan"]
m = p["training"]["share_bytes"] + p["offloaded_state_bytes"]
for x in p["pipelines"]:
    m += x["minimum_bytes"] + x["prefetch_bytes"]
print(m, p["pipelines"][0]["cache_set_bytes"])' "$big")"
limit=$(/usr/bin/python3 -c "print(int($minimum + $fraction * $train_set))")
echo "job_memory_split: limit $limit B (minimum with start slots $minimum B + $fraction x the training split's $train_set B)" >&2

# label|flags
configs=("planned|--accumulate auto")
for p in $grid; do
  share=$(/usr/bin/python3 -c "print(int($limit * (100 - $p) / 100) // 256 * 256)")
  configs+=("hand $p%|--accumulate auto --memory prealloc:$share")
done

results="$work/results"
n=${#configs[@]}
for ((r = 0; r < rounds; ++r)); do
  for ((i = 0; i < n; ++i)); do
    k=$(((i + r) % n))
    flags=${configs[$k]#*|}
    load=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086
    if line=$("$sluice" train "${common[@]}" --memory-limit "$limit" $flags --json 2> "$work/err" | tail -n 1) &&
       [[ $line == \{* ]]; then
      echo "$line" >&2
    else
      line="{\"failed\": $(/usr/bin/python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()[-300:]))' "$work/err")}"
      echo "${configs[$k]%%|*}: $line" >&2
    fi
    printf '%s\t%s\t%s\n' "$k" "$load" "$line" >> "$results"
  done
done

# The whole set, with the evaluation: every file of both splits cached after the first epoch.
with_eval=("${common[@]:0:${#common[@]}-1}")
whole_plan=$("$sluice" plan "${with_eval[@]}" --memory-limit 64GiB --json | tail -n 1)
whole=$(/usr/bin/python3 -c '
import json, sys
p = json.loads(sys.argv[1])["job_plan"]
print(p["training"]["share_bytes"] + p["offloaded_state_bytes"] +
      sum(x["minimum_bytes"] + x["prefetch_bytes"] + x["cache_set_bytes"] for x in p["pipelines"]))' "$whole_plan")
whole_line=$("$sluice" train "${with_eval[@]}" --memory-limit "$whole" --json | tail -n 1)
echo "$whole_line" >&2

labels=$(printf '%s\n' "${configs[@]}" | sed 's/|.*//')
/usr/bin/python3 - "$results" "$labels" "$limit" "$whole" "$whole_line" <<'EOF'
import json, statistics, sys
path, labels, limit, whole, whole_line = sys.argv[1], sys.argv[2].splitlines(), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
runs = {k: [] for k in range(len(labels))}
loads = []
for row in open(path):
    k, load, line = row.rstrip("\n").split("\t", 2)
    runs[int(k)].append(json.loads(line))
    loads.append(float(load))
def mib(b): return "%.1f MiB" % (b / 2**20)
rows = []
for k, label in enumerate(labels):
    ok = [r for r in runs[k] if "per_epoch" in r and len(r["per_epoch"]) == 2]
    if not ok:
        rows.append((label, None, None, None, None, None, None, None, None))
        continue
    e2 = [r["per_epoch"][1] for r in ok]
    rate = statistics.median(e["images"] / e["seconds"] for e in e2)
    per_cpu = statistics.median(e["images"] / e["cpu_seconds"] for e in e2)
    steps = statistics.median(e["train_images_per_sec"] for e in e2)
    r0 = ok[0]
    plan = r0["job_plan"]
    hits = statistics.median(e["job_memory"]["caches"][0]["hit_rate"] if e["job_memory"]["caches"] else 0.0 for e in e2)
    rows.append((label, rate, steps, r0["accumulate"], plan["training"]["share_bytes"],
                 plan["pipelines"][0]["cache_bytes"], hits, [e["images"] / e["seconds"] for e in e2], per_cpu))
rated = [r for r in rows if r[1] is not None]
best_hand = max((r for r in rated if r[0] != "planned"), key=lambda r: r[1], default=None)
planned = next((r for r in rated if r[0] == "planned"), None)
print("Limit %s (%d B); %d round(s); 1-minute load average at the runs' starts: median %.1f (%.1f to %.1f)\n"
      % (mib(limit), limit, max(len(v) for v in runs.values()), statistics.median(loads), min(loads), max(loads)))
best_cpu = max((r for r in rated if r[0] != "planned"), key=lambda r: r[8], default=None)
print("| split | training share | accumulate | training cache | epoch-2 hits | epoch 2 images/s (median; rounds) | vs best hand split | images per CPU second | vs best |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    if r[1] is None:
        print("| %s | - | - | - | - | does not fit | - | - | - |" % r[0])
        continue
    print("| %s | %s | %d | %s | %.1f%% | %.0f (%s) | %.2fx | %.0f | %.2fx |" % (
        r[0], mib(r[4]), r[3], mib(r[5]), 100 * r[6], r[1], ", ".join("%.0f" % x for x in r[7]),
        r[1] / best_hand[1] if best_hand else float("nan"), r[8], r[8] / best_cpu[8] if best_cpu else float("nan")))
if planned and best_hand:
    print("\nplanned / best hand split (%s), epoch-2 images per wall second: **%.3fx** (acceptance >= 0.95)"
          % (best_hand[0], planned[1] / best_hand[1]))
    print("planned / best hand split (%s), epoch-2 images per CPU second: %.3fx" % (best_cpu[0], planned[8] / best_cpu[8]))
w = json.loads(whole_line)
print("\nWhole set (limit %s): epoch 2 of the planned split" % mib(whole))
print("\n| pipeline | cache share | epoch-2 hits | misses (files read) | hit rate |")
print("|---|---:|---:|---:|---:|")
for c in w["per_epoch"][1]["job_memory"]["caches"]:
    print("| %s | %s | %d | %d | %.2f%% |" % (c["pipeline"], mib(c["share_bytes"]), c["hits"], c["misses"], 100 * c["hit_rate"]))
EOF

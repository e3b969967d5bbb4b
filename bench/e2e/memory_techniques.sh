#!/usr/bin/env bash
# The memory techniques of the training core (docs/memory.md) side by side on one model: for each
# configuration, `sluice train --steps` over the real CIFAR-10 folder reports the allocator's peak
# in use, what it reserved, the activations' peak and the training step time; `sluice plan` with
# the same flags predicts the peak before anything runs. Every figure is also given as a ratio to
# the f32 baseline measured in the same run (ROUNDS rounds, configurations in a rotated order each
# round, the median step time of the rounds), since the machines we measure on are shared.
#
#   bench/e2e/memory_techniques.sh [BUILD_DIR]
#   env: MODEL (cifar10-separable), BATCH (128), THREADS (2), STEPS (8), WARMUP (2), ROUNDS (2),
#        DATA (../shared/datasets/cifar10, or /work/shared/datasets/cifar10)
# Prints each run's JSON line to stderr and a Markdown table to stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build}
model=${MODEL:-cifar10-separable}
batch=${BATCH:-128}
threads=${THREADS:-2}
steps=${STEPS:-8}
warmup=${WARMUP:-2}
rounds=${ROUNDS:-2}
data=${DATA:-}
if [[ -z "$data" ]]; then
  for d in ../shared/datasets/cifar10 /work/shared/datasets/cifar10; do
    [[ -d "$d/train" ]] && data=$d && break
  done
fi
[[ -d "$data/train" ]] || { echo "memory_techniques: no CIFAR-10 folder (set DATA)" >&2; exit 1; }
sluice="$build_dir/src/cli/sluice"
[[ -x "$sluice" ]] || { echo "memory_techniques: build $sluice first" >&2; exit 1; }

# label|flags (the first row is the baseline every ratio refers to)
configs=(
  "f32 (baseline, SGD)|"
  "mixed_f16|--precision mixed_f16"
  "mixed_bf16|--precision mixed_bf16"
  "accumulate 2|--accumulate 2"
  "accumulate 4|--accumulate 4"
  "checkpoint sqrt|--checkpoint sqrt"
  "checkpoint every:3|--checkpoint every:3"
  "prune 0.8|--prune 0.8"
  "AdamW|--optimizer adam"
  "AdamW + offload optimizer|--optimizer adam --offload optimizer"
  "mixed_bf16 + checkpoint sqrt|--precision mixed_bf16 --checkpoint sqrt"
  "accumulate 4 + checkpoint sqrt|--accumulate 4 --checkpoint sqrt"
  "mixed_bf16 + accumulate 4 + checkpoint sqrt + AdamW offload|--precision mixed_bf16 --accumulate 4 --checkpoint sqrt --optimizer adam --offload optimizer"
)

results=$(mktemp)
trap 'rm -f "$results"' EXIT
n=${#configs[@]}
for ((r = 0; r < rounds; ++r)); do
  for ((i = 0; i < n; ++i)); do
    k=$(((i + r) % n))
    label=${configs[$k]%%|*}
    flags=${configs[$k]#*|}
    # shellcheck disable=SC2086
    line=$("$sluice" train --data "$data" --model "$model" --batch "$batch" --steps "$steps" --warmup-steps "$warmup" \
      --threads "$threads" --no-eval --json $flags | tail -n 1)
    echo "$line" >&2
    printf 'train\t%s\t%s\n' "$k" "$line" >> "$results"
  done
done
for ((k = 0; k < n; ++k)); do
  flags=${configs[$k]#*|}
  # Pruning's masks live in host memory outside the training allocator: plan the run without them.
  plan_flags=$(sed -E 's/--prune [0-9.]+//' <<< "$flags")
  # shellcheck disable=SC2086
  line=$("$sluice" plan --model "$model" --batch "$batch" --threads "$threads" --no-eval --json $plan_flags | tail -n 1)
  printf 'plan\t%s\t%s\n' "$k" "$line" >> "$results"
done

labels=$(printf '%s\n' "${configs[@]}" | sed 's/|.*//')
/usr/bin/python3 -c '
import json, statistics, sys
path, batch, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
labels = sys.argv[4].splitlines()
runs, plans = {}, {}
for row in open(path):
    kind, k, line = row.rstrip("\n").split("\t", 2)
    (runs.setdefault(int(k), []) if kind == "train" else plans.setdefault(int(k), [])).append(json.loads(line))
mb = lambda b: b / 1e6
def step_s(j): return batch / j["train_images_per_sec"]
base = runs[0]
base_peak = base[0]["peak_device_bytes"]
base_step = statistics.median(step_s(j) for j in base)
print(f"{model}, batch {batch}, CPU backend; peak = the training allocator\x27s peak in use (MB), "
      "reserved = its regions; step = median over rounds")
print()
print("| configuration | peak in use | vs f32 | activations | reserved | planned peak | plan error | step | vs f32 |")
print("|---|---|---|---|---|---|---|---|---|")
for k, label in enumerate(labels):
    js = runs[k]
    j = js[0]
    peak = j["peak_device_bytes"]
    act = j["peak_by_category"]["activations"]
    planned = plans[k][0]["predicted_peak_bytes"]
    step = statistics.median(step_s(x) for x in js)
    err = abs(planned - peak) / peak
    reserved = j["reserved_bytes"]
    print(f"| {label} | {mb(peak):.1f} MB | {peak / base_peak:.2f}x | {mb(act):.1f} MB | {mb(reserved):.1f} MB "
          f"| {mb(planned):.1f} MB | {100 * err:.2f}% | {step:.3f} s | {step / base_step:.2f}x |")
' "$results" "$batch" "$model" "$labels"

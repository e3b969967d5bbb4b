#!/usr/bin/env bash
# Training speed, sluice's CPU backend against PyTorch's CPU, measured in one run on the same
# model, batch and threads: `sluice train --steps` over the real CIFAR-10 folder (only the
# training steps are timed: train_images_per_sec; the loader works ahead on its own thread) and
# bench/peers/torch_train_peer.py (the same architecture and optimizer, timed on one in-memory
# batch). Both leave their first WARMUP steps out. Prints every run's JSON line, then the
# medians and their ratio.
#
#   bench/peers/train_compare.sh [BUILD_DIR]
#   env: MODEL (cifar10-separable), BATCH (128), THREADS (2), STEPS (30), WARMUP (3), ROUNDS (2),
#        DATA (../shared/datasets/cifar10, or /work/shared/datasets/cifar10)
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build}
model=${MODEL:-cifar10-separable}
batch=${BATCH:-128}
threads=${THREADS:-2}
steps=${STEPS:-30}
warmup=${WARMUP:-3}
data=${DATA:-}
if [[ -z "$data" ]]; then
  for d in ../shared/datasets/cifar10 /work/shared/datasets/cifar10; do
    [[ -d "$d/train" ]] && data=$d && break
  done
fi
[[ -d "$data/train" ]] || { echo "train_compare: no CIFAR-10 folder (set DATA)" >&2; exit 1; }
sluice="$build_dir/src/cli/sluice"
[[ -x "$sluice" ]] || { echo "train_compare: build $sluice first (cmake --build $build_dir --target sluice_cli)" >&2; exit 1; }

# ROUNDS rounds in alternating order (sluice-torch, torch-sluice, ...), so a load that drifts
# during the run (a shared machine) weighs on both sides alike; the medians are compared.
rounds=${ROUNDS:-2}
run_sluice() {
  "$sluice" train --data "$data" --model "$model" --batch "$batch" --threads "$threads" \
    --steps $((steps + warmup)) --warmup-steps "$warmup" --no-eval --json | tail -n 1
}
run_torch() {
  /usr/bin/python3 bench/peers/torch_train_peer.py --model "$model" --batch "$batch" \
    --threads "$threads" --steps "$steps" --warmup "$warmup" | tail -n 1
}
results=()
for ((r = 0; r < rounds; r++)); do
  if ((r % 2 == 0)); then
    s=$(run_sluice); echo "sluice: $s"; t=$(run_torch); echo "torch:  $t"
  else
    t=$(run_torch); echo "torch:  $t"; s=$(run_sluice); echo "sluice: $s"
  fi
  results+=("$s" "$t")
done
python3 - "${results[@]}" <<'PY'
import json, statistics, sys
runs = [json.loads(a) for a in sys.argv[1:]]
sl = [r["train_images_per_sec"] for r in runs[0::2]]
to = [r["images_per_sec"] for r in runs[1::2]]
s, t = statistics.median(sl), statistics.median(to)
print(json.dumps({"model": runs[0]["model"], "batch": runs[0]["batch"], "threads": runs[0]["threads"],
                  "rounds": len(sl), "sluice_images_per_sec": s, "torch_images_per_sec": t,
                  "sluice_runs": sl, "torch_runs": to, "torch_version": runs[1]["torch_version"],
                  "ratio": s / t}))
PY

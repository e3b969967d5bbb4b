#!/usr/bin/env bash
# Tar shards against the same images as a folder, each ratio measured in one process
# by bench/e2e/shards_rate (the two pipelines take turns, an epoch each; the first turn cold after
# dropping both sources' pages, the others warm), RUNS processes per case:
#   cifar10/train, pad-crop 32, shuffled every epoch (globally for the folder, shard-wise for the
#   shards), THREADS threads, TURNS turns;
#   imagenette-val, eval 224 (resize_shorter 256, center crop 224), in order, THREADS threads.
# The shards are written once into OUT with `sluice prepare shards --shard-size SHARD_SIZE`.
#
#   bench/e2e/shards_vs_folder.sh [BUILD_DIR]
#   env: DATA (../shared/datasets), OUT (/tmp/sluice-shards-bench), SHARD_SIZE (16MiB), RUNS (3),
#        TURNS (4), THREADS (2)
# Prints each turn to stderr and a Markdown table to stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
sluice="$build/src/cli/sluice"
rate="$build/bench/e2e/shards_rate"
[[ -x "$sluice" && -x "$rate" ]] || { echo "shards_vs_folder: build sluice_cli and shards_rate in $build" >&2; exit 1; }
data=${DATA:-}
if [[ -z "$data" ]]; then
  for d in ../shared/datasets /work/shared/datasets; do
    [[ -d "$d/cifar10" ]] && data=$d && break
  done
fi
out=${OUT:-/tmp/sluice-shards-bench}
shard_size=${SHARD_SIZE:-16MiB}
runs_per_case=${RUNS:-3}
turns=${TURNS:-4}
threads=${THREADS:-2}

# name|folder|shards_rate flags
cases=(
  "cifar10/train, pad-crop 32, shuffled|cifar10/train|--transform pad-crop --size 32 --shuffle"
  "imagenette-val, eval 224|imagenette-val|--transform eval --size 224"
)
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for c in "${cases[@]}"; do
  IFS='|' read -r name folder flags <<< "$c"
  prefix=${folder//\//-}
  if ! compgen -G "$out/$prefix-*.tar" >/dev/null; then
    "$sluice" prepare shards --data "$data/$folder" --out "$out" --shard-size "$shard_size" --prefix "$prefix" >&2
  fi
  for run in $(seq 1 "$runs_per_case"); do
    echo "== $name, run $run" >&2
    # shellcheck disable=SC2086  # flags is a list of arguments
    line=$("$rate" --data "$data/$folder" --shards "$out/$prefix-*.tar" $flags --threads "$threads" \
           --turns "$turns" --drop-cache)
    echo "$name|$line" >> "$runs"
  done
done

/usr/bin/python3 - "$runs" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, text = line.rstrip("\n").split("|", 1)
    rows.setdefault(name, []).append(json.loads(text))
print("| data, transform | epoch | folder images/s | shards images/s | shards / folder: median (each run) |")
print("|---|---|---|---|---|")
for name, runs in rows.items():
    for label, turns, ratios in (
        ("cold (first, pages dropped)", [r["turns"][0] for r in runs], [r["cold_ratio"] for r in runs]),
        ("warm (later turns)", [t for r in runs for t in r["turns"][1:]], [r["warm_ratio_median"] for r in runs]),
    ):
        f = statistics.median(t["folder_images_per_sec"] for t in turns)
        s = statistics.median(t["shards_images_per_sec"] for t in turns)
        print(f"| {name} | {label} | {f:,.0f} | {s:,.0f} | {statistics.median(ratios):.2f}x "
              f"({', '.join(f'{x:.2f}' for x in ratios)}) |")
PY

#!/usr/bin/env bash
# The many-files measurement: the 1,281,000-file set (1000 class folders of hardlinks
# to cifar10/test JPEGs with ImageNet-style names; bench/e2e/make_many_files.py makes it) against
# cifar10/test itself (the same 10,000 JPEGs), with `sluice bench --transform pad-crop --size 32`'s
# pipeline, by one or two builds of sluice (before and after a change):
#   - build() time of the large set, warm (its folders were listed just before), the median of
#     ROUNDS runs of `sluice bench ... --stop-after-batches 100`;
#   - peak RSS of both sets from the same runs, and the resident bytes a file:
#     (RSS_large - RSS_small) / (files_large - files_small); the accounted item table and epoch
#     order a file (bench's memory.items and memory.shuffle);
#   - the large set's epoch rate over the small set's, from bench/e2e/many_files_rate, which runs
#     the two pipelines in one process taking turns (on a shared machine separate runs of a minute
#     each gave ratios from 0.78 to 1.63 for the same build).
#
#   bench/e2e/many_files.sh [BUILD_DIR] [OTHER_BUILD_DIR]
#   A build folder holds src/cli/sluice and bench/e2e/many_files_rate, or (a saved older build)
#   sluice, many_files_rate and libsluice.so.0 side by side.
#   env: BIG (/work/bigset), SMALL (../shared/datasets/cifar10/test), ROUNDS (3), THREADS (2),
#        CHUNK (20000: the large set's images per turn)
# Prints each run's summary to stderr and a Markdown table to stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
builds=("${1:-build}")
[[ -n "${2:-}" ]] && builds+=("$2")
big=${BIG:-/work/bigset}
small=${SMALL:-}
if [[ -z "$small" ]]; then
  for d in ../shared/datasets/cifar10/test /work/shared/datasets/cifar10/test; do
    [[ -d "$d" ]] && small=$d && break
  done
fi
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
chunk=${CHUNK:-20000}
[[ -d "$big" ]] || { echo "many_files: no $big (make it with bench/e2e/make_many_files.py)" >&2; exit 1; }
[[ -d "$small" ]] || { echo "many_files: no cifar10/test (set SMALL)" >&2; exit 1; }

runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for build in "${builds[@]}"; do
  sluice="$build/src/cli/sluice"
  rate="$build/bench/e2e/many_files_rate"
  [[ -x "$sluice" ]] || sluice="$build/sluice"
  [[ -x "$rate" ]] || rate="$build/many_files_rate"
  [[ -x "$sluice" && -x "$rate" ]] || { echo "many_files: no sluice or many_files_rate in $build" >&2; exit 1; }
  bench=("$sluice" bench --transform pad-crop --size 32 --threads "$threads" --stop-after-batches 100 --json)
  LD_LIBRARY_PATH="$(dirname "$sluice")" "${bench[@]}" --data "$big" >/dev/null  # warm the dentries and inodes
  for round in $(seq 1 "$rounds"); do
    for set in "$small" "$big"; do
      line=$(LD_LIBRARY_PATH="$(dirname "$sluice")" "${bench[@]}" --data "$set" | tail -1)
      echo "$build|bench|$set|$line" >> "$runs"
      echo "$build round $round $set: $(echo "$line" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print("setup", round(d["setup_seconds"], 2), "s, peak RSS", d["peak_rss_bytes"])')" >&2
    done
  done
  line=$(LD_LIBRARY_PATH="$(dirname "$rate")" "$rate" --big "$big" --small "$small" --threads "$threads" --chunk "$chunk" \
         2> >(tail -3 >&2))
  echo "$build|rate||$line" >> "$runs"
  echo "$build rate: $line" >&2
done

/usr/bin/python3 - "$runs" "$big" <<'PY'
import json, statistics, sys
runs, big = sys.argv[1], sys.argv[2]
by = {}
for line in open(runs):
    build, kind, dataset, text = line.rstrip("\n").split("|", 3)
    b = by.setdefault(build, {"big": [], "small": [], "rate": None})
    if kind == "rate":
        b["rate"] = json.loads(text)
    else:
        b["big" if dataset == big else "small"].append(json.loads(text))
print("| build | build() of the large set, s (median) | peak RSS small / large | resident bytes a file | accounted a file: items + epoch order | epoch rate large / small (turns' median) |")
print("|---|---|---|---|---|---|")
for build, b in by.items():
    m = statistics.median
    setup = m(d["setup_seconds"] for d in b["big"])
    rss_s = m(d["peak_rss_bytes"] for d in b["small"])
    rss_b = m(d["peak_rss_bytes"] for d in b["big"])
    n_big, n_small = b["rate"]["big_files"], b["rate"]["small_files"]
    per_file = (rss_b - rss_s) / (n_big - n_small)
    items = b["big"][0]["memory"].get("items", {}).get("peak", 0) / n_big
    order = b["big"][0]["memory"]["shuffle"]["peak"] / n_big
    r = b["rate"]
    print(f"| {build} | {setup:.2f} | {rss_s/1e6:.1f} MB / {rss_b/1e6:.1f} MB | {per_file:.1f} | {items:.1f} + {order:.1f} | "
          f"{r['ratio']:.3f} ({r['median_turn_ratio']:.3f}; {r['big_images_per_sec']:,.0f} / {r['small_images_per_sec']:,.0f} images/s) |")
PY

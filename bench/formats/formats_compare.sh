#!/usr/bin/env bash
# bench/formats/formats_compare.sh BUILD_DIR [OUT]: the decode stage on PNG and WebP data sets
# against the PyTorch DataLoader (ImageFolder's Pillow decode) and a hand-written OpenCV loop, in one
# run per set, 2 threads, ratios printed by loader_compare:
#   imagenet-photos as PNG and as WebP, eval 224 (resize_shorter 256 + center_crop 224)
#   cifar10/test as PNG, the cifar transform (pad 4 + random crop 32 + flip)
# The sets are written once into OUT (default /tmp/sluice-formats) by bench/formats/write_sets.py.
# Prints /proc/loadavg before each run: the machine is shared, so figures go with their load.
set -euo pipefail
build=${1:?usage: bench/formats/formats_compare.sh BUILD_DIR [OUT]}
out=${2:-/tmp/sluice-formats}
data=${SLUICE_DATASETS:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/datasets}
[[ -d $data/imagenet-photos ]] || data=/work/shared/datasets
rounds=${ROUNDS:-2}
/usr/bin/python3 "$(dirname "$0")/write_sets.py" "$data" "$out"
compare=$build/bench/e2e/loader_compare
for set in imagenet-png imagenet-webp; do
  echo "== $set: eval 224, load $(cat /proc/loadavg)"
  "$compare" --data "$out/$set" --transform eval --size 224 --batch 64 --threads 2 --epochs 1 \
    --rounds "$rounds" --systems sluice,torch,opencv
done
echo "== cifar-png: cifar 32, load $(cat /proc/loadavg)"
"$compare" --data "$out/cifar-png" --transform cifar --size 32 --batch 128 --threads 2 --epochs 1 \
  --rounds "$rounds" --systems sluice,torch
echo "== done, load $(cat /proc/loadavg)"

#!/usr/bin/env bash
# bench/formats/png_before_after.sh OLD_BUILD NEW_BUILD [SETS]: the PNG decode before and after a
# change to it, in one run, on the sets bench/formats/write_sets.py writes (imagenet-photos as PNG,
# eval 224; cifar10/test as PNG, the cifar transform; 2 threads):
#   1. OLD_BUILD's and NEW_BUILD's loader_compare alternately (ROUNDS times each, old first), each
#      running sluice and the decode limit (libspng's plain whole-image decode, measured in the
#      same process): the change's figure is sluice / limit after over before, which the load
#      moves less than either rate alone.
#   2. NEW_BUILD's loader_compare against the PyTorch DataLoader and the OpenCV loop (the targets).
# OLD_BUILD is a build of the library before the change with this bench/ (the limit reads PNG only
# since then): e.g. `git archive OLD | tar -x -C DIR`, bench/ copied over, built as README says.
# Prints /proc/loadavg before each run: the machine is shared, so figures go with their load.
set -euo pipefail
old=${1:?usage: bench/formats/png_before_after.sh OLD_BUILD NEW_BUILD [SETS]}
new=${2:?usage: bench/formats/png_before_after.sh OLD_BUILD NEW_BUILD [SETS]}
sets=${3:-/tmp/sluice-formats}
rounds=${ROUNDS:-2}
eval_args=(--data "$sets/imagenet-png" --transform eval --size 224 --batch 64 --threads 2 --epochs 1)
cifar_args=(--data "$sets/cifar-png" --transform cifar --size 32 --batch 128 --threads 2 --epochs 1)
for args_name in eval_args cifar_args; do
  declare -n args=$args_name
  for ((r = 1; r <= rounds; r++)); do
    for side in old new; do
      build=$old
      [[ $side == new ]] && build=$new
      echo "== ${args[1]} $side ($build), round $r, load $(cat /proc/loadavg)"
      "$build/bench/e2e/loader_compare" "${args[@]}" --rounds 1 --systems sluice,limit | grep -E '^(sluice|decode limit) '
    done
  done
done
echo "== imagenet-png: against the peers, load $(cat /proc/loadavg)"
"$new/bench/e2e/loader_compare" "${eval_args[@]}" --rounds "$rounds" --systems sluice,limit,torch,opencv
echo "== cifar-png: against the peers, load $(cat /proc/loadavg)"
"$new/bench/e2e/loader_compare" "${cifar_args[@]}" --rounds "$rounds" --systems sluice,limit,torch
echo "== done, load $(cat /proc/loadavg)"

#!/usr/bin/env bash
# fuzz/make_corpus.sh: writes decode_fuzzer's seed corpus into a folder (under the build folder,
# never the repository): a few dozen small JPEGs from the shared datasets (CIFAR-10 32x32, the
# smallest imagenette-val files in colour and grey, a progressive, a progressive grey and a
# baseline grey from wallpaper-crops, corrupt/truncated.jpg, and with Pillow five re-encodings
# of a wallpaper crop: CMYK, 4:4:4, 4:2:2, progressive 4:2:0, 130x97), each twice with different
# parameter bytes in front (decode_fuzzer.cpp reads its first 12 bytes as the op chain, the
# decode and normalize options, the DCT scale and a region), so the seeds start on different paths.
#
#   fuzz/make_corpus.sh OUT_DIR [DATASETS_DIR]
#
# DATASETS_DIR defaults to $SLUICE_DATASETS_DIR, $SLUICE_DATASETS, ../shared/datasets next to the
# checkout, then /work/shared/datasets.
set -euo pipefail

if (( $# < 1 )); then
  sed -n '2,12s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
out=$1
root=$(cd "$(dirname "$0")/.." && pwd)
# The same places the tests look (tests/CMakeLists.txt): a clone that is not next to shared/
# (a CI checkout in another folder) still finds the datasets.
data=${2:-}
if [[ -z "$data" ]]; then
  for candidate in "${SLUICE_DATASETS_DIR:-}" "${SLUICE_DATASETS:-}" "$root/../shared/datasets" /work/shared/datasets; do
    if [[ -n "$candidate" && -f "$candidate/README.md" ]]; then data=$candidate; break; fi
  done
fi
if [[ -z "$data" || ! -f "$data/README.md" ]]; then
  echo "make_corpus.sh: no datasets at '${data:-$root/../shared/datasets}' (pass DATASETS_DIR or set SLUICE_DATASETS_DIR)" >&2
  exit 1
fi

files=()
for class_dir in "$data"/cifar10/test/*/; do
  for name in 0000.jpg 0001.jpg 0002.jpg; do
    [[ -f "$class_dir$name" ]] && files+=("$class_dir$name")
  done
done
# Chosen once by size and SOF marker (the datasets are fixed by their SHA256SUMS).
files+=(
  "$data/imagenette-val/n03888257/n03888257_5501.JPEG"        # the smallest, colour
  "$data/imagenette-val/n03445777/n03445777_7711.JPEG"
  "$data/imagenette-val/n03888257/n03888257_4842.JPEG"
  "$data/imagenette-val/n03445777/n03445777_9880.JPEG"        # greyscale
  "$data/imagenette-val/n02102040/n02102040_681.JPEG"         # greyscale
  "$data/wallpaper-crops/photo_0351.jpg"                      # progressive, 500x500
  "$data/wallpaper-crops/photo_0207.jpg"                      # progressive greyscale
  "$data/wallpaper-crops/photo_0107.jpg"                      # baseline greyscale
  "$data/wallpaper-crops/photo_0163.jpg"                      # baseline 4:2:0, 300x225
  "$data/corrupt/truncated.jpg"                               # header says 100x100, data stops
)

mkdir -p "$out"
# A few encodings the datasets lack (CMYK, 4:4:4 and 4:2:2 chroma, progressive colour, odd sizes
# that end in partial iMCUs), re-encoded from a wallpaper crop with Pillow when it is installed
# (scripts/setup installs python3-pil); without it the corpus is the dataset files alone.
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
  /usr/bin/python3 - "$data/wallpaper-crops/photo_0163.jpg" "$extra" <<'PY'
import sys
from PIL import Image
source, out = sys.argv[1], sys.argv[2]
image = Image.open(source).convert("RGB")
crop = image.crop((10, 10, 77, 53))  # 67x43
crop.convert("CMYK").save(out + "/cmyk.jpg", quality=80)
crop.save(out + "/444.jpg", quality=85, subsampling=0)
crop.save(out + "/422.jpg", quality=85, subsampling=1)
crop.save(out + "/progressive_420.jpg", quality=75, subsampling=2, progressive=True)
image.resize((130, 97)).save(out + "/baseline_130x97.jpg", quality=70)
PY
  files+=("$extra"/*.jpg)
fi
# Twelve parameter bytes from a seed number: a fixed mix, so the corpus is the same every time.
params() {
  local seed=$1 j byte
  for (( j = 0; j < 12; ++j )); do
    byte=$(( (seed * 37 + j * 101 + seed * j * 13 + (seed >> 2) * 7) & 255 ))
    # Variant 0 keeps the strict decode settings (strict, RGB) on byte 4.
    if (( j == 4 && seed % 2 == 0 )); then byte=$(( byte & 0xC0 )); fi
    printf "\\x$(printf %02x "$byte")"
  done
}
count=0
for (( i = 0; i < ${#files[@]}; ++i )); do
  file=${files[$i]}
  if [[ ! -f "$file" ]]; then
    echo "make_corpus.sh: missing $file" >&2
    exit 1
  fi
  for variant in 0 1; do
    seed=$(( 2 * i + variant ))
    { params "$seed"; cat "$file"; } > "$out/seed_$(printf %03d "$seed")"
    count=$(( count + 1 ))
  done
done
echo "make_corpus.sh: $count seeds from ${#files[@]} files in $out"

#!/usr/bin/python3
"""Writes the shared data sets in other formats for bench/formats/formats_compare.sh, outside the
repository (never commit the output):

  /usr/bin/python3 bench/formats/write_sets.py ../shared/datasets OUT

OUT/imagenet-png   imagenet-photos as PNG (Pillow, compress_level 6), one flat folder
OUT/imagenet-webp  imagenet-photos as WebP (Pillow, quality 90)
OUT/cifar-png      cifar10/test as PNG (class folders kept)

Each image is decoded by Pillow and written with Pillow's own encoder, as a user converting a data
set would; files already written are kept (a rerun only completes the sets).
"""

import os
import sys

from PIL import Image


def convert(src, dst, ext, **options):
    written = 0
    for folder, _, names in os.walk(src):
        for name in sorted(names):
            if not name.lower().endswith((".jpg", ".jpeg")):
                continue
            out_dir = os.path.join(dst, os.path.relpath(folder, src))
            out = os.path.join(out_dir, os.path.splitext(name)[0] + ext)
            if os.path.exists(out):
                continue
            os.makedirs(out_dir, exist_ok=True)
            with Image.open(os.path.join(folder, name)) as im:
                im.convert("RGB").save(out + ".tmp", ext[1:].upper(), **options)
            os.replace(out + ".tmp", out)
            written += 1
    print(f"{dst}: {written} written")


def main():
    data, out = sys.argv[1], sys.argv[2]
    convert(os.path.join(data, "imagenet-photos"), os.path.join(out, "imagenet-png"), ".png", compress_level=6)
    convert(os.path.join(data, "imagenet-photos"), os.path.join(out, "imagenet-webp"), ".webp", quality=90)
    convert(os.path.join(data, "cifar10", "test"), os.path.join(out, "cifar-png"), ".png", compress_level=6)


if __name__ == "__main__":
    main()

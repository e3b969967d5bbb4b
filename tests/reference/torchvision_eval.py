#!/usr/bin/python3
"""torchvision's eval transform on PIL images, the reference sluice's eval pipeline is held to.

usage: torchvision_eval.py OUT_DIR SHORTER CROP IMAGE...
Writes OUT_DIR/<index>.raw: the uint8 HWC RGB pixels after Resize(SHORTER) + CenterCrop(CROP),
before ToTensor, i.e. the bytes a u8 NHWC sluice batch holds.
"""
import os
import sys

from PIL import Image
import torchvision.transforms as T


def main() -> None:
    out_dir, shorter, crop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    transform = T.Compose([T.Resize(shorter, interpolation=T.InterpolationMode.BILINEAR), T.CenterCrop(crop)])
    for index, path in enumerate(sys.argv[4:]):
        with Image.open(path) as image:
            pixels = transform(image.convert("RGB")).tobytes()
        with open(os.path.join(out_dir, f"{index}.raw"), "wb") as out:
            out.write(pixels)


if __name__ == "__main__":
    main()

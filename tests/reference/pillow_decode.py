#!/usr/bin/python3
"""Pillow as the reference for what a decoder should make of a JPEG, damaged or not.

usage: pillow_decode.py OUT_DIR MODE FILE...
For the i-th FILE, Image.open(FILE).convert(MODE) (MODE: RGB or L) with Pillow's defaults (no
draft, ImageFile.LOAD_TRUNCATED_IMAGES off: what torchvision's ImageFolder gets), then prints
    <i> ok <width> <height>      and writes OUT_DIR/<i>.raw, the pixels (HWC bytes), or
    <i> refused <message>        when Pillow raises.
Exits 3, naming the package, when Pillow is missing.
"""
import os
import sys

try:
    from PIL import Image
except ImportError:
    sys.stderr.write("Pillow is not installed for this interpreter: install python3-pil\n")
    sys.exit(3)


def main():
    out_dir, mode = sys.argv[1], sys.argv[2]
    for index, path in enumerate(sys.argv[3:]):
        try:
            with Image.open(path) as image:
                pixels = image.convert(mode)
                data = pixels.tobytes()
        except Exception as error:  # noqa: BLE001 - any refusal is the answer
            message = " ".join(str(error).split()) or type(error).__name__
            print(index, "refused", message)
            continue
        with open(os.path.join(out_dir, f"{index}.raw"), "wb") as out:
            out.write(data)
        print(index, "ok", pixels.size[0], pixels.size[1])


if __name__ == "__main__":
    main()

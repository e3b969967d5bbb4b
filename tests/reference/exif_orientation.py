"""The EXIF orientation corpus of the decode tests, written at test time (never checked in).

    /usr/bin/python3 tests/reference/exif_orientation.py OUT_DIR

writes JPEG and WebP (lossless and lossy) files of one 160x96 picture carrying every EXIF
orientation 1 to 8 (Pillow writes the EXIF), a little-endian block written by hand, and blocks that
lie (an IFD past the block, a count past the block, a byte order that is neither II nor MM, an
orientation of 9, two values, values past the block, an unknown type, a block cut short), and
the other value types as Pillow 9.4 reads them. For each file NAME, what Pillow makes of it:

    NAME.up      ImageOps.exif_transpose(im).convert("RGB"), raw RGB
    NAME.stored  im.convert("RGB"), raw RGB (what the default, as stored, gives)
    NAME.small   NAME.up resized to a quarter of each side (Image.resize, BILINEAR)

The manifest OUT_DIR/orientation.txt has a line per file:

    NAME WIDTH HEIGHT EXPECT

WIDTH x HEIGHT is the upright size. EXPECT is "pillow" (sluice's kExif decode equals NAME.up) or
"stored" (Pillow's exif_transpose raises on the block; sluice ignores it and decodes as stored,
so NAME.up is NAME.stored).
"""

import io
import os
import struct
import sys

import numpy as np
from PIL import Image, ImageOps

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(2828)
W, H = 160, 96

y, x = np.mgrid[0:H, 0:W]
pixels = np.stack([x * 255 // (W - 1), y * 255 // (H - 1), ((x + 2 * y) * 5) % 256], axis=-1).astype(np.int32)
pixels += rng.integers(-12, 13, size=pixels.shape)
pixels[10:30, 20:50] = [240, 30, 20]  # a corner mark: every turn moves it somewhere else
PICTURE = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
manifest = []


def exif_of(orientation):
    e = Image.Exif()
    e[0x0112] = orientation
    return e.tobytes()


def block(order, entries, ifd=8, count=None, head=None, extra=b""):
    """A hand-made EXIF block: "Exif\\0\\0", a TIFF header, one IFD of (tag, type, count, value),
    then `extra` (at offset 8 + 2 + 12 * entries + 4 of the TIFF data); a value is 4 raw bytes or
    an integer written as the type's SHORT or LONG."""
    pack = "<" if order == b"II" else ">"
    out = b"Exif\0\0" + (head or order + struct.pack(pack + "H", 42)) + struct.pack(pack + "I", ifd)
    out += struct.pack(pack + "H", len(entries) if count is None else count)
    for tag, typ, n, value in entries:
        if isinstance(value, bytes):
            raw = value
        else:
            raw = struct.pack(pack + "HH", value, 0) if typ == 3 else struct.pack(pack + "I", value)
        out += struct.pack(pack + "HHI", tag, typ, n) + raw
    return out + b"\0\0\0\0" + extra


def after(entries):
    """The offset of `extra` in a block of `entries` entries."""
    return 8 + 2 + 12 * entries + 4


def encode(fmt, exif):
    buf = io.BytesIO()
    if fmt == "jpg":
        PICTURE.save(buf, "JPEG", quality=95, exif=exif)
    elif fmt == "lossless.webp":
        PICTURE.save(buf, "WEBP", lossless=True, exif=exif)
    else:
        PICTURE.save(buf, "WEBP", quality=90, exif=exif)
    return buf.getvalue()


def add(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    with Image.open(os.path.join(OUT, name)) as im:
        stored = np.asarray(im.convert("RGB"))
    expect = "pillow"
    try:
        with Image.open(os.path.join(OUT, name)) as im:
            up = ImageOps.exif_transpose(im).convert("RGB")
    except Exception:  # noqa: BLE001 - Pillow refusing the block is the case sluice ignores
        expect = "stored"
        up = Image.fromarray(stored)
    small = up.resize((up.width // 4, up.height // 4), Image.BILINEAR)
    for suffix, array in (("up", np.asarray(up)), ("stored", stored), ("small", np.asarray(small))):
        with open(os.path.join(OUT, f"{name}.{suffix}"), "wb") as f:
            f.write(np.ascontiguousarray(array).tobytes())
    manifest.append(f"{name} {up.width} {up.height} {expect}")


for fmt in ("jpg", "lossless.webp", "lossy.webp"):
    for o in range(1, 9):
        add(f"o{o}.{fmt}", encode(fmt, exif_of(o)))

ORIENT = (0x0112, 3, 1)
add("o6_little_endian.jpg", encode("jpg", block(b"II", [(0x010F, 2, 4, 0), ORIENT + (6,)])))
add("o5_long.jpg", encode("jpg", block(b"MM", [(0x0112, 4, 1, 5)])))
add("lie_ifd_past_block.jpg", encode("jpg", block(b"MM", [ORIENT + (6,)], ifd=4000)))
add("lie_count_past_block.jpg", encode("jpg", block(b"MM", [ORIENT + (8,)], count=60000)))
add("lie_byte_order.jpg", encode("jpg", block(b"II", [ORIENT + (6,)], head=b"XX*\0")))
add("lie_orientation_9.jpg", encode("jpg", block(b"II", [ORIENT + (9,)])))
add("lie_two_values.jpg", encode("jpg", block(b"II", [(0x0112, 3, 2, 6)])))
add("lie_values_past_block.jpg", encode("jpg", block(b"MM", [(0x0112, 3, 3, 5000)])))
add("lie_unknown_type.jpg", encode("jpg", block(b"MM", [ORIENT + (6,), (0x0112, 99, 1, 3)])))
add("lie_block_cut.jpg", encode("jpg", block(b"II", [ORIENT + (6,)])[:-10]))
# Types as Pillow 9.4 reads them: a BYTE comes back as bytes (no turn), a whole RATIONAL, FLOAT or
# DOUBLE finds its integer (a turn), an entry without values is skipped (the earlier one stays).
add("type_byte.jpg", encode("jpg", block(b"II", [(0x0112, 1, 1, b"\x06\0\0\0")])))
add("type_rational.jpg", encode("jpg", block(b"MM", [(0x0112, 5, 1, after(1))], extra=struct.pack(">II", 12, 2))))
add("type_float.jpg", encode("jpg", block(b"II", [(0x0112, 11, 1, struct.pack("<f", 8.0))])))
add("type_double.jpg", encode("jpg", block(b"MM", [(0x0112, 12, 1, after(1))], extra=struct.pack(">d", 7.0))))
add("type_sbyte.jpg", encode("jpg", block(b"MM", [(0x0112, 6, 1, b"\x05\0\0\0")])))
add("count_0_after_6.jpg", encode("jpg", block(b"MM", [ORIENT + (6,), (0x0112, 3, 0, 3)])))
add("lie_ifd_past_block.lossless.webp", encode("lossless.webp", block(b"II", [ORIENT + (7,)], ifd=90000)[6:]))

with open(os.path.join(OUT, "orientation.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
print(len(manifest), "files")

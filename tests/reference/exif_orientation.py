"""The EXIF orientation corpus of the decode tests, written at test time (never checked in).

    /usr/bin/python3 tests/reference/exif_orientation.py OUT_DIR

writes JPEG, WebP (lossless and lossy), PNG (an eXIf chunk) and TIFF (the file's own Orientation
tag) files of one 160x96 picture carrying every EXIF orientation 1 to 8 (Pillow writes them), PNGs
whose eXIf chunks sit before and after the image data, a little-endian block written by hand, and blocks that
lie (an IFD past the block, a count past the block, a byte order that is neither II nor MM, an
orientation of 9, two values, values past the block, an unknown type, a block cut short), and
the other value types as Pillow 9.4 reads them. For each file NAME, what Pillow makes of it:

    NAME.up      ImageOps.exif_transpose(im).convert("RGB"), raw RGB
    NAME.stored  im.convert("RGB"), raw RGB (what the default, as stored, gives)
    NAME.small   NAME.up resized to a quarter of each side (Image.resize, BILINEAR)

The manifest OUT_DIR/orientation.txt has a line per file:

    NAME WIDTH HEIGHT EXPECT

WIDTH x HEIGHT is the upright size. EXPECT is "pillow" (sluice's kExif decode equals NAME.up),
"stored" (Pillow's exif_transpose raises on the block; sluice ignores it and decodes as stored,
so NAME.up is NAME.stored), or "pillow-load" (a TIFF: NAME.up is Pillow's convert("RGB"), which
turns a TIFF upright on load, and NAME.stored its rows in file order; see the TIFF files below).
"""

import io
import os
import struct
import sys
import zlib

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
    elif fmt == "png":
        PICTURE.save(buf, "PNG", exif=exif)
    elif fmt == "lossless.webp":
        PICTURE.save(buf, "WEBP", lossless=True, exif=exif)
    else:
        PICTURE.save(buf, "WEBP", quality=90, exif=exif)
    return buf.getvalue()


def add(name, data, tiff=False):
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
    if tiff:  # see the TIFF files below
        expect = "pillow-load"
        up, stored = Image.fromarray(stored), np.asarray(PICTURE)
    small = up.resize((up.width // 4, up.height // 4), Image.BILINEAR)
    for suffix, array in (("up", np.asarray(up)), ("stored", stored), ("small", np.asarray(small))):
        with open(os.path.join(OUT, f"{name}.{suffix}"), "wb") as f:
            f.write(np.ascontiguousarray(array).tobytes())
    manifest.append(f"{name} {up.width} {up.height} {expect}")


def tiff_of(orientation):
    """A TIFF whose own first IFD carries the orientation (Pillow's getexif() reads it there)."""
    buf = io.BytesIO()
    PICTURE.save(buf, "TIFF", tiffinfo={0x0112: orientation})
    return buf.getvalue()


def png_chunks(data):
    """A PNG's chunks as (type, whole chunk bytes), after the signature."""
    out, at = [], 8
    while at < len(data):
        n = struct.unpack(">I", data[at:at + 4])[0]
        out.append((data[at + 4:at + 8], data[at:at + 12 + n]))
        at += 12 + n
    return out


def png_exif_chunk(exif):
    body = exif[6:] if exif.startswith(b"Exif\0\0") else exif
    return struct.pack(">I", len(body)) + b"eXIf" + body + struct.pack(">I", zlib.crc32(b"eXIf" + body) & 0xFFFFFFFF)


def png_with(before=(), after=()):
    """PICTURE as a PNG with eXIf chunks of these blocks before the image data and after it."""
    chunks = png_chunks(encode("png", None))
    out = b"\x89PNG\r\n\x1a\n"
    for kind, chunk in chunks:
        if kind == b"IDAT" and before is not None:
            out += b"".join(png_exif_chunk(e) for e in before)
            before = None
        if kind == b"IEND":
            out += b"".join(png_exif_chunk(e) for e in after)
        out += chunk
    return out


for fmt in ("jpg", "lossless.webp", "lossy.webp", "png"):
    for o in range(1, 9):
        add(f"o{o}.{fmt}", encode(fmt, exif_of(o)))
# TIFF: Pillow 9.4 turns a TIFF upright when it loads it (TiffImageFile.load_end applies the
# Orientation tag), and exif_transpose, finding the tag still there, turns it a second time (back to
# the stored pixels for the mirrors, 180 degrees off for 6 and 8). So a TIFF's upright reference is
# Pillow's convert("RGB"), and its stored reference is the rows in file order (the picture written).
for o in range(1, 9):
    add(f"o{o}.tif", tiff_of(o), tiff=True)

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

# PNG: which eXIf counts. exif_transpose on an opened file sees the chunks before the image data
# (the last eXIf among them), and reads the rest of the file only when there is none there.
add("png_exif_after_idat.png", png_with(after=[exif_of(6)]))
add("png_exif_before_and_after.png", png_with(before=[exif_of(6)], after=[exif_of(3)]))
add("png_exif_two_before.png", png_with(before=[exif_of(6), exif_of(8)]))
add("png_exif_two_after.png", png_with(after=[exif_of(5), exif_of(7)]))
add("png_exif_prefixed.png", png_with(before=[b"Exif\0\0" + exif_of(6)]))  # "Exif\0\0" in the chunk: not TIFF data
add("png_exif_lie_ifd.png", png_with(before=[block(b"MM", [ORIENT + (6,)], ifd=4000)]))

with open(os.path.join(OUT, "orientation.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
print(len(manifest), "files")

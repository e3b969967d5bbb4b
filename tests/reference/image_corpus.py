"""The image-format corpus of the decode tests, written at test time (never checked in).

    /usr/bin/python3 tests/reference/image_corpus.py OUT_DIR

writes one file per variant into OUT_DIR (PNG, WebP, GIF, BMP, PNM and TIFF, by Pillow where it
can write the variant, by the format's own tools or a few lines of struct code where it cannot)
and, for each, what Pillow makes of it: NAME.rgb and NAME.l, the raw pixels of
Image.open(f).convert("RGB") and convert("L"), or nothing when Pillow refuses the file. The
manifest OUT_DIR/corpus.txt has a line per variant:

    NAME WIDTH HEIGHT TOLERANCE EXPECT

EXPECT is "pixels" (equal to Pillow's within TOLERANCE), "refused" (Pillow refuses it, and so
must sluice), or "sluice-refuses" (Pillow decodes it but sluice refuses: a damaged file Pillow does
not check, listed in docs/reliability.md). 16-bit grey is held to (v * 255 + 32767) // 65535
within 1, not to Pillow's convert(), which clips it at 255 (docs/reliability.md).
"""

import io
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(28)
manifest = []


def photo(w, h):
    """A smooth picture with edges and noise: compresses like a photo, exercises every channel."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1))
    g = (y * 255 // max(h - 1, 1))
    b = ((x + y) * 7) % 256
    img = np.stack([r, g, b], axis=-1).astype(np.int32)
    img += rng.integers(-20, 21, size=img.shape)
    img[h // 3:h // 2, w // 4:w // 2] = [250, 20, 30]
    return np.clip(img, 0, 255).astype(np.uint8)


W, H = 37, 29  # odd sizes: row padding, partial strips and tiles
RGB = photo(W, H)
ALPHA = ((np.arange(W)[None, :] * 7 + np.arange(H)[:, None] * 3) % 256).astype(np.uint8)
GREY = np.asarray(Image.fromarray(RGB).convert("L"))


def path(name):
    return os.path.join(OUT, name)


def add(name, data, tol=0, expect=None, reference=None):
    """Writes the variant and Pillow's reference; `reference` overrides Pillow's pixels (rgb, l)."""
    with open(path(name), "wb") as f:
        f.write(data)
    try:
        with Image.open(path(name)) as im:
            rgb = np.asarray(im.convert("RGB"))
        with Image.open(path(name)) as im:
            grey = np.asarray(im.convert("L"))
        if reference is not None:
            rgb, grey = reference
        status = "pixels"
        h, w = rgb.shape[:2]
        with open(path(name + ".rgb"), "wb") as f:
            f.write(np.ascontiguousarray(rgb).tobytes())
        with open(path(name + ".l"), "wb") as f:
            f.write(np.ascontiguousarray(grey).tobytes())
    except Exception:  # noqa: BLE001 - any refusal by Pillow is the reference
        status, w, h = "refused", 0, 0
    if expect == "sluice-refuses":
        status = expect
    elif expect is not None and expect != status:
        raise SystemExit(f"{name}: Pillow says {status}, the corpus expected {expect}")
    manifest.append(f"{name} {w} {h} {tol} {status}")


def pillow(img, fmt, **options):
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return buf.getvalue()


def rgb_img():
    return Image.fromarray(RGB)


def palette_img(colors=256):
    return rgb_img().quantize(colors)


# ---------------------------------------------------------------- PNG
def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width, height, depth, color, rows, interlace=0, extra=b""):
    """A PNG from packed rows (bytes per row), filter 0; Adam7 passes when interlace."""
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, interlace)
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra + png_chunk(b"IDAT", zlib.compress(raw)) +
            png_chunk(b"IEND", b""))


def pack_bits(values, depth):
    """One row of samples of `depth` bits, packed MSB first."""
    out, acc, n = bytearray(), 0, 0
    for v in values:
        acc = (acc << depth) | int(v)
        n += depth
        if n == 8:
            out.append(acc)
            acc, n = 0, 0
    if n:
        out.append(acc << (8 - n))
    return bytes(out)


def adam7(img, samples_to_row):
    """The interlaced rows of `img` (H x W x C), pass by pass."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    rows = []
    for x0, y0, dx, dy in passes:
        sub = img[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        rows += [samples_to_row(r) for r in sub]
    return rows


add("png_rgb8.png", pillow(rgb_img(), "PNG"))
add("png_rgba8.png", pillow(Image.fromarray(np.dstack([RGB, ALPHA])), "PNG"))
add("png_grey8.png", pillow(Image.fromarray(GREY), "PNG"))
add("png_grey_alpha.png", pillow(Image.fromarray(np.dstack([GREY, ALPHA]), "LA"), "PNG"))
add("png_palette8.png", pillow(palette_img(), "PNG"))
add("png_palette4.png", pillow(palette_img(16), "PNG", bits=4))
add("png_palette2.png", pillow(palette_img(4), "PNG", bits=2))
pt = palette_img(16)
pt.info["transparency"] = bytes([0, 128] + [255] * 14)
add("png_palette_trns.png", pillow(pt, "PNG", transparency=bytes([0, 128] + [255] * 14)))
add("png_rgb_trns.png", pillow(rgb_img(), "PNG", transparency=tuple(int(v) for v in RGB[0, 0])))
add("png_bilevel.png", pillow(Image.fromarray(GREY > 128), "PNG"))
for depth in (2, 4):
    levels = (GREY.astype(np.int32) * ((1 << depth) - 1) + 127) // 255
    add(f"png_grey{depth}.png", png(W, H, depth, 0, [pack_bits(r, depth) for r in levels]))
grey16 = (GREY.astype(np.uint16) * 257 + rng.integers(0, 257, size=GREY.shape)).astype(np.uint16)
g16 = np.clip((grey16.astype(np.int64) * 255 + 32767) // 65535, 0, 255).astype(np.uint8)
add("png_grey16.png", png(W, H, 16, 0, [r.astype(">u2").tobytes() for r in grey16]), tol=1,
    reference=(np.dstack([g16] * 3), g16))
rgb16 = (RGB.astype(np.uint16) * 257 + rng.integers(0, 257, size=RGB.shape)).astype(np.uint16)
add("png_rgb16.png", png(W, H, 16, 2, [r.astype(">u2").tobytes() for r in rgb16]), tol=1)
add("png_rgba16.png", png(W, H, 16, 6, [np.dstack([rgb16, grey16])[y].astype(">u2").tobytes() for y in range(H)]), tol=1)
add("png_adam7_rgb8.png", png(W, H, 8, 2, adam7(RGB, lambda r: r.tobytes()), interlace=1))
add("png_adam7_grey1.png", png(W, H, 1, 0, adam7((GREY > 100).astype(np.uint8), lambda r: pack_bits(r, 1)), interlace=1))
frames = [rgb_img(), Image.fromarray(255 - RGB)]
add("png_apng.png", pillow(frames[0], "PNG", save_all=True, append_images=frames[1:], duration=100))


def filter_rows(img, first):
    """The rows of `img` (H x W x C, uint8), each with a filter byte: row y takes filter (first + y) % 5
    (None, Sub, Up, Average, Paeth, the PNG spec's section 9), so every filter meets every pixel size,
    on the first row (whose row above is zeros) and on the others."""
    h = img.shape[0]
    rows = img.reshape(h, -1).astype(np.int32)
    bpp = img.shape[2]
    out, prior = [], np.zeros_like(rows[0])
    for y in range(h):
        cur = rows[y]
        left = np.concatenate([np.zeros(bpp, np.int32), cur[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int32), prior[:-bpp]])
        f = (first + y) % 5
        if f == 0:
            pred = np.zeros_like(cur)
        elif f == 1:
            pred = left
        elif f == 2:
            pred = prior
        elif f == 3:
            pred = (left + prior) >> 1
        else:
            pa, pb, pc = np.abs(prior - upleft), np.abs(left - upleft), np.abs(left + prior - 2 * upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, upleft))
        out.append(bytes([f]) + ((cur - pred) & 0xFF).astype(np.uint8).tobytes())
        prior = cur
    return b"".join(out)


def png_filtered(img, color, first=0, chunk=None, stream=None):
    """An 8-bit PNG of `img` with filter_rows' filters, its zlib stream (`stream` when given) in IDAT
    chunks of `chunk` bytes (one chunk when None)."""
    h, w = img.shape[:2]
    data = stream if stream is not None else zlib.compress(filter_rows(img, first))
    step = chunk or len(data)
    idats = b"".join(png_chunk(b"IDAT", data[i:i + step]) for i in range(0, len(data), step))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)) + idats +
            png_chunk(b"IEND", b""))


# Every filter on every 8-bit pixel size (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA), each filter on the
# first row once: the whole-image path's defilter (src/stages/decode/png_defilter.cpp).
for kind, color, img in [("grey", 0, GREY[:, :, None]), ("ga", 4, np.dstack([GREY, ALPHA])), ("rgb", 2, RGB),
                         ("rgba", 6, np.dstack([RGB, ALPHA]))]:
    for first in range(5):
        add(f"png_filters_{kind}_{first}.png", png_filtered(img, color, first))
# 16-bit RGB and RGBA (6 and 8 bytes a pixel) filtered the same way, through libspng.
for kind, color, img in [("rgb16", 2, RGB), ("rgba16", 6, np.dstack([RGB, ALPHA]))]:
    wide = (img.astype(">u2") * 257).view(np.uint8).reshape(img.shape[0], img.shape[1], -1)
    data = png_filtered(wide, color, 3)
    data = data[:24] + bytes([16]) + data[25:]  # the IHDR's bit depth: 16 (the CRC follows)
    ihdr = data[12:29]
    add(f"png_filters_{kind}.png", data[:29] + struct.pack(">I", zlib.crc32(ihdr) & 0xFFFFFFFF) + data[33:], tol=1)
# The image data in many IDAT chunks (joined before the one inflate call), and in chunks of 1 byte.
add("png_idat_chunks.png", png_filtered(RGB, 2, 4, chunk=97))
add("png_idat_bytes.png", png_filtered(GREY[:, :, None], 0, 1, chunk=1))
# Damaged image data behind good CRCs: Pillow refuses each.
rows_rgb = filter_rows(RGB, 4)
stream = bytearray(zlib.compress(rows_rgb))
stream[-1] ^= 0x01  # the Adler-32
add("png_bad_adler.png", png_filtered(RGB, 2, stream=bytes(stream)), expect="refused")
at = (H // 2) * (3 * W + 1)  # a row's filter byte: 5 is no filter
add("png_bad_filter.png", png_filtered(RGB, 2, stream=zlib.compress(rows_rgb[:at] + b"\x05" + rows_rgb[at + 1:])),
    expect="refused")
add("png_short_stream.png", png_filtered(RGB, 2, stream=zlib.compress(rows_rgb[:-5])), expect="refused")
# Damaged PNGs.
good = pillow(rgb_img(), "PNG")
add("png_cut_header.png", good[:20], expect="refused")
add("png_cut_half.png", good[:len(good) // 2], expect="refused")
idat = good.index(b"IDAT")
crc_flipped = bytearray(good)
idat_len = struct.unpack(">I", good[idat - 4:idat])[0]
crc_flipped[idat + 4 + idat_len] ^= 0xFF
add("png_idat_crc.png", bytes(crc_flipped), expect="sluice-refuses")
bad_zlib = bytearray(good)
bad_zlib[idat + 4] = 0x00  # the zlib header's CMF: not deflate
bad_zlib[idat + 4 + idat_len:idat + 8 + idat_len] = struct.pack(">I", zlib.crc32(bytes(bad_zlib[idat:idat + 4 + idat_len])) & 0xFFFFFFFF)
add("png_bad_zlib.png", bytes(bad_zlib), expect="refused")
# IHDR claiming 100000 x 100000 (the bomb check refuses it from the header; Pillow too, above 2x its limit).
huge = png(100000, 100000, 8, 2, [b"\0" * 3])
add("png_huge.png", huge, expect="refused")

# ---------------------------------------------------------------- WebP
rgba = Image.fromarray(np.dstack([RGB, ALPHA]))
add("webp_lossy.webp", pillow(rgb_img(), "WEBP", quality=90))
add("webp_lossless.webp", pillow(rgb_img(), "WEBP", lossless=True))
add("webp_lossy_alpha.webp", pillow(rgba, "WEBP", quality=90))
add("webp_lossless_alpha.webp", pillow(rgba, "WEBP", lossless=True))
add("webp_animated.webp", pillow(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, lossless=True))
add("webp_animated_lossy.webp", pillow(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, quality=80))
wp = pillow(rgb_img(), "WEBP", quality=90)
add("webp_cut_half.webp", wp[:len(wp) // 2], expect="refused")
add("webp_cut_header.webp", wp[:20], expect="refused")


# ---------------------------------------------------------------- GIF
def lzw_literal(indices, min_size):
    """GIF LZW data that codes every index as a literal, with a clear code before the table grows."""
    clear, end = 1 << min_size, (1 << min_size) + 1
    size = min_size + 1
    codes, run = [clear], 0
    for i in indices:
        if run == (1 << min_size) - 4:
            codes.append(clear)
            run = 0
        codes.append(int(i))
        run += 1
    codes.append(end)
    acc = nbits = 0
    out = bytearray()
    for c in codes:
        acc |= c << nbits
        nbits += size
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8
    if nbits:
        out.append(acc & 0xFF)
    blocks = bytearray([min_size])
    for i in range(0, len(out), 255):
        blocks += bytes([len(out[i:i + 255])]) + out[i:i + 255]
    return bytes(blocks + b"\0")


def gif(screen, frame_box, indices, global_pal=None, local_pal=None, transparent=None):
    """A one-frame GIF: `indices` (h x w) at frame_box (left, top) with the given palettes (n x 3)."""
    sw, sh = screen
    left, top = frame_box
    fh, fw = indices.shape
    flags = 0
    gp = b""
    if global_pal is not None:
        bits = max(1, int(np.ceil(np.log2(len(global_pal)))))
        flags = 0x80 | ((bits - 1) << 4) | (bits - 1)
        gp = np.resize(global_pal, (1 << bits, 3)).astype(np.uint8).tobytes()
    out = b"GIF89a" + struct.pack("<HHBBB", sw, sh, flags, 0, 0) + gp
    if transparent is not None:
        out += b"\x21\xf9\x04" + bytes([1]) + struct.pack("<H", 0) + bytes([transparent]) + b"\0"
    lflags, lp = 0, b""
    if local_pal is not None:
        bits = max(1, int(np.ceil(np.log2(len(local_pal)))))
        lflags = 0x80 | (bits - 1)
        lp = np.resize(local_pal, (1 << bits, 3)).astype(np.uint8).tobytes()
    out += b"\x2c" + struct.pack("<HHHHB", left, top, fw, fh, lflags) + lp
    return out + lzw_literal(indices.reshape(-1), 8) + b"\x3b"


pal_img = palette_img(64)
pal = np.array(pal_img.getpalette()[:64 * 3], dtype=np.uint8).reshape(-1, 3)
idx = np.asarray(pal_img)
add("gif_global.gif", pillow(pal_img, "GIF", interlace=0))
add("gif_interlaced.gif", pillow(pal_img, "GIF", interlace=1))
add("gif_animated.gif", pillow(frames[0].quantize(64), "GIF", save_all=True,
                              append_images=[frames[1].quantize(64)], duration=100))
add("gif_local_palette.gif", gif((W, H), (0, 0), idx, global_pal=None, local_pal=pal[::-1]))
add("gif_local_over_global.gif", gif((W, H), (0, 0), idx, global_pal=pal, local_pal=pal[::-1]))
add("gif_small_frame.gif", gif((W, H), (5, 3), idx[:10, :12], global_pal=pal))
add("gif_small_frame_transparent.gif", gif((W, H), (5, 3), idx[:10, :12], global_pal=pal, transparent=7))
add("gif_frame_outside.gif", gif((20, 10), (10, 5), idx[:12, :15], global_pal=pal))
add("gif_no_palette.gif", gif((W, H), (0, 0), idx, global_pal=None))
gg = pillow(pal_img, "GIF")
add("gif_cut_half.gif", gg[:len(gg) // 2], expect="refused")
add("gif_cut_header.gif", gg[:11], expect="refused")


# ---------------------------------------------------------------- BMP
def bmp(width, height, bits, rows, palette=None, compression=0, header=40, top_down=False, masks=None,
        pal_entry=4):
    """A BMP from its rows in file order (already padded to 4 bytes unless RLE data)."""
    pal = b""
    if palette is not None:
        pal = b"".join(bytes([b, g, r] + ([0] if pal_entry == 4 else [])) for r, g, b in palette)
    data = b"".join(rows)
    if header == 12:
        dib = struct.pack("<IHHHH", 12, width, height, 1, bits)
    else:
        dib = struct.pack("<IiiHHIIiiII", header, width, -height if top_down else height, 1, bits, compression,
                          len(data), 2835, 2835, len(palette) if palette is not None else 0, 0)
        if header > 40:
            m = list(masks or (0, 0, 0, 0)) + [0] * 4
            dib += struct.pack("<IIII", *m[:4]) + b"\0" * (header - 56)
        elif masks is not None:
            dib += struct.pack("<" + "I" * len(masks), *masks)
    offset = 14 + len(dib) + len(pal)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + dib + pal + data


def pad4(b):
    return b + b"\0" * (-len(b) % 4)


def bottom_up(rows):
    return rows[::-1]


add("bmp_24.bmp", pillow(rgb_img(), "BMP"))
add("bmp_8_palette.bmp", pillow(palette_img(), "BMP"))
add("bmp_8_grey.bmp", pillow(Image.fromarray(GREY), "BMP"))
add("bmp_1.bmp", pillow(Image.fromarray(GREY > 128), "BMP"))
add("bmp_32.bmp", pillow(rgba, "BMP"))
p16 = palette_img(16)
i16 = np.asarray(p16)
pal16 = np.array(p16.getpalette()[:48], dtype=np.uint8).reshape(-1, 3)
add("bmp_4.bmp", bmp(W, H, 4, bottom_up([pad4(pack_bits(r, 4)) for r in i16]), palette=pal16))
add("bmp_24_top_down.bmp", bmp(W, H, 24, [pad4(r[:, ::-1].tobytes()) for r in RGB], top_down=True))
add("bmp_24_os2.bmp", bmp(W, H, 24, bottom_up([pad4(r[:, ::-1].tobytes()) for r in RGB]), header=12))
add("bmp_8_os2.bmp", bmp(W, H, 8, bottom_up([pad4(r.tobytes()) for r in idx]), palette=pal, header=12, pal_entry=3))
r5, g5, b5 = (RGB[..., 0] >> 3).astype(np.uint16), (RGB[..., 1] >> 3).astype(np.uint16), (RGB[..., 2] >> 3).astype(np.uint16)
g6 = (RGB[..., 1] >> 2).astype(np.uint16)
v555 = (r5 << 10) | (g5 << 5) | b5
v565 = (r5 << 11) | (g6 << 5) | b5
add("bmp_16_555.bmp", bmp(W, H, 16, bottom_up([pad4(r.astype("<u2").tobytes()) for r in v555])))
add("bmp_16_565.bmp", bmp(W, H, 16, bottom_up([pad4(r.astype("<u2").tobytes()) for r in v565]), compression=3,
                          masks=(0xF800, 0x7E0, 0x1F)))
bgra = np.dstack([RGB[..., 2], RGB[..., 1], RGB[..., 0], ALPHA])
add("bmp_32_bitfields_v5.bmp", bmp(W, H, 32, bottom_up([r.tobytes() for r in bgra]), compression=3, header=124,
                                   masks=(0xFF0000, 0xFF00, 0xFF, 0xFF000000)))
add("bmp_32_bitfields_v4.bmp", bmp(W, H, 32, bottom_up([r.tobytes() for r in bgra]), compression=3, header=108,
                                   masks=(0xFF0000, 0xFF00, 0xFF, 0)))


def rle8_row(row):
    out = bytearray()
    i = 0
    while i < len(row):
        j = i
        while j < len(row) and row[j] == row[i] and j - i < 255:
            j += 1
        if j - i >= 3:
            out += bytes([j - i, row[i]])
            i = j
        else:  # a literal run of up to 16 (even count: Pillow 9.4 misreads odd RLE4 literal runs)
            k = min(len(row), i + 16)
            n = k - i
            if n < 3:
                for v in row[i:k]:
                    out += bytes([1, v])
            else:
                out += bytes([0, n]) + bytes(row[i:k]) + (b"\0" if n % 2 else b"")
            i = k
    return bytes(out + b"\0\0")


def rle4_row(row):
    out = bytearray()
    for i in range(0, len(row), 2):
        pair = row[i:i + 2]
        hi, lo = int(pair[0]), int(pair[1]) if len(pair) > 1 else 0
        out += bytes([len(pair), (hi << 4) | lo])
    return bytes(out + b"\0\0")


rle_idx = np.repeat(idx[:, ::4], 4, axis=1)[:, :W]  # runs, and literals where it varies
add("bmp_rle8.bmp", bmp(W, H, 8, bottom_up([rle8_row(r) for r in rle_idx]) + [b"\0\1"], palette=pal, compression=1))
add("bmp_rle4.bmp", bmp(W, H, 4, bottom_up([rle4_row(r) for r in i16]) + [b"\0\1"], palette=pal16, compression=2))
b24 = pillow(rgb_img(), "BMP")
add("bmp_cut_half.bmp", b24[:len(b24) // 2], expect="refused")
add("bmp_rle8_cut.bmp", bmp(W, H, 8, bottom_up([rle8_row(r) for r in rle_idx])[:H // 2], palette=pal, compression=1),
    expect="refused")
add("bmp_cut_header.bmp", b24[:20], expect="refused")

# ---------------------------------------------------------------- PNM
add("pnm_p6.ppm", pillow(rgb_img(), "PPM"))
add("pnm_p5.pgm", pillow(Image.fromarray(GREY), "PPM"))
add("pnm_p4.pbm", pillow(Image.fromarray(GREY > 128), "PPM"))


def plain(kind, rows, maxval=None, comment=True):
    head = f"{kind}\n" + ("# written by the sluice corpus\n" if comment else "") + f"{W} {H}\n"
    if maxval is not None:
        head += f"{maxval}\n"
    return (head + "\n".join(" ".join(str(int(v)) for v in r) for r in rows) + "\n").encode()


add("pnm_p1.pbm", ("P1\n# bits\n" + f"{W} {H}\n" + "\n".join("".join("1" if v else "0" for v in r)
                                                                 for r in (GREY < 128)) + "\n").encode())
add("pnm_p2.pgm", plain("P2", GREY, 255))
add("pnm_p3.ppm", plain("P3", RGB.reshape(H, -1), 255))
add("pnm_p2_maxval100.pgm", plain("P2", (GREY.astype(np.int32) * 100 + 127) // 255, 100))
add("pnm_p5_maxval100.pgm", f"P5 {W} {H} 100\n".encode() + ((GREY.astype(np.int32) * 100 + 127) // 255).astype(np.uint8).tobytes())
add("pnm_p6_maxval1000.ppm", f"P6\n{W} {H}\n1000\n".encode() +
    ((RGB.astype(np.int32) * 1000 + 127) // 255).astype(">u2").tobytes())
p16 = ((GREY.astype(np.int32) * 1000 + 127) // 255)
p16ref = np.round(p16 / 1000 * 255).astype(np.uint8)
add("pnm_p5_16bit.pgm", f"P5\n{W} {H}\n1000\n".encode() + p16.astype(">u2").tobytes(),
    reference=(np.dstack([p16ref] * 3), p16ref))
pp = pillow(rgb_img(), "PPM")
add("pnm_cut_half.ppm", pp[:len(pp) // 2], expect="refused")
add("pnm_p3_cut.ppm", plain("P3", RGB.reshape(H, -1), 255)[:200], expect="sluice-refuses")

# ---------------------------------------------------------------- TIFF
for comp in ("raw", "tiff_lzw", "tiff_deflate", "packbits"):
    add(f"tiff_rgb_{comp}.tif", pillow(rgb_img(), "TIFF", compression=comp))
add("tiff_rgb_jpeg.tif", pillow(rgb_img(), "TIFF", compression="jpeg", quality=90))
add("tiff_grey_lzw.tif", pillow(Image.fromarray(GREY), "TIFF", compression="tiff_lzw"))
add("tiff_palette.tif", pillow(palette_img(), "TIFF", compression="tiff_lzw"))
add("tiff_bilevel.tif", pillow(Image.fromarray(GREY > 128), "TIFF", compression="packbits"))
cmyk = Image.fromarray(np.dstack([RGB, ALPHA]), "CMYK")
add("tiff_cmyk.tif", pillow(cmyk, "TIFF", compression="tiff_lzw"))
add("tiff_rgba.tif", pillow(rgba, "TIFF", compression="tiff_deflate"))
g16img = Image.fromarray(grey16.astype(np.uint16), "I;16")
add("tiff_grey16.tif", pillow(g16img, "TIFF"), tol=1, reference=(np.dstack([g16] * 3), g16))
add("tiff_multipage.tif", pillow(frames[0], "TIFF", save_all=True, append_images=frames[1:]))
add("tiff_strips.tif", pillow(rgb_img(), "TIFF", compression="tiff_lzw", tiffinfo={278: 4}))


def tiff_rgb16():
    """A baseline little-endian TIFF, 16-bit RGB, one strip (Pillow cannot write 16-bit RGB)."""
    data = rgb16.astype("<u2").tobytes()
    tags = [(256, 4, 1, W), (257, 4, 1, H), (258, 3, 3, None), (259, 3, 1, 1), (262, 3, 1, 2),
            (273, 4, 1, None), (277, 3, 1, 3), (278, 4, 1, H), (279, 4, 1, len(data)), (284, 3, 1, 1)]
    ifd_at = 8
    extra_at = ifd_at + 2 + 12 * len(tags) + 4
    bps_at, data_at = extra_at, extra_at + 6
    out = b"II*\0" + struct.pack("<I", ifd_at) + struct.pack("<H", len(tags))
    for tag, typ, count, value in tags:
        if tag == 258:
            value = bps_at
        if tag == 273:
            value = data_at
        out += struct.pack("<HHI", tag, typ, count) + (struct.pack("<HH", value, 0) if typ == 3 and count == 1
                                                       else struct.pack("<I", value))
    return out + b"\0\0\0\0" + struct.pack("<HHH", 16, 16, 16) + data


add("tiff_rgb16.tif", tiff_rgb16(), tol=1)
tif = pillow(rgb_img(), "TIFF", compression="tiff_lzw")
add("tiff_cut_half.tif", tif[:len(tif) // 2], expect="refused")
past = bytearray(tiff_rgb16())
so = past.index(struct.pack("<HHI", 273, 4, 1))
past[so + 8:so + 12] = struct.pack("<I", len(past) + 100000)
add("tiff_strip_past_end.tif", bytes(past), expect="refused")
tiffcp = shutil.which("tiffcp")
if tiffcp is not None:
    subprocess.run([tiffcp, "-c", "lzw", "-t", "-w", "16", "-l", "16", path("tiff_rgb_raw.tif"), path("tiled.tmp")],
                   check=True)
    with open(path("tiled.tmp"), "rb") as f:
        add("tiff_tiled_lzw.tif", f.read())
    os.remove(path("tiled.tmp"))

# Anything else: refused by both.
add("empty.png", b"", expect="refused")

with open(path("corpus.txt"), "w") as f:
    f.write("\n".join(manifest) + "\n")
print(len(manifest), "variants")

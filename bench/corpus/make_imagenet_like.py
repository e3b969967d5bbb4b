#!/usr/bin/python3
"""make_imagenet_like.py: writes sluice's ImageNet-like benchmark corpus, outside the
repository, from the JPEG and PNG wallpapers of four Debian packages and from imagenette-val,
without copying ImageNet.

Two splits of the same make-up, drawn from disjoint sources: `tune/` to profile and tune on,
`heldout/` to measure acceptance on. Each image is a seeded random crop of a source, resized with
Pillow's LANCZOS to an ImageNet-like size (most at a 500-pixel long side, a tail up to 4000) and
encoded at quality 90-96 with ImageNet-like shares of chroma subsampling, progressive, greyscale
and CMYK files, after a camera-like grain (GRAIN_SIGMA says why); a share of each split
re-encodes imagenette-val photographs (224x224) the same way.
The same command on the same Debian packages writes the same bytes (SHA256SUMS in the output).

Run under Debian's Python, which has Pillow (the `python3` first on PATH may not):

    apt-get install mate-backgrounds plasma-workspace-wallpapers ukui-wallpapers lxqt-themes
    /usr/bin/python3 bench/corpus/make_imagenet_like.py --out /work/corpus/imagenet-like

It prints the corpus's statistics as the Markdown table docs/benchmarks.md holds, and writes
MANIFEST.tsv (every file's source, crop, size and encoding) and SHA256SUMS next to the splits.
"""

import argparse
import hashlib
import io
import os
import random
import statistics
import subprocess
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

# The Debian 12 packages whose wallpapers are the sources (the ones wallpaper-crops came from;
# opencv-doc's sample photos and python3-sklearn's two are left out: 274 MB installed for a
# handful of small images).
PACKAGES = ["mate-backgrounds", "plasma-workspace-wallpapers", "ukui-wallpapers", "lxqt-themes"]
# Smaller files in those packages are icons and theme parts, not pictures.
MIN_SOURCE_SIDE = 1000
# Sources under this many bits per pixel at the probe (probe_bpp) are flat graphics, not pictures.
MIN_PROBE_BPP = 1.0
IMAGENETTE = "/work/shared/datasets/imagenette-val"
# Class folders of both splits: imagenette's ten WordNet ids, so the layout is ImageNet's.
CLASSES = ["n01440764", "n02102040", "n02979186", "n03000684", "n03028079",
           "n03394916", "n03417042", "n03425413", "n03445777", "n03888257"]

# Per split, counts not probabilities, so every split has exactly these shares.
PER_SPLIT = 1000
IMAGENETTE_SHARE = 0.15    # re-encoded imagenette-val photographs (224x224)
GREY_SHARE = 0.015         # ImageNet: about 1-2% greyscale
CMYK_COUNT = 4             # ImageNet-1k train holds 22 CMYK files; a handful
PROGRESSIVE_SHARE = 0.04   # a few per cent
SUBSAMPLING = [(2, 0.85), (1, 0.07), (0, 0.08)]  # Pillow's codes: 4:2:0, 4:2:2, 4:4:4
QUALITY = (90, 96)

# The long side of a wallpaper-made image: Flickr's 500-pixel "medium" size dominates ImageNet,
# with smaller files below it and a tail of larger originals.
LONG_SIDE_BINS = [  # (share, low, high, log-uniform draw in [low, high])
    (0.08, 200, 450),
    (0.74, 500, 500),
    (0.11, 501, 1200),
    (0.07, 1201, 4000),
]
ASPECTS = [(4 / 3, 0.38), (3 / 2, 0.20), (3 / 4, 0.14), (2 / 3, 0.08), (1.0, 0.08), (16 / 9, 0.12)]
CROP_SHARE = (0.5, 1.0)  # of the largest crop of that aspect the source holds, per side
# Grain: Gaussian noise of a standard deviation drawn in this range (grey levels, per channel),
# added to the wallpaper-made images before encoding. Camera photographs carry sensor noise and
# fine texture that wallpapers (rendered, denoised or downscaled art) lack, and entropy decoding,
# which no DCT scaling or region skips, grows with the coded bits per pixel. The range is
# calibrated on the tune split so that those images carry about as many bits per pixel as the
# real ImageNet photographs of imagenette-val re-encoded at the same qualities (the summary
# prints both); --no-grain writes the corpus without it.
GRAIN_SIGMA = (2.0, 5.0)


@dataclass
class Source:
    path: str
    package: str
    width: int
    height: int
    thumbnail: list = field(default_factory=list, repr=False)
    probe_bpp: float = 0.0


@dataclass
class Plan:
    index: int
    name: str
    label: int
    origin: str = ""          # a Source path or an imagenette file
    width: int = 0
    height: int = 0
    crop: tuple = (0, 0, 0, 0)
    mode: str = "RGB"         # RGB, L or CMYK
    quality: int = 95
    subsampling: int = 2
    progressive: bool = False
    optimize: bool = False
    grain: float = 0.0        # sigma of the Gaussian grain, grey levels (0: none)


def package_files(package):
    out = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"make_imagenet_like: package {package} is not installed: apt-get install {' '.join(PACKAGES)}")
    return sorted(p for p in out.stdout.split("\n") if p.lower().endswith((".jpg", ".jpeg", ".png")))


def probe_bpp(picture):
    """Bits per pixel of the picture downscaled to a 500-pixel long side at quality 93, 4:2:0."""
    scale = 500 / max(picture.size)
    small = picture.resize((round(picture.width * scale), round(picture.height * scale)), Image.LANCZOS)
    out = io.BytesIO()
    small.save(out, "JPEG", quality=93, subsampling=2)
    return 8 * len(out.getvalue()) / (small.width * small.height)


def wallpaper_sources():
    """The pictures, each once, photographs and textured art only.

    Plasma ships one wallpaper in up to 13 sizes and mate some in two (keep the largest); the
    same picture can also sit in two packages, so pictures whose 32x32 thumbnails match are one.
    Flat graphics (logos, stripes, gradients: under MIN_PROBE_BPP at the probe) are dropped:
    ImageNet holds photographs, and those would make the corpus far cheaper to decode than it.
    """
    best = {}
    for package in PACKAGES:
        for path in package_files(package):
            if not os.path.isfile(path):
                continue
            with Image.open(path) as im:
                w, h = im.size
            if min(w, h) < MIN_SOURCE_SIDE:
                continue
            parts = path.split("/")
            key = parts[parts.index("wallpapers") + 1] if "/usr/share/wallpapers/" in path else path
            if key not in best or w * h > best[key].width * best[key].height:
                best[key] = Source(path, package, w, h)
    kept = []
    for s in sorted(best.values(), key=lambda s: (-s.width * s.height, s.package, s.path)):
        with Image.open(s.path) as im:
            picture = im.convert("RGB")
        s.thumbnail = list(picture.convert("L").resize((32, 32), Image.BOX).getdata())
        if any(sum(abs(a - b) for a, b in zip(s.thumbnail, k.thumbnail)) < 8 * 1024 for k in kept):
            continue  # a smaller copy of a picture already kept
        s.probe_bpp = probe_bpp(picture)
        if s.probe_bpp >= MIN_PROBE_BPP:
            kept.append(s)
    return sorted(kept, key=lambda s: (s.package, s.path))


def split_sources(sources, rng):
    """Disjoint halves, stratified by package so both splits hold the same kinds of picture."""
    tune, heldout = [], []
    for package in PACKAGES:
        group = [s for s in sources if s.package == package]
        rng.shuffle(group)
        for i, s in enumerate(group):
            # Alternate which split gets a package's odd one out, so the halves stay even.
            (tune if (i + PACKAGES.index(package)) % 2 == 0 else heldout).append(s)
    return tune, heldout


def draw(rng, weighted):
    x = rng.random() * sum(w for _, w in weighted)
    for value, w in weighted:
        x -= w
        if x < 0:
            return value
    return weighted[-1][0]


def draw_long_side(rng):
    x = rng.random()
    for share, low, high in LONG_SIDE_BINS:
        if x < share:
            return low if low == high else round(low * (high / low) ** rng.random())
        x -= share
    return LONG_SIDE_BINS[-1][1]


def plan_wallpaper(plan, source, rng):
    aspect = draw(rng, ASPECTS)
    long_side = draw_long_side(rng)
    w, h = (long_side, round(long_side / aspect)) if aspect >= 1 else (round(long_side * aspect), long_side)
    # The largest crop of this aspect in the source, then a random share of it; never upscale.
    max_w = min(source.width, round(source.height * aspect))
    max_h = min(source.height, round(source.width / aspect))
    if w > max_w or h > max_h:  # the tail can ask more than the source has: shrink to fit
        fit = min(max_w / w, max_h / h)
        w, h = int(w * fit), int(h * fit)
    share = rng.uniform(*CROP_SHARE)
    crop_w = max(w, round(max_w * share))
    crop_h = max(h, min(max_h, round(crop_w / aspect)))
    crop_w = min(max_w, max(w, round(crop_h * aspect)))
    x0 = rng.randint(0, source.width - crop_w)
    y0 = rng.randint(0, source.height - crop_h)
    plan.origin = source.path
    plan.width, plan.height = w, h
    plan.crop = (x0, y0, x0 + crop_w, y0 + crop_h)


def plan_split(split, sources, imagenette_files, seed, grain):
    rng = random.Random(f"{seed}:{split}")
    n_imagenette = round(PER_SPLIT * IMAGENETTE_SHARE)
    plans = [Plan(index=i, name=f"{split}_{i:05d}.JPEG", label=i % len(CLASSES)) for i in range(PER_SPLIT)]
    # Which files are imagenette's, greyscale, CMYK and progressive: exact counts, seeded choice.
    order = list(range(PER_SPLIT))
    rng.shuffle(order)
    imagenette_idx = set(order[:n_imagenette])
    rest = order[n_imagenette:]
    grey_idx = set(rest[:round(PER_SPLIT * GREY_SHARE)])
    cmyk_idx = set(rest[len(grey_idx):len(grey_idx) + CMYK_COUNT])
    rng.shuffle(order)
    progressive_idx = set(order[:round(PER_SPLIT * PROGRESSIVE_SHARE)])
    for p in plans:
        prng = random.Random(f"{seed}:{split}:{p.index}")
        if p.index in imagenette_idx:
            p.origin = imagenette_files.pop()
            p.width = p.height = 224
        else:
            plan_wallpaper(p, sources[p.index % len(sources)], prng)
            p.grain = prng.uniform(*GRAIN_SIGMA) if grain else 0.0
        p.mode = "L" if p.index in grey_idx else "CMYK" if p.index in cmyk_idx else "RGB"
        p.quality = prng.randint(*QUALITY)
        p.subsampling = draw(prng, SUBSAMPLING)
        p.progressive = p.index in progressive_idx
        p.optimize = p.progressive or prng.random() < 0.5
    return plans


def render(plan, picture):
    """picture: the source decoded (RGB). Returns the JPEG bytes."""
    if plan.crop != (0, 0, 0, 0):
        picture = picture.resize((plan.width, plan.height), Image.LANCZOS, box=plan.crop)
    if plan.grain > 0:
        noise = np.random.default_rng(zlib.crc32(plan.name.encode())).normal(0.0, plan.grain, (plan.height, plan.width, 3))
        picture = Image.fromarray(np.clip(np.rint(np.asarray(picture, np.float32) + noise), 0, 255).astype(np.uint8))
    picture = picture.convert(plan.mode) if plan.mode != "RGB" else picture
    out = io.BytesIO()
    options = {"quality": plan.quality, "optimize": plan.optimize, "progressive": plan.progressive}
    if plan.mode == "RGB":  # Adobe CMYK files are not subsampled; greyscale has no chroma
        options["subsampling"] = plan.subsampling
    picture.save(out, "JPEG", **options)
    return out.getvalue()


def write_split(out_dir, split, plans, manifest):
    by_origin = {}
    for p in plans:
        by_origin.setdefault(p.origin, []).append(p)
    for origin in sorted(by_origin):  # one decode per source
        with Image.open(origin) as im:
            picture = im.convert("RGB")
        for p in by_origin[origin]:
            data = render(p, picture)
            folder = os.path.join(out_dir, split, CLASSES[p.label])
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, p.name)
            with open(path, "wb") as f:
                f.write(data)
            manifest.append((os.path.relpath(path, out_dir), p, len(data), hashlib.sha256(data).hexdigest()))
        print(f"  {split}: {os.path.basename(origin)} -> {len(by_origin[origin])} images", file=sys.stderr)


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def summary(manifest, split):
    rows = [(p, size) for path, p, size, _ in manifest if path.startswith(split + "/")]
    longs = [max(p.width, p.height) for p, _ in rows]
    pixels = sum(p.width * p.height for p, _ in rows)
    total = sum(size for _, size in rows)
    sub = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}
    colour = [p for p, _ in rows if p.mode != "L"]
    return {
        "files": len(rows),
        "bytes": total,
        "median": f"{statistics.median(p.width for p, _ in rows):.0f}x{statistics.median(p.height for p, _ in rows):.0f}",
        "long side p10/p50/p90/p99/max": "/".join(str(percentile(longs, q)) for q in (0.1, 0.5, 0.9, 0.99)) + f"/{max(longs)}",
        "over 1000 px long": sum(1 for v in longs if v > 1000),
        "bits per pixel": f"{8 * total / pixels:.2f}",
        "quality": f"{min(p.quality for p, _ in rows)}-{max(p.quality for p, _ in rows)}",
        "greyscale / CMYK / progressive": f"{sum(p.mode == 'L' for p, _ in rows)} / {sum(p.mode == 'CMYK' for p, _ in rows)}"
                                          f" / {sum(p.progressive for p, _ in rows)}",
        "chroma 4:2:0 / 4:2:2 / 4:4:4": " / ".join(str(sum(sub[p.subsampling] == s for p in colour if p.mode == 'RGB'))
                                                 for s in ("4:2:0", "4:2:2", "4:4:4")),
        "imagenette-val re-encoded": sum(1 for p, _ in rows if p.origin.startswith(IMAGENETTE)),
        "bits per pixel: wallpaper-made up to 1200 px / imagenette-val":
            f"{bpp(rows, lambda p: not p.origin.startswith(IMAGENETTE) and max(p.width, p.height) <= 1200):.2f}"
            f" / {bpp(rows, lambda p: p.origin.startswith(IMAGENETTE)):.2f}",
    }


def bpp(rows, keep):
    kept = [(p, size) for p, size in rows if keep(p)]
    return 8 * sum(size for _, size in kept) / sum(p.width * p.height for p, _ in kept)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder, outside the repository")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--no-grain", action="store_true", help="no Gaussian grain on wallpaper-made images")
    args = parser.parse_args()
    out_dir = os.path.abspath(args.out)
    if os.path.exists(os.path.join(out_dir, "MANIFEST.tsv")):
        sys.exit(f"make_imagenet_like: {out_dir} already holds a corpus; remove it first")

    sources = wallpaper_sources()
    rng = random.Random(args.seed)
    tune_sources, heldout_sources = split_sources(sources, rng)
    imagenette = sorted(os.path.join(d, f) for d, _, fs in os.walk(IMAGENETTE) for f in fs if f.endswith(".JPEG"))
    rng.shuffle(imagenette)
    half = len(imagenette) // 2
    splits = {"tune": plan_split("tune", tune_sources, imagenette[:half], args.seed, not args.no_grain),
              "heldout": plan_split("heldout", heldout_sources, imagenette[half:], args.seed, not args.no_grain)}
    print(f"make_imagenet_like: {len(sources)} sources ({len(tune_sources)} tune, {len(heldout_sources)} held out)",
          file=sys.stderr)

    manifest = []
    for split, plans in splits.items():
        write_split(out_dir, split, plans, manifest)
    with open(os.path.join(out_dir, "MANIFEST.tsv"), "w") as f:
        f.write("path\tsource\tcrop\twidth\theight\tmode\tquality\tsubsampling\tprogressive\toptimize\tgrain\tbytes\n")
        for path, p, size, _ in sorted(manifest, key=lambda m: m[0]):
            f.write(f"{path}\t{p.origin}\t{','.join(map(str, p.crop))}\t{p.width}\t{p.height}\t{p.mode}\t{p.quality}\t"
                    f"{p.subsampling}\t{int(p.progressive)}\t{int(p.optimize)}\t{p.grain:.2f}\t{size}\n")
    with open(os.path.join(out_dir, "SHA256SUMS"), "w") as f:
        for path, _, _, digest in sorted(manifest, key=lambda m: m[0]):
            f.write(f"{digest}  {path}\n")
    with open(os.path.join(out_dir, "SOURCES.tsv"), "w") as f:
        f.write("split\tpackage\tpath\twidth\theight\tprobe_bpp\n")
        for split, group in (("tune", tune_sources), ("heldout", heldout_sources)):
            for s in group:
                f.write(f"{split}\t{s.package}\t{s.path}\t{s.width}\t{s.height}\t{s.probe_bpp:.2f}\n")

    stats = {split: summary(manifest, split) for split in splits}
    print("| | " + " | ".join(f"`{s}/`" for s in stats) + " |")
    print("|---|" + "---|" * len(stats))
    for key in stats["tune"]:
        print(f"| {key} | " + " | ".join(str(stats[s][key]) for s in stats) + " |")


if __name__ == "__main__":
    main()

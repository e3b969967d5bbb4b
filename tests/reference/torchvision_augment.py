#!/usr/bin/python3
"""torchvision's functional augmentations on PIL images, the reference of the augment kernels'
tests (tests/unit/stages/augment/).

Reads a job file, one job a line, `key=value` tokens (lists comma-separated):
  op=decode in=<image file> mode=<L|RGB> out=<file.raw>
      decodes with Pillow and writes the pixels (HWC bytes); prints "<width> <height>".
  op=<name> in=<file.raw> w=<int> h=<int> mode=<L|RGB> out=<file.raw> [arguments]
      Image.frombytes(mode, (w, h), in), then torchvision.transforms.functional.<name> on it,
      and writes the pixels. Names and arguments:
        affine angle= translate=tx,ty scale= shear=sx,sy interp=<nearest|bilinear>
               [fill=v,...] [center=cx,cy]
        rotate angle= interp= [fill=v,...] [center=cx,cy]
        gaussian_blur kernel=kx,ky sigma=sx,sy
        posterize bits=   solarize threshold=   invert   autocontrast   equalize
        adjust_sharpness factor=
Exits 3, naming the package, when torchvision or Pillow is missing.
"""
import sys

try:
    from PIL import Image
    import torchvision.transforms.functional as F
    from torchvision.transforms import InterpolationMode
except ImportError as e:
    sys.stderr.write("torchvision or Pillow missing for this interpreter (%s): install "
                     "python3-torchvision and python3-pil\n" % e)
    sys.exit(3)

INTERP = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}


def numbers(text, kind=float):
    return [kind(v) for v in text.split(",")]


def fill_of(job):
    return numbers(job["fill"], int) if "fill" in job else None


def center_of(job):
    return numbers(job["center"], int) if "center" in job else None


def apply(op, im, job):
    if op == "affine":
        return F.affine(im, angle=float(job["angle"]), translate=numbers(job["translate"], int),
                        scale=float(job["scale"]), shear=numbers(job["shear"]),
                        interpolation=INTERP[job["interp"]], fill=fill_of(job), center=center_of(job))
    if op == "rotate":
        return F.rotate(im, float(job["angle"]), interpolation=INTERP[job["interp"]],
                        expand=False, center=center_of(job), fill=fill_of(job))
    if op == "gaussian_blur":
        return F.gaussian_blur(im, numbers(job["kernel"], int), numbers(job["sigma"]))
    if op == "posterize":
        return F.posterize(im, int(job["bits"]))
    if op == "solarize":
        return F.solarize(im, float(job["threshold"]))
    if op == "adjust_sharpness":
        return F.adjust_sharpness(im, float(job["factor"]))
    if op in ("invert", "autocontrast", "equalize"):
        return getattr(F, op)(im)
    raise ValueError("unknown op " + op)


def run(job):
    op = job["op"]
    if op == "decode":
        with Image.open(job["in"]) as im:
            im = im.convert(job["mode"])
            with open(job["out"], "wb") as f:
                f.write(im.tobytes())
            print(im.size[0], im.size[1])
        return
    with open(job["in"], "rb") as f:
        data = f.read()
    im = Image.frombytes(job["mode"], (int(job["w"]), int(job["h"])), data)
    out = apply(op, im, job)
    with open(job["out"], "wb") as f:
        f.write(out.tobytes())


def main():
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                run(dict(token.split("=", 1) for token in line.split()))


if __name__ == "__main__":
    main()

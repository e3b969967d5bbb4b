#!/usr/bin/python3
"""torchvision's colour ops on PIL images as the reference for sluice's colour kernels.

Reads a job file, one job a line, `key=value` tokens:
  in=<file.jpg> w=<int> h=<int> mode=<RGB|L> raw=<input.raw> out=<output.raw> op=<op> [factor=<f>]
      opens the JPEG with Pillow, converts it to `mode`, resizes it to w x h (bilinear), writes
      those pixels to `raw` (the kernel's input), applies the op and writes the result to `out`.
  ops: brightness, contrast, saturation, hue (torchvision.transforms.functional.adjust_*),
       grayscale1, grayscale3 (F.rgb_to_grayscale with 1 or 3 output channels),
       jitter with order=<i,j,k,l> factors=<b,c,s,h>: ColorJitter.forward's loop for that fn_idx
       permutation and those factors (a factor of "none" leaves that adjustment out),
       policy with name=<ShearX|...|Invert> magnitude=<m> interpolation=<nearest|bilinear>: the
       automatic policies' _apply_op (torchvision.transforms.autoaugment) for that op and magnitude.
Exits 3, naming the package, when torchvision or Pillow is missing.
"""
import sys

try:
    from PIL import Image
    import torchvision.transforms.functional as F
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.autoaugment import _apply_op
except ImportError as e:
    sys.stderr.write(f"torchvision or Pillow is missing for this interpreter ({e}): install python3-torchvision\n")
    sys.exit(3)

ADJUST = {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast,
          "saturation": F.adjust_saturation, "hue": F.adjust_hue}


def jitter(img, order, factors):
    # ColorJitter.forward, with its draws given.
    for fn_id in order:
        factor = factors[fn_id]
        if factor is not None:
            img = ADJUST[("brightness", "contrast", "saturation", "hue")[fn_id]](img, factor)
    return img


def run(job):
    with Image.open(job["in"]) as im:
        img = im.convert(job["mode"]).resize((int(job["w"]), int(job["h"])), Image.BILINEAR)
    with open(job["raw"], "wb") as f:
        f.write(img.tobytes())
    op = job["op"]
    if op in ADJUST:
        img = ADJUST[op](img, float(job["factor"]))
    elif op == "grayscale1":
        img = F.rgb_to_grayscale(img, num_output_channels=1)
    elif op == "grayscale3":
        img = F.rgb_to_grayscale(img, num_output_channels=3)
    elif op == "jitter":
        order = [int(v) for v in job["order"].split(",")]
        factors = [None if v == "none" else float(v) for v in job["factors"].split(",")]
        img = jitter(img, order, factors)
    elif op == "policy":
        mode = InterpolationMode.BILINEAR if job["interpolation"] == "bilinear" else InterpolationMode.NEAREST
        img = _apply_op(img, job["name"], float(job["magnitude"]), interpolation=mode, fill=None)
    else:
        raise ValueError("unknown op " + op)
    with open(job["out"], "wb") as f:
        f.write(img.tobytes())


def main():
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                run(dict(token.split("=", 1) for token in line.split()))


if __name__ == "__main__":
    main()

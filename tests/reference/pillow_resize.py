#!/usr/bin/python3
"""Pillow as the reference for sluice's resample tests.

Reads a job file, one job a line, `key=value` tokens:
  op=decode in=<file.jpg> mode=<L|RGB> out=<file.raw>
      decodes with Pillow and writes the pixels (HWC bytes); prints "<out> <width> <height>".
  op=resize in=<file.raw> w=<int> h=<int> mode=<L|RGB|CMYK> out=<file.raw> ow=<int> oh=<int>
            filter=<bilinear|box> [box=x0,y0,x1,y1] [crop=l,t,r,b]
      Image.frombytes(...)[.crop(crop)].resize((ow, oh), filter, box=box, reducing_gap=None)
      and writes the pixels.
Exits 3, naming the package, when Pillow is missing.
"""
import sys

try:
    from PIL import Image
except ImportError:
    sys.stderr.write("Pillow is not installed for this interpreter: install python3-pil\n")
    sys.exit(3)

FILTERS = {"bilinear": Image.BILINEAR, "box": Image.BOX}


def floats(text):
    return tuple(float(v) for v in text.split(","))


def run(job):
    op = job["op"]
    if op == "decode":
        with Image.open(job["in"]) as im:
            im = im.convert(job["mode"])
            with open(job["out"], "wb") as f:
                f.write(im.tobytes())
            print(job["out"], im.size[0], im.size[1])
    elif op == "resize":
        with open(job["in"], "rb") as f:
            data = f.read()
        im = Image.frombytes(job["mode"], (int(job["w"]), int(job["h"])), data)
        if "crop" in job:
            im = im.crop(tuple(int(v) for v in job["crop"].split(",")))
        box = floats(job["box"]) if "box" in job else None
        out = im.resize((int(job["ow"]), int(job["oh"])), FILTERS[job["filter"]], box=box,
                        reducing_gap=None)
        with open(job["out"], "wb") as f:
            f.write(out.tobytes())
    else:
        raise ValueError("unknown op " + op)


def main():
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                run(dict(token.split("=", 1) for token in line.split()))


if __name__ == "__main__":
    main()

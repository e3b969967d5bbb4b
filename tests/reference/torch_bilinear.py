#!/usr/bin/python3
"""PyTorch as the reference for sluice's plain bilinear resize (ResizeOptions::antialias = false).

torch.nn.functional.interpolate(mode="bilinear", align_corners=False, antialias=False) in float64
on the image's own bytes: what torchvision's Resize(antialias=False) computes on a tensor, before
its rounding to bytes (here floor(x + 0.5), clamped to 0..255).

Reads a job file, one job a line, `key=value` tokens:
  in=<file.raw> w=<int> h=<int> c=<int> out=<file.raw> ow=<int> oh=<int>
and writes each output's HWC bytes. Exits 3, naming the package, when torch is missing.
"""
import sys

try:
    import torch
except ImportError:
    sys.stderr.write("torch is not installed for this interpreter: install python3-torch\n")
    sys.exit(3)


def run(job):
    w, h, c = int(job["w"]), int(job["h"]), int(job["c"])
    with open(job["in"], "rb") as f:
        data = bytearray(f.read())
    image = torch.frombuffer(data, dtype=torch.uint8).reshape(h, w, c).permute(2, 0, 1)[None].double()
    out = torch.nn.functional.interpolate(image, size=(int(job["oh"]), int(job["ow"])), mode="bilinear",
                                          align_corners=False, antialias=False)
    out = torch.floor(out + 0.5).clamp(0, 255).to(torch.uint8)[0].permute(1, 2, 0).contiguous()
    with open(job["out"], "wb") as f:
        f.write(out.numpy().tobytes())


def main():
    torch.set_num_threads(1)
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                run(dict(token.split("=", 1) for token in line.split()))


if __name__ == "__main__":
    main()

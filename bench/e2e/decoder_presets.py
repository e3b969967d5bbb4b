#!/usr/bin/python3
"""The decoder presets of sluice.datasets.ImageFolder against torchvision, in one run: the eval
transform (Resize(256), CenterCrop(224), uint8 output) over every photo of a flat folder (default
the shared imagenet-photos), by torchvision on PIL images in this process and by sluice with
decoder="torchvision" (full-size decode) and decoder="fast" (DCT scaling). Prints, per preset, how
far its pixels are from torchvision's (max and mean |difference|, images equal) and its rate beside
torchvision's, with the load average.

  PYTHONPATH=build/python /usr/bin/python3 bench/e2e/decoder_presets.py [--data DIR] [--threads 2]
"""

import argparse
import os
import tempfile
import time

import torch
import torchvision
import torchvision.transforms as tvT

import sluice.datasets
import sluice.torch
import sluice.transforms as T


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    datasets = [os.environ.get("SLUICE_DATASETS", ""), os.path.join(here, "..", "..", "..", "shared", "datasets"),
                "/work/shared/datasets"]
    default = next((os.path.join(d, "imagenet-photos") for d in datasets if d and os.path.isdir(d)), None)
    parser.add_argument("--data", default=default, required=default is None,
                        help="a flat folder of JPEGs (default: the shared datasets' imagenet-photos)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    source = os.path.abspath(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        # ImageFolder wants class folders: one class of links to the flat folder's files.
        root = os.path.join(tmp, "photos")
        os.makedirs(os.path.join(root, "all"))
        for name in sorted(os.listdir(source)):
            os.symlink(os.path.join(source, name), os.path.join(root, "all", name))
        theirs = torchvision.datasets.ImageFolder(root, tvT.Compose([tvT.Resize(256), tvT.CenterCrop(224),
                                                                     tvT.PILToTensor()]))
        start = time.perf_counter()
        expected = torch.stack([theirs[i][0] for i in range(len(theirs))])
        torchvision_rate = len(theirs) / (time.perf_counter() - start)
        for decoder in ("torchvision", "fast"):
            spec = sluice.datasets.ImageFolder(root, T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()]),
                                               decoder=decoder)
            spec["source"] = {"folder": {"path": root, "allow_outside_root": True}}  # the links leave root
            loader = sluice.torch.Loader(spec, batch_size=100, shuffle=False, threads=args.threads)
            start = time.perf_counter()
            got = torch.cat([images.clone() for images, _ in loader])
            rate = len(got) / (time.perf_counter() - start)
            d = (got.int() - expected.int()).abs()
            equal = int((d.flatten(1).max(1).values == 0).sum())
            print(f"decoder {decoder}: max |diff| {d.max().item()}, mean {d.float().mean().item():.4f}, images equal "
                  f"{equal}/{len(d)}; {rate:.0f} images/s at {args.threads} threads vs torchvision (PIL, this "
                  f"process) {torchvision_rate:.0f} images/s; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""What applying an EXIF orientation costs, in one run: the eval transform at 224 (resize_shorter
256, center_crop 224, u8 output, 2 threads) through sluice with "orientation": "exif" over the
shared imagenet-photos as they are (no orientation: nothing to turn) and over the same files with
an EXIF block saying 6 (turned 90 degrees) inserted after the SOI marker, the compressed data
unchanged, so the two differ by the turn alone. Rounds alternate; prints each set's rate, the
ratio and the load average.

  PYTHONPATH=build/python /usr/bin/python3 bench/formats/orientation_cost.py [--data DIR] [--rounds 3]
"""

import argparse
import os
import struct
import tempfile
import time

import sluice

BLOCK = b"Exif\0\0MM\0*" + struct.pack(">IH", 8, 1) + struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0) + b"\0\0\0\0"
APP1 = b"\xFF\xE1" + struct.pack(">H", len(BLOCK) + 2) + BLOCK


def rate(folder, threads):
    spec = {"source": {"folder": folder},
            "stages": ["read", {"decode": {"orientation": "exif"}}, {"resize_shorter": {"size": 256}},
                       {"center_crop": {"size": 224}}, {"normalize": {"dtype": "u8", "layout": "nhwc"}},
                       {"batch": {"size": 64}}],
            "build": {"threads": threads}}
    pipeline = sluice.Pipeline(spec)
    start = time.perf_counter()
    samples = 0
    for batch in pipeline.epoch(0):
        samples += batch.data.shape[0]
    return samples / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("SLUICE_DATASETS", ""), os.path.join(here, "..", "..", "..", "shared", "datasets"),
                  "/work/shared/datasets"]
    default = next((os.path.join(d, "imagenet-photos") for d in candidates if d and os.path.isdir(d)), None)
    parser.add_argument("--data", default=default, required=default is None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, turned = os.path.join(tmp, "plain", "all"), os.path.join(tmp, "turned", "all")
        os.makedirs(plain)
        os.makedirs(turned)
        for name in sorted(os.listdir(args.data)):
            with open(os.path.join(args.data, name), "rb") as f:
                data = f.read()
            with open(os.path.join(plain, name), "wb") as f:
                f.write(data)
            with open(os.path.join(turned, name), "wb") as f:
                f.write(data[:2] + APP1 + data[2:])
        rate(os.path.dirname(plain), args.threads)  # the page cache and the first allocations
        rates = {"as stored": [], "turned": []}
        for _ in range(args.rounds):
            print("load", open("/proc/loadavg").read().strip())
            rates["as stored"].append(rate(os.path.dirname(plain), args.threads))
            rates["turned"].append(rate(os.path.dirname(turned), args.threads))
        for name, values in rates.items():
            print(f"{name:10s} {max(values):8.1f} img/s (best of {args.rounds}: {', '.join(f'{v:.1f}' for v in values)})")
        print(f"turned / as stored: {max(rates['turned']) / max(rates['as stored']):.3f}")
        print("load", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Trains a small CNN with PyTorch on batches from sluice, handed over with torch.from_dlpack (no
copy): the smallest complete use of sluice as PyTorch's input layer. It prints the loss as it
falls and the images per second the whole loop (loading + training) sustains.

Run with Debian's interpreter (python3-torch) and PYTHONPATH at the built module:

  PYTHONPATH=build-py/python /usr/bin/python3 examples/pytorch_ingest.py \
      --data ../shared/datasets/cifar10/train --steps 300
  PYTHONPATH=build-py/python /usr/bin/python3 examples/pytorch_ingest.py \
      --data data/fashion-mnist/train --grey          # after `sluice prepare fashion-mnist`

The data is an image folder with one sub-folder per class (labels = sorted folder index).
"""

import argparse
import itertools
import os
import sys
import time

import torch
from torch import nn

import sluice

CIFAR_MEAN = [0.4914, 0.4822, 0.4465]
CIFAR_STD = [0.2470, 0.2435, 0.2616]
GREY_MEAN = [0.2860]
GREY_STD = [0.3530]


def default_data():
    for root in (os.environ.get("SLUICE_DATASETS", ""),
                 os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets")):
        folder = os.path.join(root, "cifar10", "train")
        if root and os.path.isdir(folder):
            return os.path.normpath(folder)
    return None


def pipeline_spec(data, size, grey, batch, threads, seed):
    """The usual small-image training transform: pad-and-crop, flip, normalise to f32 NCHW."""
    return {
        "source": {"folder": data},
        "shuffle_files": {"seed": seed},                   # a new order every epoch
        "stages": [
            "read",
            {"decode_jpeg": {"color": "grey" if grey else "rgb"}},
            {"random_crop": {"size": size, "padding": 4}},
            {"flip_horizontal": {"probability": 0.5}},
            {"normalize": {"mean": GREY_MEAN if grey else CIFAR_MEAN, "std": GREY_STD if grey else CIFAR_STD,
                           "layout": "nchw", "dtype": "f32"}},
            {"batch": {"size": batch, "drop_last": True}},
            {"prefetch": {"depth": 2}},
        ],
        "build": {"threads": threads, "seed": seed},
    }


class SmallCnn(nn.Module):
    """Two conv blocks and two dense layers: about 0.3 M parameters for 32x32 RGB inputs."""

    def __init__(self, channels, size, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * (size // 4) ** 2, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):  # x: (N, C, H, W)
        return self.classifier(self.features(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=default_data(), help="image folder with class sub-folders")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=0, help="input side (default: 32 RGB, 28 grey)")
    parser.add_argument("--grey", action="store_true", help="one channel (Fashion-MNIST)")
    parser.add_argument("--threads", default="2", help="sluice worker threads, or auto")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=50)
    args = parser.parse_args()
    if not args.data or not os.path.isdir(args.data):
        sys.exit("pytorch_ingest: give --data (an image folder with class sub-folders)")
    size = args.size or (28 if args.grey else 32)
    threads = "auto" if args.threads == "auto" else int(args.threads)

    torch.manual_seed(args.seed)
    pipeline = sluice.Pipeline(pipeline_spec(os.path.abspath(args.data), size, args.grey, args.batch, threads, args.seed))
    classes = len([e for e in os.scandir(args.data) if e.is_dir()]) or 1
    print(f"{pipeline!r}: {classes} classes")
    model = SmallCnn(1 if args.grey else 3, size, classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()

    def batches():
        for _ in itertools.count():          # epoch after epoch: iter(pipeline) moves on by itself
            for batch in pipeline:
                # The tensors share the batch's memory; the slot returns to sluice's ring when
                # they are dropped (here: when the next step rebinds x and y).
                x = torch.from_dlpack(batch.data)
                y = torch.from_dlpack(batch.labels).long()   # cross_entropy wants int64
                yield x, y

    model.train()
    images = 0
    window_loss = 0.0
    window_steps = 0
    first_loss = None
    start = window_start = time.perf_counter()
    for step, (x, y) in enumerate(itertools.islice(batches(), args.steps), start=1):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        images += x.shape[0]
        window_loss += loss.item()
        window_steps += 1
        if step % args.log_every == 0 or step == args.steps:
            now = time.perf_counter()
            mean = window_loss / window_steps
            first_loss = mean if first_loss is None else first_loss
            rate = window_steps * args.batch / (now - window_start)
            print(f"step {step:5d}  epoch {pipeline.next_epoch - 1}  loss {mean:.4f}  {rate:8.0f} images/s")
            window_loss, window_steps, window_start = 0.0, 0, now
    seconds = time.perf_counter() - start
    print(f"{images} images in {seconds:.1f} s: {images / seconds:.0f} images/s end to end "
          f"(loss {first_loss:.4f} -> {mean:.4f})")
    stats = pipeline.stats()
    print(f"sluice: consumer waited {stats['consumer_wait_seconds']:.2f} s for batches, "
          f"{stats['threads']} worker threads")


if __name__ == "__main__":
    main()

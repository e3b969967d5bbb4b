#!/usr/bin/python3
"""End-to-end training throughput, sluice versus torch.utils.data.DataLoader: the same small CNN
and the same training loop, fed once by sluice (torch.from_dlpack, no copy) and once by a
DataLoader with 2 workers running the same transform, in one run. Prints images/s of each and
the ratio; with --json, ends stdout with one JSON object.

  PYTHONPATH=build/python /usr/bin/python3 bench/peers/pytorch_ingest_compare.py \
      --data ../shared/datasets/cifar10/train --steps 300 --rounds 3

Same transform: torch_loader.py's "cifar" transform (RandomCrop(32, padding=4),
RandomHorizontalFlip, ToTensor, Normalize with ImageNet's mean and std) against sluice's
random_crop(32, padding 4), flip_horizontal(0.5), normalize(same mean and std, f32 NCHW).
Same loop: identical initial weights, SGD, batch 64, the main process at torch.set_num_threads
(--torch-threads, default 1, torch's own default on the 2-core machine: with two loader workers
there, a second intra-op thread only oversubscribes the cores, and OpenMP's spinning threads
then cut both systems to about a third of their images/s in a 60-step check). DataLoader:
--workers (default 2) persistent workers, each at one intra-op thread, shuffle on; sluice: --sluice-threads (default 2) workers, file order shuffled.
Each system runs --warmup untimed steps (worker start-up, page cache) and then --steps timed ones;
--rounds > 1 alternates the systems (torch first) and reports each system's best round.
"""

import argparse
import itertools
import json
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_loader  # noqa: E402  (the DataLoader peer's dataset and transforms)

import sluice  # noqa: E402

SIZE = 32


class SmallCnn(nn.Module):
    """examples/pytorch_ingest.py's model: two conv blocks, two dense layers."""

    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * (SIZE // 4) ** 2, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x):  # x: (N, 3, 32, 32)
        return self.classifier(self.features(x))


def sluice_batches(data, batch, threads, seed):
    spec = {
        "source": {"folder": os.path.abspath(data)},
        "shuffle_files": {"seed": seed},
        "stages": [
            "read",
            "decode_jpeg",
            {"random_crop": {"size": SIZE, "padding": 4}},
            {"flip_horizontal": {"probability": 0.5}},
            {"normalize": {"mean": list(torch_loader.IMAGENET_MEAN), "std": list(torch_loader.IMAGENET_STD),
                           "layout": "nchw", "dtype": "f32"}},
            {"batch": {"size": batch, "drop_last": True}},
        ],
        "build": {"threads": threads, "seed": seed},
    }
    pipeline = sluice.Pipeline(spec)
    for _ in itertools.count():
        for b in pipeline:
            yield torch.from_dlpack(b.data), torch.from_dlpack(b.labels).long()


def torch_batches(data, batch, workers, seed):
    samples = torch_loader.scan_folder(data)
    dataset = torch_loader.ImageListDataset(samples, torch_loader.build_transform("cifar", SIZE))
    generator = torch.Generator()
    generator.manual_seed(seed)
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True, num_workers=workers,
                        persistent_workers=workers > 0, worker_init_fn=torch_loader.worker_init,
                        generator=generator, pin_memory=False)
    for _ in itertools.count():
        for x, y in loader:
            yield x, y


def train(batches, classes, warmup, steps, seed, lr):
    """The loop both systems feed. Returns (images/s over the timed steps, first and last loss)."""
    torch.manual_seed(seed)  # identical initial weights for both systems
    model = SmallCnn(classes)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    losses = []
    images = 0
    start = None
    for step, (x, y) in enumerate(itertools.islice(batches, warmup + steps)):
        if step == warmup:
            start = time.perf_counter()
            images = 0
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        images += x.shape[0]
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    head = sum(losses[:20]) / min(20, len(losses))
    tail = sum(losses[-20:]) / min(20, len(losses))
    return images / seconds, images, seconds, head, tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="image folder with class sub-folders (e.g. cifar10/test)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers")
    parser.add_argument("--sluice-threads", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=1, help="intra-op threads of the training loop")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    classes = len([e for e in os.scandir(args.data) if e.is_dir()]) or 1

    load_before = os.getloadavg()
    results = {"torch_dataloader": [], "sluice": []}
    for _ in range(args.rounds):
        for system in ("torch_dataloader", "sluice"):
            if system == "sluice":
                batches = sluice_batches(args.data, args.batch, args.sluice_threads, args.seed)
            else:
                batches = torch_batches(args.data, args.batch, args.workers, args.seed)
            rate, images, seconds, head, tail = train(batches, classes, args.warmup, args.steps, args.seed, args.lr)
            batches.close()  # stops the DataLoader's workers / drops the pipeline before the next system
            results[system].append(rate)
            print(f"{system:17s} {rate:8.0f} images/s  ({images} images in {seconds:.2f} s; "
                  f"loss {head:.3f} -> {tail:.3f})", flush=True)
    load_after = os.getloadavg()
    # Other processes on the machine slow both systems; the load average says how busy it was.
    print(f"load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cores")
    best = {system: max(rates) for system, rates in results.items()}
    ratio = best["sluice"] / best["torch_dataloader"]
    print(f"sluice / DataLoader: {ratio:.2f}x end to end "
          f"({best['sluice']:.0f} vs {best['torch_dataloader']:.0f} images/s, best of {args.rounds})")
    if args.json:
        print(json.dumps({"data": args.data, "steps": args.steps, "batch": args.batch, "workers": args.workers,
                          "sluice_threads": args.sluice_threads, "torch_threads": args.torch_threads,
                          "rounds": args.rounds, "images_per_sec": best, "all_rounds": results,
                          "ratio": ratio, "loadavg_before": load_before[0], "loadavg_after": load_after[0],
                          "cores": os.cpu_count(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The PyTorch peer: torch.utils.data.DataLoader over the same files, the way the torchvision
reference scripts load ImageNet and CIFAR, timed like the C++ systems. loader_compare runs it as a
subprocess and parses the one JSON line it prints last:
  {"system": "torch_dataloader", "images": .., "seconds": .., "images_per_sec": .., ...}

Run it with /usr/bin/python3 (Debian's python3-torch 1.13, torchvision 0.14, Pillow 9.4), e.g.
  /usr/bin/python3 bench/peers/torch_loader.py --data ../shared/datasets/wallpaper-crops \
      --transform eval --size 224 --batch 64 --workers 2 --epochs 2

What is timed: `--epochs` epochs after one untimed warm-up epoch. The warm-up starts the
(persistent) workers and warms the OS page cache, so the timed epochs read from memory like every
other system in the comparison. Each worker runs torch.set_num_threads(1) (DataLoader does it too):
with 2 workers on 2 cores, intra-op threads would only oversubscribe them. The main process only
receives batches and touches one element of each, as a training loop would.
"""

import argparse
import json
import os
import sys
import time

import torch
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import DataLoader, Dataset

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
JPEG_EXTENSIONS = (".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff", ".ppm", ".pgm")


def scan_folder(root):
    """torchvision.datasets.ImageFolder's order: sorted class folders, sorted files in each. A
    folder without sub-folders is one class (label 0), which ImageFolder itself refuses. Hidden
    entries are skipped, as sluice's from_folder skips them."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    folders = [(os.path.join(root, c), label) for label, c in enumerate(classes)]
    if not folders:
        folders = [(root, 0)]
    samples = []
    for folder, label in folders:
        names = sorted(e.name for e in os.scandir(folder)
                       if e.is_file() and not e.name.startswith(".")
                       and e.name.lower().endswith(JPEG_EXTENSIONS))
        samples.extend((os.path.join(folder, n), label) for n in names)
    return samples


def read_list(path):
    """"path<TAB>label" lines, as loader_compare writes them (the same order for every system)."""
    samples = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                file, label = line.rsplit("\t", 1)
                samples.append((file, int(label)))
    return samples


class ImageListDataset(Dataset):
    """ImageFolder without the folder scan: same loader (pil_loader), same (image, label) items."""

    def __init__(self, samples, transform):
        self.samples = samples
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, label = self.samples[index]
        # torchvision.datasets.folder.pil_loader: open the file, decode, convert to RGB.
        with open(path, "rb") as f:
            image = Image.open(f).convert("RGB")
        return self.transform(image), label


def build_transform(kind, size):
    normalize = [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    if kind == "eval":
        # Resize(int) on a PIL image: shorter side to size*256/224 with PIL's antialiased bilinear.
        return T.Compose([T.Resize(size * 256 // 224), T.CenterCrop(size)] + normalize)
    if kind == "train":
        # Defaults: scale (0.08, 1.0), ratio (3/4, 4/3), bilinear.
        return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(0.5)] + normalize)
    if kind == "cifar":
        return T.Compose([T.RandomCrop(size, padding=4), T.RandomHorizontalFlip(0.5)] + normalize)
    raise ValueError(f"unknown transform {kind!r}")


def worker_init(_worker_id):
    torch.set_num_threads(1)


def run_epoch(loader):
    images = 0
    checksum = 0.0
    for data, labels in loader:
        checksum += float(data[0, 0, 0, 0]) + int(labels[-1])
        images += data.shape[0]
    return images, checksum


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="image folder (class sub-folders, or flat = one class)")
    source.add_argument("--list", help="file of path<TAB>label lines")
    parser.add_argument("--transform", choices=("eval", "train", "cifar"), default="eval")
    parser.add_argument("--size", type=int, default=0, help="output side (default 224; cifar 32)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after one warm-up")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    size = args.size or (32 if args.transform == "cifar" else 224)

    samples = read_list(args.list) if args.list else scan_folder(args.data)
    if not samples:
        sys.exit("torch_loader: no images")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    dataset = ImageListDataset(samples, build_transform(args.transform, size))
    loader = DataLoader(dataset, batch_size=args.batch, shuffle=False, num_workers=args.workers,
                        persistent_workers=args.workers > 0, worker_init_fn=worker_init,
                        pin_memory=False)

    _, checksum = run_epoch(loader)  # warm-up: worker start-up and the page cache
    images = 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        n, c = run_epoch(loader)
        images += n
        checksum += c
    seconds = time.perf_counter() - start

    print(json.dumps({
        "system": "torch_dataloader",
        "images": images,
        "seconds": seconds,
        "images_per_sec": images / seconds,
        "transform": args.transform,
        "size": size,
        "batch": args.batch,
        "workers": args.workers,
        "epochs": args.epochs,
        "checksum": checksum,
        "torch": torch.__version__,
    }), flush=True)


if __name__ == "__main__":
    main()

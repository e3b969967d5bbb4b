#!/usr/bin/python3
"""Replaces torch.utils.data.DataLoader with sluice.torch.Loader in a PyTorch training loop: the
same tiny CNN trained on an image folder, fed by either loader (--loader), with the lines that
differ marked "# [n]": five of them. It also saves and resumes the loader's position with the
model (--checkpoint), and takes its shard from torchrun (`torchrun --nproc-per-node 2 ...`).

  pip install --no-build-isolation .        # once, in the venv (README); or PYTHONPATH=build/python
  python3 examples/torch_loader.py --data ../shared/datasets/cifar10/train --epochs 2
  python3 examples/torch_loader.py --data ../shared/datasets/cifar10/train --loader torch

The data is an image folder with one sub-folder per class (labels = sorted folder index).
"""

import argparse
import os
import time

import torch
from torch import nn

MEAN = [0.4914, 0.4822, 0.4465]
STD = [0.2470, 0.2435, 0.2616]


def torch_loader(data, batch, workers, device, rank, world):
    """What the training script had: torchvision's ImageFolder and DataLoader."""
    import torchvision
    from torchvision import transforms as T
    from torch.utils.data import DataLoader, DistributedSampler

    transform = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(data, transform)                                    # [1]
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, drop_last=True)           # [2]
    loader = DataLoader(dataset, batch_size=batch, sampler=sampler, num_workers=workers,           # [3]
                        pin_memory=device.type == "cuda", drop_last=True)
    return loader, sampler


def sluice_loader(data, batch, workers, device, rank, world):
    """The same input from sluice: the transform as a pipeline spec (docs/json-spec.md)."""
    import sluice.torch

    spec = {"source": {"folder": data}, "shuffle_files": {},                                       # [1]
            "stages": ["read", "decode_jpeg", {"random_crop": {"size": 32, "padding": 4}},
                       {"flip_horizontal": {}}, {"normalize": {"mean": MEAN, "std": STD}}]}
    loader = sluice.torch.Loader(spec, batch_size=batch, drop_last=True, threads=workers,         # [3]
                                 shard="launcher", device=device)                                  # [2]
    return loader, loader


class TinyCnn(nn.Module):
    """Two conv blocks and a linear layer: about 25 k parameters for 32x32 RGB inputs."""

    def __init__(self, classes):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(32, classes))

    def forward(self, x):  # x: (N, 3, H, W)
        return self.layers(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="image folder with class sub-folders")
    parser.add_argument("--loader", choices=("sluice", "torch"), default="sluice")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers or sluice threads")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--checkpoint", help="save model, optimizer and loader position here each epoch, "
                                             "and resume from it when it exists (sluice only)")
    args = parser.parse_args()

    # torchrun sets RANK and WORLD_SIZE; alone, this is rank 0 of 1.
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    device = torch.device(args.device)
    make = sluice_loader if args.loader == "sluice" else torch_loader
    loader, sampler = make(args.data, args.batch, args.workers, device, rank, world)
    classes = len([e for e in os.scandir(args.data) if e.is_dir()])
    torch.manual_seed(0)
    model = TinyCnn(classes).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    start_epoch = 0
    if args.checkpoint and args.loader == "sluice" and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        loader.load_state_dict(saved["loader"])  # the epoch, and inside it the batch, it had reached
        start_epoch = saved["loader"]["epoch"]
        print(f"resumed at epoch {start_epoch}, batch {saved['loader']['batch']}")

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)                                                                   # [4]
        model.train()
        seen, correct, loss_sum, started = 0, 0, 0.0, time.perf_counter()
        for step, (images, labels) in enumerate(loader):
            if args.loader == "torch":
                images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)  # [5]
            logits = model(images)
            loss = nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(labels)
            correct += int((logits.argmax(1) == labels).sum())
            loss_sum += float(loss) * len(labels)
            if args.steps and step + 1 >= args.steps:
                break
        seconds = time.perf_counter() - started
        print(f"epoch {epoch}: {seen} images, loss {loss_sum / max(seen, 1):.3f}, "
              f"train accuracy {correct / max(seen, 1):.3f}, {seen / seconds:.0f} images/s ({args.loader}, "
              f"rank {rank} of {world})", flush=True)
        if args.checkpoint and args.loader == "sluice":
            # Taken after a full epoch this is the start of the next; after a break (--steps) the
            # batch the loop stopped before, so a resume trains on exactly the batches not yet seen.
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "loader": loader.state_dict()}, args.checkpoint)


if __name__ == "__main__":
    main()

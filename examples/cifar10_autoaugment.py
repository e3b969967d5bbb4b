#!/usr/bin/python3
"""A CIFAR-10 recipe with AutoAugment, with the DataLoader lines and the sluice lines side by side:
the transform lines are the same text, only the module they come from differs (`T`); the data set
and loader lines change as marked "# [n]". Training: RandomCrop(32, padding=4), a horizontal
flip, AutoAugment(AutoAugmentPolicy.CIFAR10), ToTensor, Normalize; evaluation: ToTensor,
Normalize.

  PYTHONPATH=build/python python3 examples/cifar10_autoaugment.py --data ../shared/datasets/cifar10/test
  PYTHONPATH=build/python python3 examples/cifar10_autoaugment.py --data ... --loader both

Both read the image folder (one sub-folder per class), take --batches batches of each transform
and print images/s (with the load average: the figure is only comparable within one run on one
machine); --loader both runs each in turn and prints the ratio.
"""

import argparse
import os
import time

MEAN = [0.4914, 0.4822, 0.4465]
STD = [0.2470, 0.2435, 0.2616]


def transforms(T):
    """The recipe's two transforms, written once for either module."""
    train = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                       T.AutoAugment(T.AutoAugmentPolicy.CIFAR10), T.ToTensor(), T.Normalize(MEAN, STD)])
    val = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])
    return train, val


def torch_loaders(data, batch, workers):
    import torch
    import torchvision
    import torchvision.transforms as T                                                           # [1]
    train_t, val_t = transforms(T)
    train_set = torchvision.datasets.ImageFolder(data, train_t)                                   # [2]
    val_set = torchvision.datasets.ImageFolder(data, val_t)
    train = torch.utils.data.DataLoader(train_set, batch_size=batch, shuffle=True, num_workers=workers)  # [3]
    val = torch.utils.data.DataLoader(val_set, batch_size=batch, shuffle=False, num_workers=workers)
    return train, val


def sluice_loaders(data, batch, workers):
    import sluice.datasets
    import sluice.torch
    import sluice.transforms as T                                                                 # [1]
    train_t, val_t = transforms(T)
    train_set = sluice.datasets.ImageFolder(data, train_t)                                        # [2]
    val_set = sluice.datasets.ImageFolder(data, val_t)
    train = sluice.torch.Loader(train_set, batch_size=batch, shuffle=True, threads=workers)        # [3]
    val = sluice.torch.Loader(val_set, batch_size=batch, shuffle=False, threads=workers)
    return train, val


def rate(loader, batches):
    """Images/s over the first `batches` batches of an epoch."""
    start, images = time.perf_counter(), 0
    for i, (x, y) in enumerate(loader):
        assert x.shape[1:] == (3, 32, 32) and x.shape[0] == y.shape[0]
        images += x.shape[0]
        if i + 1 == batches:
            break
    return images / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="an image folder (class sub-folders), e.g. cifar10/test")
    parser.add_argument("--loader", choices=["sluice", "torch", "both"], default="sluice",
                        help="both: each in turn, in one run, and the ratio of their rates")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2, help="num_workers / threads")
    args = parser.parse_args()
    rates = {}
    for name in (["sluice", "torch"] if args.loader == "both" else [args.loader]):
        make = sluice_loaders if name == "sluice" else torch_loaders
        train, val = make(os.path.abspath(args.data), args.batch, args.workers)
        rates[name] = (rate(train, args.batches), rate(val, args.batches))
        print(f"{name}: train {rates[name][0]:.0f} images/s, eval {rates[name][1]:.0f} images/s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    if len(rates) == 2:
        print(f"sluice / DataLoader: train {rates['sluice'][0] / rates['torch'][0]:.2f}x, "
              f"eval {rates['sluice'][1] / rates['torch'][1]:.2f}x")


if __name__ == "__main__":
    main()

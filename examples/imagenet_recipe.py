#!/usr/bin/python3
"""torchvision's ImageNet reference recipe, with the DataLoader lines and the sluice lines side by
side: the transform lines are the same text, only the module they come from differs (`T`); the
data set and loader lines change as marked "# [n]". --recipe classic (the default) is its classic
transforms: RandomResizedCrop(224) and a horizontal flip for training, Resize(256) and
CenterCrop(224) for evaluation; --recipe new is the ResNet "new recipe" (references/classification
presets with auto_augment_policy="ta_wide", random_erase_prob=0.1, train_crop_size=176,
val_resize_size=232): RandomResizedCrop(176), a flip, TrivialAugmentWide, Normalize and
RandomErasing(0.1) for training, Resize(232) and CenterCrop(224) for evaluation.

  PYTHONPATH=build/python python3 examples/imagenet_recipe.py --data ../shared/datasets/imagenette-val
  PYTHONPATH=build/python python3 examples/imagenet_recipe.py --data ... --loader torch

Both read the image folder (one sub-folder per class), take --batches training batches and as
many evaluation batches, and print images/s of each (with the load average: the figure is only
comparable within one run on one machine); --loader both runs each in turn and prints the ratio.
That ratio times one epoch from the loader's build, so start-up weighs on it;
bench/e2e/recipe_compare.py runs the same training transform for several epochs and rounds and
reports epoch 0 and the steady state apart, with each loader's CPU per image.
"""

import argparse
import os
import time

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def transforms(T, recipe="classic"):
    """The recipe's two transforms, written once for either module."""
    if recipe == "new":
        # The reference's PILToTensor + ConvertImageDtype(float) is ToTensor's x / 255; its
        # TrivialAugmentWide warps with the recipe's interpolation, bilinear.
        train = T.Compose([T.RandomResizedCrop(176), T.RandomHorizontalFlip(),
                           T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR),
                           T.ToTensor(), T.Normalize(MEAN, STD), T.RandomErasing(0.1)])
        val = T.Compose([T.Resize(232), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
        return train, val
    train = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    val = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])
    return train, val


def torch_loaders(data, batch, workers, recipe):
    import torch
    import torchvision
    import torchvision.transforms as T                                                           # [1]
    train_t, val_t = transforms(T, recipe)
    train_set = torchvision.datasets.ImageFolder(data, train_t)                                   # [2]
    val_set = torchvision.datasets.ImageFolder(data, val_t)
    train = torch.utils.data.DataLoader(train_set, batch_size=batch, shuffle=True,                # [3]
                                        num_workers=workers, pin_memory=False)
    val = torch.utils.data.DataLoader(val_set, batch_size=batch, shuffle=False, num_workers=workers)
    return train, val


def sluice_loaders(data, batch, workers, recipe):
    import sluice.datasets
    import sluice.torch
    import sluice.transforms as T                                                                 # [1]
    train_t, val_t = transforms(T, recipe)
    train_set = sluice.datasets.ImageFolder(data, train_t)                                        # [2]
    val_set = sluice.datasets.ImageFolder(data, val_t, decoder="torchvision")
    train = sluice.torch.Loader(train_set, batch_size=batch, shuffle=True, threads=workers)        # [3]
    val = sluice.torch.Loader(val_set, batch_size=batch, shuffle=False, threads=workers)
    return train, val


def rate(loader, batches):
    """Images/s over the first `batches` batches of an epoch."""
    start, images = time.perf_counter(), 0
    for i, (x, y) in enumerate(loader):
        assert x.shape[1] == 3 and x.shape[0] == y.shape[0]
        images += x.shape[0]
        if i + 1 == batches:
            break
    return images / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="an image folder (class sub-folders)")
    parser.add_argument("--loader", choices=["sluice", "torch", "both"], default="sluice",
                        help="both: each in turn, in one run, and the ratio of their rates")
    parser.add_argument("--recipe", choices=["classic", "new"], default="classic")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2, help="num_workers / threads")
    args = parser.parse_args()
    rates = {}
    for name in (["sluice", "torch"] if args.loader == "both" else [args.loader]):
        make = sluice_loaders if name == "sluice" else torch_loaders
        train, val = make(os.path.abspath(args.data), args.batch, args.workers, args.recipe)
        rates[name] = (rate(train, args.batches), rate(val, args.batches))
        print(f"{name}: train {rates[name][0]:.0f} images/s, eval {rates[name][1]:.0f} images/s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
    if len(rates) == 2:
        print(f"sluice / DataLoader: train {rates['sluice'][0] / rates['torch'][0]:.2f}x, "
              f"eval {rates['sluice'][1] / rates['torch'][1]:.2f}x")


if __name__ == "__main__":
    main()

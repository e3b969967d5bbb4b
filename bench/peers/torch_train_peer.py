#!/usr/bin/python3
"""The PyTorch twin of sluice's training core: the same models (src/train/nn/models.cpp), the same
optimizer and the same step, timed on random data, so the CPU backend's training images/s can be
set against PyTorch's at the same batch and threads. Prints one JSON line last:
  {"system": "torch", "model": .., "batch": .., "threads": .., "steps": .., "seconds": ..,
   "images_per_sec": .., "loss_first": .., "loss_last": ..}

bench/peers/train_compare.sh runs it and `sluice train` on the same model, batch and threads
in one go and prints the ratio. Run it alone with /usr/bin/python3 (Debian's python3-torch), e.g.
  /usr/bin/python3 bench/peers/torch_train_peer.py --model cifar10-separable --batch 128 \
      --threads 2 --steps 20 --warmup 3
--device cuda runs it on the GPU (scripts/device-check sets it against `sluice train --device
cuda:0`); --precision mixed_f16 / mixed_bf16 runs forward and backward under torch.autocast in
that type on f32 weights, with a GradScaler's dynamic loss scale for f16: sluice's mixed precision.

What is timed: `--steps` full training steps (forward, softmax cross-entropy, backward, SGD with
Nesterov momentum and weight decay) after `--warmup` untimed ones, on one fixed random batch
(N(0,1) images, uniform labels) that is already in memory, so only the training core is measured.
The model is in train mode (batch statistics, dropout on), like sluice's Trainer::step.

--train DIR (optional, slow): instead train on an image folder (e.g. CIFAR-10) with random crop
(padding 4) and flip, and report test accuracy per epoch: a check that an architecture reaches
its target accuracy, independent of sluice.
"""

import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def separable(cin, cout, stride=1):
    """sluice's SeparableConv2D (depthwise 3x3, then pointwise 1x1, no bias), BN, ReLU."""
    return [nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False),
            nn.Conv2d(cin, cout, 1, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=False)]


def make_model(name):
    if name == "fashion-cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(128, 10)), (1, 28, 28)
    if name == "cifar10-separable":
        layers = [nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU()]
        layers += separable(32, 64)
        layers += separable(64, 128) + [nn.MaxPool2d(2)]
        layers += separable(128, 128)
        layers += separable(128, 256) + [nn.MaxPool2d(2)]
        layers += separable(256, 256)
        layers += separable(256, 512) + [nn.MaxPool2d(2)]
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
        return nn.Sequential(*layers), (3, 32, 32)
    raise SystemExit(f"unknown model {name}")


def init_like_sluice(model):
    """He (Kaiming) normal for convolutions and dense layers (fan_in, gain sqrt(2)), zero biases,
    BN gamma 1 beta 0: sluice's initialisation (the values differ, the distribution does not)."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def make_optimizer(model, lr):
    """sluice's default: SGD, Nesterov momentum 0.9, weight decay 5e-4 on convolution and dense
    weights only (not on biases or BatchNorm's gamma and beta)."""
    decay = [p for p in model.parameters() if p.dim() > 1]
    rest = [p for p in model.parameters() if p.dim() <= 1]
    return torch.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                            {"params": rest, "weight_decay": 0.0}],
                           lr=lr, momentum=0.9, nesterov=True)


def make_scaler(device, enabled):
    """torch.amp.GradScaler (torch >= 2.3); torch.cuda.amp's before, which has no CPU scaler."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device.type, enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled and device.type == "cuda")


def bench(args):
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    model, chw = make_model(args.model)
    init_like_sluice(model)
    model.to(device).train()
    opt = make_optimizer(model, args.lr)
    x = torch.randn(args.batch, *chw).to(device)
    y = torch.randint(0, 10, (args.batch,)).to(device)
    dtype = {"f32": None, "mixed_f16": torch.float16, "mixed_bf16": torch.bfloat16}[args.precision]
    scaler = make_scaler(device, dtype == torch.float16)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.item()  # a host sync each step, as sluice's Trainer::step reads its loss

    for _ in range(args.warmup):
        step()
    losses = []
    start = time.perf_counter()
    for _ in range(args.steps):
        losses.append(step())
    seconds = time.perf_counter() - start
    images = args.steps * args.batch
    print(json.dumps({"system": "torch", "torch_version": torch.__version__,
                      "model": args.model, "batch": args.batch, "threads": args.threads,
                      "device": str(device), "precision": args.precision,
                      "steps": args.steps, "seconds": seconds, "images_per_sec": images / seconds,
                      "loss_first": losses[0], "loss_last": losses[-1]}))


def train_folder(args):
    """Trains on an image folder (train/ and test/ sub-folders of class folders) with random crop
    (padding 4) and flip, cosine learning rate with warmup; prints test accuracy per epoch."""
    import torchvision
    import torchvision.transforms as T
    torch.manual_seed(args.seed)
    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    train_tf = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                          T.Normalize(mean, std)])
    test_tf = T.Compose([T.ToTensor(), T.Normalize(mean, std)])
    train = torchvision.datasets.ImageFolder(f"{args.train}/train", train_tf)
    test = torchvision.datasets.ImageFolder(f"{args.train}/test", test_tf)
    train_loader = torch.utils.data.DataLoader(train, batch_size=args.batch, shuffle=True,
                                               num_workers=1, drop_last=True,
                                               persistent_workers=True)
    test_loader = torch.utils.data.DataLoader(test, batch_size=256, num_workers=1)
    model, _ = make_model(args.model)
    init_like_sluice(model)
    opt = make_optimizer(model, args.lr)
    total = args.epochs * len(train_loader)
    warm = len(train_loader)  # one epoch of linear warmup, then cosine to 0

    def lr_at(i):
        import math
        if i < warm:
            return args.lr * (i + 1) / warm
        return 0.5 * args.lr * (1 + math.cos(math.pi * (i - warm) / max(1, total - warm)))

    it = 0
    for epoch in range(args.epochs):
        model.train()
        start = time.perf_counter()
        for x, y in train_loader:
            for g in opt.param_groups:
                g["lr"] = lr_at(it)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            it += 1
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in test_loader:
                correct += (model(x).argmax(1) == y).sum().item()
        print(json.dumps({"epoch": epoch, "loss": loss.item(), "test_accuracy": correct / len(test),
                          "seconds": time.perf_counter() - start}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="cifar10-separable")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train", default="")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    p.add_argument("--precision", default="f32", choices=["f32", "mixed_f16", "mixed_bf16"])
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("torch_train_peer: --device cuda but torch sees no CUDA device")
    torch.set_num_threads(args.threads)
    if args.train:
        train_folder(args)
    else:
        bench(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

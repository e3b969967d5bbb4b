#!/usr/bin/python3
"""torchvision.transforms.v2.MixUp / CutMix's arithmetic, the reference of batch_mix_test.

The installed torchvision (0.14) predates v2's MixUp and CutMix (0.16), so this script runs the
lines of v2's _mixup_label, MixUp._transform, CutMix._get_params and CutMix._transform with torch,
on a given lambda (and CutMix's centre) instead of their random draws.

argv: in.raw N C H W num_classes labels.raw kind lam [cx cy] out.raw out_labels.raw
  in.raw: f32 (N, C, H, W); labels.raw: i32 (N). Writes the mixed batch (f32) and the soft labels
  (f32 (N, num_classes)); for cutmix prints "x1 y1 x2 y2 lam_adjusted".
"""
import math
import sys

import torch
from torch.nn.functional import one_hot


def mixup_label(label, num_classes, lam):
    label = one_hot(label, num_classes=num_classes)
    if not label.dtype.is_floating_point:
        label = label.float()
    return label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam))


def main():
    a = sys.argv[1:]
    n, c, h, w, num_classes = (int(v) for v in a[1:6])
    batch = torch.frombuffer(bytearray(open(a[0], "rb").read()), dtype=torch.float32).reshape(n, c, h, w)
    labels = torch.frombuffer(bytearray(open(a[6], "rb").read()), dtype=torch.int32).long()
    kind, lam = a[7], float(a[8])
    if kind == "mixup":
        out = batch.roll(1, 0).mul_(1.0 - lam).add_(batch.mul(lam))
        soft = mixup_label(labels, num_classes, lam)
        out_paths = a[9:11]
    else:
        r_x, r_y = torch.tensor([int(a[9])]), torch.tensor([int(a[10])])
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half = int(r * w)
        r_h_half = int(r * h)
        x1 = int(torch.clamp(r_x - r_w_half, min=0))
        y1 = int(torch.clamp(r_y - r_h_half, min=0))
        x2 = int(torch.clamp(r_x + r_w_half, max=w))
        y2 = int(torch.clamp(r_y + r_h_half, max=h))
        lam_adjusted = float(1.0 - (x2 - x1) * (y2 - y1) / (w * h))
        rolled = batch.roll(1, 0)
        out = batch.clone()
        out[..., y1:y2, x1:x2] = rolled[..., y1:y2, x1:x2]
        soft = mixup_label(labels, num_classes, lam_adjusted)
        print(x1, y1, x2, y2, repr(lam_adjusted))
        out_paths = a[11:13]
    open(out_paths[0], "wb").write(out.contiguous().numpy().tobytes())
    open(out_paths[1], "wb").write(soft.contiguous().numpy().tobytes())


if __name__ == "__main__":
    main()

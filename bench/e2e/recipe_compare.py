#!/usr/bin/python3
"""A recipe's training loader, sluice against torch's DataLoader, over several epochs in one run.

Both loaders run the transform lines of examples/imagenet_recipe.py (the same text, from
sluice.transforms and from torchvision.transforms) on an image folder, built as that example
builds them: sluice.torch.Loader(threads=N) and DataLoader(num_workers=N, shuffle=True), batch B.
One round builds a loader, times its first epoch (epoch 0: the pool, the batch ring's first touch,
the DataLoader's worker spawn) apart from the --epochs epochs that follow (the steady state), then
does the same with the other system; the order of the two alternates from round to round, so a
load that drifts across the run falls on both. With --rounds N, rates are the medians over the
rounds with their spread ((max - min) / median, as bench/e2e/loader_compare prints it) and the
ratio is the median of each round's ratio (the two measured seconds apart).

Beside each rate: CPU seconds per image (this process's, plus the DataLoader's workers': those
reaped at the end of each epoch, as the reference recipe's loader has no persistent workers, and
those still running, with --persistent-workers),
and the cores the rest of the machine took while it ran (from /proc/stat), with the load average.
A run where the others took more than a quarter of a core beyond what the loader's threads leave
free is marked "under load": its wall-clock ratio is the machine's, CPU per image is the figure.

  PYTHONPATH=build/python /usr/bin/python3 bench/e2e/recipe_compare.py --data /tmp/recipe-photos \\
      --recipe new --batch 64 --threads 2 --epochs 3 --rounds 3 [--json out.json]

--data is an image folder with class sub-folders (for imagenet-photos: one folder of links to the
1,000 files, as examples/imagenet_recipe.py's docs say). --systems sluice or torch runs one alone
(under `perf record -g`, the sluice side's profile).
"""

import argparse
import gc
import importlib.util
import json
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def recipe_transforms(module, recipe):
    """examples/imagenet_recipe.py's training transform, built from `module` (the same lines)."""
    path = os.path.join(HERE, "..", "..", "examples", "imagenet_recipe.py")
    spec = importlib.util.spec_from_file_location("imagenet_recipe", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.transforms(module, recipe)[0]


def make_sluice(data, recipe, batch, threads):
    import sluice.datasets
    import sluice.torch
    import sluice.transforms as T
    dataset = sluice.datasets.ImageFolder(data, recipe_transforms(T, recipe))
    return sluice.torch.Loader(dataset, batch_size=batch, shuffle=True, threads=threads)


def make_torch(data, recipe, batch, threads, persistent_workers=False):
    import torch
    import torchvision
    import torchvision.transforms as T
    dataset = torchvision.datasets.ImageFolder(data, recipe_transforms(T, recipe))
    return torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=threads,
                                       pin_memory=False, persistent_workers=persistent_workers)


MAKERS = {"sluice": make_sluice, "torch": make_torch}


def busy_seconds():
    """The machine's busy CPU seconds so far (all cores, /proc/stat), for what the others took."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def live_children_seconds():
    """CPU seconds so far of this process's children still running (persistent DataLoader workers:
    getrusage counts a child only once it has been reaped)."""
    total = 0
    tick = os.sysconf("SC_CLK_TCK")
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids = f.read().split()
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited between the two reads: getrusage has it once reaped
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def own_seconds():
    """CPU seconds of this process and of its children, reaped or running (the DataLoader's workers)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime + live_children_seconds()


class Meter:
    """Wall, own CPU and the machine's busy time over one span."""

    def __init__(self):
        self.wall, self.cpu, self.busy = time.perf_counter(), own_seconds(), busy_seconds()

    def stop(self, images):
        wall = time.perf_counter() - self.wall
        cpu = own_seconds() - self.cpu
        others = max(0.0, (busy_seconds() - self.busy - cpu) / wall)
        return {"images": images, "seconds": wall, "images_per_sec": images / wall,
                "cpu_ms_per_image": 1000 * cpu / images, "others_cores": others}


def one_epoch(loader):
    images = 0
    for x, y in loader:
        assert x.shape[1] == 3 and x.shape[0] == y.shape[0]
        images += x.shape[0]
    return images


def run_system(name, args):
    """Build, epoch 0, then --epochs epochs: the figures of one round of one system. Epoch 0's span
    starts before the build, so it carries the set-up a user waits for (also given apart)."""
    meter = Meter()
    options = {"persistent_workers": True} if name == "torch" and args.persistent_workers else {}
    loader = MAKERS[name](args.data, args.recipe, args.batch, args.threads, **options)
    setup = time.perf_counter() - meter.wall
    first = one_epoch(loader)
    epoch0 = meter.stop(first)
    epoch0["setup_seconds"] = setup
    meter = Meter()
    images = sum(one_epoch(loader) for _ in range(args.epochs))
    steady = meter.stop(images)
    del loader
    gc.collect()
    return {"epoch0": epoch0, "steady": steady}


def spread(values):
    if len(values) < 2:
        return "-"
    return f"+-{50 * (max(values) - min(values)) / statistics.median(values):.0f}%"


def summary(rounds, name, part, key):
    return [r[name][part][key] for r in rounds]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="an image folder (class sub-folders)")
    parser.add_argument("--recipe", choices=["classic", "new"], default="new")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="sluice's threads = the DataLoader's num_workers")
    parser.add_argument("--epochs", type=int, default=3, help="timed steady-state epochs after epoch 0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default="sluice,torch", help="sluice, torch or both (comma-separated)")
    parser.add_argument("--persistent-workers", action="store_true",
                        help="the DataLoader keeps its workers across epochs (the reference recipe does not)")
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args()
    args.data = os.path.abspath(args.data)
    systems = args.systems.split(",")
    if not set(systems) <= set(MAKERS):
        parser.error(f"--systems: expected some of {sorted(MAKERS)}")
    # Both systems' modules are imported before any timing: torch's import takes seconds, and the
    # first system of a run would otherwise pay it in its set-up.
    import sluice.torch  # noqa: F401
    import torchvision  # noqa: F401
    load_before = os.getloadavg()[0]
    print(f"{args.recipe} recipe on {args.data}: batch {args.batch}, {args.threads} threads, epoch 0 + "
          f"{args.epochs} epochs, {args.rounds} rounds"
          + (", DataLoader with persistent workers" if args.persistent_workers else "")
          + f"; load {load_before:.2f}", flush=True)
    rounds = []
    for r in range(args.rounds):
        figures = {}
        for name in (systems if r % 2 == 0 else systems[::-1]):
            figures[name] = run_system(name, args)
            s, e = figures[name]["steady"], figures[name]["epoch0"]
            print(f"  [{r + 1}/{args.rounds}] {name}: epoch 0 {e['images_per_sec']:.0f} images/s "
                  f"(setup {e['setup_seconds']:.2f} s), steady {s['images_per_sec']:.0f} images/s, "
                  f"CPU {s['cpu_ms_per_image']:.2f} ms/image, others {s['others_cores']:.2f} cores, "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
        rounds.append(figures)
    cores = os.cpu_count()
    print(f"\n{'system':8} {'part':7} {'images/s':>9} {'spread':>7} {'CPU ms/img':>11} {'others':>7}")
    for name in systems:
        for part in ("epoch0", "steady"):
            rates = summary(rounds, name, part, "images_per_sec")
            print(f"{name:8} {part:7} {statistics.median(rates):9.0f} {spread(rates):>7} "
                  f"{statistics.median(summary(rounds, name, part, 'cpu_ms_per_image')):11.2f} "
                  f"{statistics.median(summary(rounds, name, part, 'others_cores')):7.2f}")
    result = {"recipe": args.recipe, "data": args.data, "batch": args.batch, "threads": args.threads,
              "persistent_workers": args.persistent_workers,
              "epochs": args.epochs, "load_before": load_before, "load_after": os.getloadavg()[0], "rounds": rounds}
    if set(systems) == {"sluice", "torch"}:
        ratios = {}
        for part in ("epoch0", "steady"):
            wall = [r["sluice"][part]["images_per_sec"] / r["torch"][part]["images_per_sec"] for r in rounds]
            cpu = [r["torch"][part]["cpu_ms_per_image"] / r["sluice"][part]["cpu_ms_per_image"] for r in rounds]
            ratios[part] = {"wall": statistics.median(wall), "cpu": statistics.median(cpu)}
            print(f"sluice / DataLoader, {part}: {ratios[part]['wall']:.2f}x images/s ({spread(wall)}), "
                  f"{ratios[part]['cpu']:.2f}x less CPU per image ({spread(cpu)})")
        result["ratios"] = ratios
    others = max(statistics.median(summary(rounds, n, "steady", "others_cores")) for n in systems)
    loaded = load_before > args.threads or others > cores - args.threads + 0.25
    print(f"load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; others took up to {others:.2f} of "
          f"{cores} cores" + (": under load, the CPU per image is the figure" if loaded else ""))
    result["under_load"] = loaded
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

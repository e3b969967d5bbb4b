#!/usr/bin/python3
"""Writes the many-files benchmark set: 1000 class folders named like ImageNet's
WordNet ids, each holding 1281 hardlinks to the JPEGs of a source folder (cifar10/test), with
ImageNet-style file names (n01440764/n01440764_10026.JPEG): 1,281,000 files, no extra bytes.

    /usr/bin/python3 bench/e2e/make_many_files.py [--source DIR] [--out DIR] [--classes N]
                                                  [--per-class N]

Hardlinks need OUT on the file system of SOURCE. OUT must not exist (the script never writes
into a folder it did not create); delete it with `rm -r OUT` when done. Not for the repository.
"""
import argparse
import os
import sys


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    default_source = os.path.normpath(os.path.join(here, "../../../shared/datasets/cifar10/test"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=default_source, help="folder of JPEGs (recursively)")
    parser.add_argument("--out", default="/work/bigset", help="folder to create")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--per-class", type=int, default=1281)
    args = parser.parse_args()

    sources = sorted(
        os.path.join(root, name)
        for root, _, names in os.walk(args.source)
        for name in names
        if name.lower().endswith((".jpg", ".jpeg")))
    if not sources:
        print(f"no JPEGs under {args.source}", file=sys.stderr)
        return 1
    os.mkdir(args.out)  # fails if it exists: never write into someone else's folder
    made = 0
    for c in range(args.classes):
        wnid = f"n{1440764 + 7919 * c:08d}"  # 9 characters, like n01440764
        folder = os.path.join(args.out, wnid)
        os.mkdir(folder)
        for i in range(args.per_class):
            source = sources[made % len(sources)]
            os.link(source, os.path.join(folder, f"{wnid}_{10000 + i}.JPEG"))
            made += 1
    print(f"{args.out}: {args.classes} classes, {made} hardlinks to {len(sources)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``headgeom data fetch NAME``: download an official CIFAR archive into the data folder.

The parser is :func:`headgeom.commands.data.add_parser` (torch-free); errors propagate as
ValueError / RuntimeError / OSError, which ``headgeom.cli.main`` turns into one line and exit
status 2.
"""
from __future__ import annotations

import argparse

from .download import download_cifar, resolve_data_dir

__all__ = ["run_fetch"]


def run_fetch(args: argparse.Namespace) -> int:
    """Fetch ``args.name`` into ``args.data_dir`` (default: :func:`resolve_data_dir`); prints where."""
    root = resolve_data_dir(args.data_dir)
    folder = download_cifar(args.name, root, layout=args.layout)
    given = f" --data-dir {root}" if args.data_dir else ""
    print(f"{args.name} is in {folder}; train on it with: headgeom train --data {args.name}{given} ...")
    return 0

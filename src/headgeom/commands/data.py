"""``headgeom data fetch NAME``: its parser (the work is :mod:`headgeom.data.cli`)."""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .options import add_command
from .outputs import Output

__all__ = ["FETCHABLE", "add_parser"]

FETCHABLE = ("cifar10", "cifar100")
"""The datasets with an official archive to fetch (headgeom.data.download.CIFAR_ARCHIVES' names)."""

ENV = "HEADGEOM_DATA"  # headgeom.data.download.DATA_ENV_VAR (this module imports no torch)


def _fetch_outputs(args: Any) -> list[Output]:
    return [Output(args.data_dir, "dir", "--data-dir")] if args.data_dir else []


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``data`` (with ``fetch``) on the ``headgeom`` sub-command parser."""
    p = add_command(
        subparsers, "data", help="fetch a dataset (CIFAR-10, CIFAR-100) into the data folder",
        description="The datasets headgeom trains and evaluates on. CIFAR-10/100 are read from their official "
        f"layouts under --data-dir DIR, else ${ENV}, else ~/.cache/headgeom/data; `fetch` downloads one there "
        "(md5 checked, extracted with every member vetted, renamed into place only when complete). `shapes` is "
        "generated in memory and needs nothing; `imagefolder` reads your own folder (--data-dir).",
        group=True,
        examples=["headgeom data fetch cifar10",
                  "headgeom data fetch cifar100 --data-dir ~/data"])
    sub = p.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True
    f = add_command(
        sub, "fetch", help="download and extract an official CIFAR archive (about 170 MB)",
        description="Download the official archive of NAME from https://www.cs.toronto.edu/~kriz/cifar.html, "
        "check its md5 and extract it into the data folder (what `headgeom train --data NAME` reads with the same "
        "--data-dir, or none). A copy already there is kept. Offline, it stops with one line naming the address "
        "and where to put the extracted folder (exit status 2).",
        examples=["headgeom data fetch cifar10",
                  "headgeom data fetch cifar10 --data-dir ~/data --layout python"])
    f.add_argument("name", metavar="NAME", choices=FETCHABLE, help=", ".join(FETCHABLE))
    f.add_argument("--data-dir", default=None, metavar="DIR",
                   help=f"the data folder (default ${ENV}, else ~/.cache/headgeom/data)")
    f.add_argument("--layout", choices=("binary", "python"), default="binary",
                   help="the archive's layout (default binary: read without unpickling anything)")
    f.set_defaults(func=Command("headgeom.data.cli:run_fetch", outputs=_fetch_outputs))
    return p

"""``headgeom released fetch|check``: its parsers (the work is :mod:`headgeom.released.cli`)."""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .options import add_command
from .outputs import Output

__all__ = ["add_parser"]

ENV = "HEADGEOM_RELEASED"  # headgeom.released.manifest.RELEASED_ENV (this module imports no numpy)
CACHE = "~/.cache/headgeom/released"  # headgeom.released.manifest.default_released_dir(), without XDG_CACHE_HOME


def _fetch_outputs(args: Any) -> list[Output]:
    return [Output(args.dir, "dir", "DIR")] if args.dir else []  # the cache folder: checked as it is written


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``released`` (with ``fetch`` and ``check``) on the ``headgeom`` sub-command parser."""
    p = add_command(
        subparsers, "released", help="fetch and check the authors' released results (paper-scale runs)",
        description="The numeric results and run logs the paper's authors released with their code "
        "(collapse grids, Hessian tracks, orbits, depth ablations, guillotine probes, curvatures; MIT), "
        "pinned to one upstream commit with the sha256 of every file. `fetch` downloads them (into "
        f"{CACHE}, or DIR), `check` verifies a copy. Commands that read them take --released DIR, else "
        f"${ENV}, else the copy in {CACHE} ($XDG_CACHE_HOME/headgeom/released when that is set). Pickled "
        "files are read without executing pickled code. Exit status 2 for a missing, damaged or refused file.",
        group=True,
        examples=["headgeom released fetch                 # into the cache folder, where reproduce finds it",
                  "headgeom released fetch ~/released",
                  "headgeom released check ~/released",
                  f"headgeom released check                 # the copy at ${ENV}, else in the cache folder"])
    sub = p.add_subparsers(dest="released_command", metavar="ACTION")
    sub.required = True
    f = add_command(
        sub, "fetch", help="download the pinned files (sha256 checked, atomic writes)",
        description="Download every pinned released file from the authors' repository at the pinned commit "
        f"into DIR/<upstream path> (default: the cache folder {CACHE}, where every command finds it "
        "without an option), checking each file's sha256 before it is renamed into place; files "
        "already there and intact are kept. Offline, it stops with one line naming the addresses and "
        "where to put the files (exit status 2).",
        examples=["headgeom released fetch",
                  "headgeom released fetch ~/released --quiet"])
    f.add_argument("dir", metavar="DIR", nargs="?", default=None,
                   help=f"folder to download into (created when missing; default {CACHE})")
    f.add_argument("--quiet", action="store_true", help="no progress messages")
    f.set_defaults(func=Command("headgeom.released.cli:run_fetch", outputs=_fetch_outputs))
    c = add_command(
        sub, "check", help="verify every file of a copy and show what it holds",
        description="Check every pinned file of a copy (present, size and sha256 as pinned, readable without "
        "running pickled code, the expected keys and shapes) and print a table of what each holds. "
        "Writes nothing. Exit status 2 when a file is missing or bad, naming the first one.",
        examples=["headgeom released check ~/released",
                  f"headgeom released check                 # the copy at ${ENV}"])
    c.add_argument("dir", metavar="DIR", nargs="?", default=None,
                   help=f"the copy's folder (default ${ENV}, else the copy in {CACHE})")
    c.set_defaults(func=Command("headgeom.released.cli:run_check"))
    return p

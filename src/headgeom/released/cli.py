"""``headgeom released fetch [DIR]`` and ``headgeom released check [DIR]``.

The parsers are in :mod:`headgeom.commands.released` (torch-free); errors propagate as
ValueError / RuntimeError, which ``headgeom.cli.main`` turns into one line and exit status 2.
"""
from __future__ import annotations

import argparse
import sys

from headgeom.released.fetch import fetch_released
from headgeom.released.layout import check_copy
from headgeom.released.manifest import (MANIFEST, RELEASED_ENV, ReleasedFileError, default_released_dir,
                                        resolve_released_dir)

__all__ = ["check_table", "run_check", "run_fetch"]


def check_table(checks: list) -> str:
    """Markdown table of :func:`headgeom.released.layout.check_copy`'s rows."""
    lines = ["| file | status | bytes | holds |", "|---|---|---|---|"]
    for c in checks:
        size = "" if c.bytes is None else str(c.bytes)
        lines.append(f"| `{c.path}` | {c.status} | {size} | {c.detail} |")
    return "\n".join(lines)


def run_check(args: argparse.Namespace) -> int:
    """Print the table of a copy; raise (exit 2) naming the first missing or bad file."""
    root = resolve_released_dir(args.dir, option="DIR", complete=False)  # the table shows what is missing
    checks = check_copy(root, MANIFEST)
    print(f"released results at {root} (pinned: {MANIFEST.source} @ {MANIFEST.commit[:12]})")
    print(check_table(checks))
    bad = [c for c in checks if c.status != "ok"]
    if bad:
        first = bad[0]
        what = first.detail if first.status == "bad" else f"{root / first.path} is missing"
        raise ReleasedFileError(f"{len(bad)} of {len(checks)} released files missing or bad; first: {what}")
    print(f"all {len(checks)} files present and intact", file=sys.stderr)
    return 0


def run_fetch(args: argparse.Namespace) -> int:
    """Download the pinned files into ``args.dir`` (default: the cache folder every command looks in)."""
    progress = None if args.quiet else (lambda msg: print(msg, file=sys.stderr))
    result = fetch_released(args.dir or default_released_dir(), MANIFEST, progress=progress)
    use = (f"use it with --released {result.root} or {RELEASED_ENV}={result.root}" if args.dir else
           "headgeom reproduce finds it there; rerun it to add the authors' runs to the report (seconds: "
           "finished cells are reused)")
    print(f"{len(result.downloaded)} file(s) downloaded, {len(result.kept)} already intact, in {result.root}; {use}")
    return 0

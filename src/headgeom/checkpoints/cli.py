"""``headgeom checkpoint PATH``: what a checkpoint file is, read without running its pickled code.

The parser is :func:`headgeom.commands.checkpoint.add_parser` (torch-free); it names :func:`run`.
"""
from __future__ import annotations

import argparse
import sys

from headgeom.commands.checkpoint import add_parser  # the parser lives with the torch-free parsers
from headgeom.checkpoints.loaders import load_checkpoint
from headgeom.io import atomic_write_json

__all__ = ["add_parser", "run"]


def run(args: argparse.Namespace) -> int:
    """Load ``args.path`` and print its report; errors propagate as ValueError / FileNotFoundError."""
    model = load_checkpoint(args.path, which=args.which, num_heads=args.num_heads, strict=args.strict)
    print(model.report())
    if args.json:
        summary = {"path": str(args.path), **model.summary()}
        atomic_write_json(args.json, summary)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0

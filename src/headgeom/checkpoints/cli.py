"""``headgeom checkpoint PATH``: what a checkpoint file is, read without running its pickled code.

Wiring (in headgeom.cli.build_parser): ``from headgeom.checkpoints.cli import add_parser as
add_checkpoint`` then ``add_checkpoint(sub)``; the parser's ``func`` is :func:`run`.
"""
from __future__ import annotations

import argparse
import sys

from headgeom.io import atomic_write_json

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``checkpoint`` on the ``headgeom`` sub-command parser."""
    p = subparsers.add_parser(
        "checkpoint", help="identify an SSL checkpoint and load it safely (no pickled code runs)",
        description="Read a checkpoint without executing pickled code, tell its release (DINO ViT / "
        "ResNet-50 full checkpoints, VICReg resnet50_fullckpt.pth, Barlow Twins checkpoint.pth, "
        "SimSiam checkpoint_0099.pth.tar, plain torchvision/ViT backbones, headgeom runs), build the "
        "backbone and head, and print the file's sha256, the architecture and any missing or "
        "unexpected keys. Exit status 2 for refused, damaged or unknown files.",
    )
    p.add_argument("path", metavar="PATH", help="checkpoint file, or a headgeom run directory")
    p.add_argument("--which", choices=("teacher", "student"), default=None,
                   help="DINO only: which network of the pair (default teacher)")
    p.add_argument("--num-heads", type=int, default=None, metavar="H",
                   help="ViT attention heads when not embed_dim // 64")
    p.add_argument("--strict", action="store_true", help="fail if any key is missing or unused")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the summary as JSON to FILE")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Load ``args.path`` and print its report; errors propagate as ValueError / FileNotFoundError."""
    from headgeom.checkpoints.loaders import load_checkpoint

    model = load_checkpoint(args.path, which=args.which, num_heads=args.num_heads, strict=args.strict)
    print(model.report())
    if args.json:
        summary = {"path": str(args.path), **model.summary()}
        atomic_write_json(args.json, summary)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0

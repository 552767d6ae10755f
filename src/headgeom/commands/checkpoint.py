"""``headgeom checkpoint``: its parser (the work is :func:`headgeom.checkpoints.cli.run`)."""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .options import add_command
from .outputs import json_output

__all__ = ["add_parser"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``checkpoint`` on the ``headgeom`` sub-command parser."""
    p = add_command(
        subparsers, "checkpoint", help="identify an SSL checkpoint and load it safely (no pickled code runs)",
        description="Read a checkpoint without executing pickled code, tell its release (DINO ViT / "
        "ResNet-50 full checkpoints, VICReg resnet50_fullckpt.pth, Barlow Twins checkpoint.pth, "
        "SimSiam checkpoint_0099.pth.tar, plain torchvision/ViT backbones, headgeom runs), build the "
        "backbone and head, and print the file's sha256, the architecture and any missing or "
        "unexpected keys. Exit status 2 for refused, damaged or unknown files.",
        examples=["headgeom checkpoint dino_deitsmall16_pretrain_full_checkpoint.pth --which teacher",
                  "headgeom checkpoint runs/simsiam --json runs/simsiam/checkpoint.json",
                  "headgeom checkpoint resnet50_fullckpt.pth --strict"])
    p.add_argument("path", metavar="PATH", help="checkpoint file, or a headgeom run directory")
    p.add_argument("--which", choices=("teacher", "student"), default=None,
                   help="DINO only: which network of the pair (default teacher)")
    p.add_argument("--num-heads", type=int, default=None, metavar="H",
                   help="ViT attention heads when not embed_dim // 64")
    p.add_argument("--strict", action="store_true", help="fail if any key is missing or unused")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the summary as JSON to FILE")
    p.set_defaults(func=Command("headgeom.checkpoints.cli:run", outputs=json_output))
    return p

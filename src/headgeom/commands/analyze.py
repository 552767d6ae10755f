"""``headgeom analyze``: its parser (the work is :func:`headgeom.orbits.cli.run`)."""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from . import Command
from .options import add_command, positive
from .outputs import Output
from .vocabulary import DATASETS, FAMILIES

__all__ = ["add_parser", "default_out"]

_DEFAULTS = {"steps": 12, "boot": 1000, "tangent_images": 16}


def _families(text: str) -> list[str]:
    names = [f.strip() for f in text.split(",") if f.strip()]
    if names == ["all"]:
        return list(FAMILIES)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown augmentation famil{'y' if len(unknown) == 1 else 'ies'} {unknown or text!r}; "
            f"choose from {', '.join(FAMILIES)} (comma-separated) or 'all'")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a family is listed twice in {text!r}")
    return names


def _value_range(text: str) -> tuple[str, tuple[float, float]]:
    m = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*=\s*([-+0-9.eE]+)\s*:\s*([-+0-9.eE]+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected FAMILY=LO:HI (e.g. rotation=0:45), got {text!r}")
    name = m.group(1)
    if name not in FAMILIES:
        raise argparse.ArgumentTypeError(f"unknown family {name!r} in --range; choose from "
                                         f"{', '.join(FAMILIES)}")
    try:
        lo, hi = float(m.group(2)), float(m.group(3))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--range {text!r}: LO and HI must be numbers") from None
    if not lo < hi:
        raise argparse.ArgumentTypeError(f"--range {text!r}: need LO < HI")
    return name, (lo, hi)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``analyze`` on the ``headgeom`` sub-command parser."""
    p = add_command(
        subparsers, "analyze", help="orbit compression, invariance and tangent metric of a checkpoint or run",
        description="Augmentation orbits (N test images x K parameter steps per family) through the "
        "backbone and every head layer: the paper's spread and compression beside the trace and "
        "per-dimension ratios, D_intra, D_inter, class/orbit ratio, effective rank, curvature and "
        "alignment, each with a bootstrap CI, with a fresh-head and a random-direction control; then "
        "the tangent metric (Rayleigh quotients of G on augmentation tangents) and Fisher ranks. "
        "ImageNet models get 224-px inputs with ImageNet mean/std after the colour operations; "
        "headgeom runs their own preprocessing. Writes OUT/analysis.json, OUT/report.md, OUT/report.html "
        "(the same report as one self-contained page, figures embedded) and OUT/figures/*.png.",
        examples=["headgeom analyze runs/simsiam --images 200 --steps 12 --out analysis/simsiam",
                  "headgeom analyze dino_deitsmall16_pretrain_full_checkpoint.pth --data-dir ~/data "
                  "--head-input both",
                  "headgeom analyze runs/simclr --families rotation,hue --range rotation=0:90 --no-tangents",
                  "headgeom analyze orbits.npz --family rotation --out analysis/external"])
    p.add_argument("path", metavar="CHECKPOINT_OR_RUN",
                   help="checkpoint file (official DINO/VICReg/Barlow/SimSiam, torchvision layout, "
                        "headgeom last.pt), a `headgeom train --out RUN` directory, or FILE.npz of "
                        "orbit embeddings computed elsewhere (z (N, K, D_z), head points (N, K, D) "
                        "under their own names, optional labels (N,) and xi (K,))")
    p.add_argument("--data", default=None, metavar="NAME",
                   help=f"analysis dataset ({', '.join(DATASETS)}; default: a run's own dataset, else cifar10)")
    p.add_argument("--data-dir", default=None, metavar="DIR", help="dataset folder (default: the "
                   "run's, then $HEADGEOM_DATA)")
    p.add_argument("--split", default="test", help="split the images come from (default test)")
    p.add_argument("--families", type=_families, default=None, metavar="F[,F...]",
                   help=f"augmentation families ({', '.join(FAMILIES)}) or 'all' (default: the "
                        "paper's protocol, "
                        "rotation_45,hue,saturation,blur for ImageNet models, "
                        "rotation,hue,saturation,blur otherwise)")
    p.add_argument("--range", dest="ranges", type=_value_range, action="append", default=[],
                   metavar="FAMILY=LO:HI", help="parameter interval of a family (repeatable)")
    p.add_argument("--images", type=positive(2), default=None, metavar="N",
                   help="test images, seeded and balanced over classes (default: 50 for ImageNet "
                        "models, the paper's pretrained protocol; 200 otherwise)")
    p.add_argument("--steps", type=positive(2), default=_DEFAULTS["steps"], metavar="K",
                   help=f"parameter steps per orbit (default {_DEFAULTS['steps']})")
    p.add_argument("--head-input", choices=("raw", "l2", "both"), default="raw",
                   help="feed the head z (raw, default), the paper's z/||z|| (l2), or both")
    p.add_argument("--predictor", action="store_true", help="also read every predictor layer (pred.i)")
    p.add_argument("--which", choices=("teacher", "student"), default=None,
                   help="DINO only: which network (default teacher)")
    p.add_argument("--num-heads", type=positive(1), default=None, metavar="H",
                   help="ViT attention heads when not embed_dim // 64")
    p.add_argument("--normalization", choices=("auto", "imagenet", "dataset", "none"), default="auto",
                   help="mean/std after the augmentation: auto (ImageNet for ImageNet models, a run's "
                        "own, else the data's), or force one")
    p.add_argument("--input-size", type=positive(0), default=None, metavar="PX",
                   help="resize images to PX before the orbit (0 = native; default by model)")
    p.add_argument("--boot", type=positive(1), default=_DEFAULTS["boot"], metavar="B",
                   help=f"bootstrap replicates (default {_DEFAULTS['boot']})")
    p.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--no-controls", action="store_true",
                   help="skip the fresh-head and random-direction controls")
    p.add_argument("--no-tangents", action="store_true", help="skip the tangent metric and Fisher ranks")
    p.add_argument("--tangent-images", type=positive(1), default=_DEFAULTS["tangent_images"],
                   metavar="N", help="images for the (costlier, float64) tangent metric "
                                     f"(default {_DEFAULTS['tangent_images']})")
    p.add_argument("--tangent-loss", choices=("negative_cosine", "mse"), default="negative_cosine",
                   help="loss whose Hessian weighs the head metric (default negative_cosine)")
    p.add_argument("--tangent-random", type=positive(1), default=8, metavar="R",
                   help="random directions per image for the tangent comparison (default 8)")
    p.add_argument("--batch-size", type=positive(1), default=128, metavar="N",
                   help="augmented images per backbone batch (default 128)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda[:i]")
    p.add_argument("--seed", type=int, default=0, help="seed of the images, bootstrap and controls")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default analyze-out/<name>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    p.add_argument("--family", default=None, metavar="NAME",
                   help="FILE.npz only: the name of its orbits' augmentation family (default "
                        "external); --head-input l2 says its heads were fed z/||z|| though trained "
                        "on raw z")
    p.set_defaults(func=Command("headgeom.orbits.cli:run", outputs=_outputs))
    return p


def default_out(path: str | Path) -> Path:
    """analyze-out/<name>: a run directory's name, or the file name without .pth/.pt/.tar."""
    path = Path(path)
    name = path.name if path.is_dir() else re.sub(r"(\.pth|\.pt|\.tar|\.ckpt|\.npz)+$", "", path.name)
    return Path("analyze-out") / (name or "model")


def _outputs(args: argparse.Namespace) -> list[Output]:
    return [Output(args.out or default_out(args.path), "dir", "--out")]

"""``headgeom eval``: its parser (the work is :func:`headgeom.eval.cli.run`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import Command
from .options import add_command, deprecated_alias
from .outputs import Output

__all__ = ["add_parser"]


def _outputs(args: argparse.Namespace) -> list[Output]:
    return [Output(args.json or Path(args.run_dir) / "eval.json", "file", "--json")]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``eval`` on the ``headgeom`` sub-command parser."""
    p = add_command(
        subparsers, "eval", help="kNN, linear (and MLP) and rotation probes on z and every head layer of a run",
        description="Evaluate a run written by `headgeom train --out RUN` on frozen features: "
        "weighted kNN (cosine, k=200, T=0.1) and a linear probe (standardised features, "
        "L-BFGS, weight decay 1e-4) for classes, with --mlp also an MLP probe (one hidden ReLU "
        "layer of 512, AdamW, 50 epochs), and the paper's 4-way rotation probe, on the "
        "backbone output z and after every layer of the projector (a guillotine sweep), plus "
        "RankMe and covariance statistics. Writes RUN/eval.json (or --json FILE).",
        examples=["headgeom eval runs/simsiam                  # every probe, on the run's own data",
                  "headgeom eval runs/simclr --data-dir ~/data --random-baseline --head-input both",
                  "headgeom eval runs/simclr --mlp               # the MLP probe beside the linear one",
                  "headgeom eval runs/simclr --points z,head.3 --no-rotation --json simclr-eval.json"])
    p.add_argument("run_dir", metavar="RUN", help="run directory (config.json, checkpoints/last.pt)")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="dataset folder (default: the run's, then $HEADGEOM_DATA)")
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="checkpoint file (default RUN/checkpoints/last.pt)")
    p.add_argument("--k", type=int, action="append", default=None, metavar="K",
                   help="kNN neighbours; repeat for several (default 200)")
    p.add_argument("--temperature", type=float, default=0.1, help="kNN temperature (default 0.1)")
    p.add_argument("--probe-wd", type=float, default=1e-4, metavar="LAMBDA",
                   help="linear-probe weight decay (default 1e-4)")
    p.add_argument("--probe-max-iter", type=int, default=1000, metavar="N",
                   help="L-BFGS iterations at most (default 1000)")
    p.add_argument("--mlp", action="store_true",
                   help="also fit the class MLP probe (one hidden ReLU layer, AdamW, cosine rate)")
    p.add_argument("--mlp-hidden", type=int, default=512, metavar="H", help="MLP probe hidden units (default 512)")
    p.add_argument("--mlp-epochs", type=int, default=50, metavar="N", help="MLP probe epochs (default 50)")
    p.add_argument("--no-knn", action="store_true", help="skip the kNN probe")
    p.add_argument("--no-linear", action="store_true", help="skip the class linear probe")
    p.add_argument("--no-rotation", action="store_true", help="skip the rotation probe")
    head_input = p.add_argument("--head-input", choices=("raw", "l2", "both"), default="raw",
                                help="feed the head z (raw, default), the paper's z/||z|| (l2; points "
                                "l2z/head.i), or both")
    p.add_argument("--predictor", action="store_true", help="also probe every predictor layer (pred.i)")
    p.add_argument("--points", default=None, metavar="P[,P...]",
                   help="probe only these points, e.g. z,head.3 (default: z and every layer)")
    p.add_argument("--random-baseline", action="store_true",
                   help="also evaluate the same architecture at a random initialisation")
    p.add_argument("--max-train", type=int, default=None, metavar="N",
                   help="use a seeded subset of N training images for the class probes")
    p.add_argument("--max-test", type=int, default=None, metavar="N", help="subset of the test images")
    p.add_argument("--rotation-train", type=int, default=10_000, metavar="N",
                   help="training images for the rotation probe, x4 rotations (default 10000)")
    p.add_argument("--rotation-test", type=int, default=None, metavar="N",
                   help="test images for the rotation probe (default: those of the class probes)")
    p.add_argument("--stats-max", type=int, default=10_000, metavar="N",
                   help="test images for RankMe and covariance statistics (default 10000)")
    p.add_argument("--batch-size", type=int, default=256, metavar="N", help="feature-extraction batch (default 256)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda[:i]")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsets and of the MLP probe (default 0)")
    json_file = p.add_argument("--json", default=None, metavar="FILE", help="result file (default RUN/eval.json)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    deprecated_alias(p, "--out", json_file)
    deprecated_alias(p, "--l2-input", head_input, value="both")
    p.set_defaults(func=Command("headgeom.eval.cli:run", outputs=_outputs))
    return p

"""``headgeom reproduce`` and ``headgeom theory``: their parsers."""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .launch import add_launch_options
from .options import add_command, deprecated_alias
from .outputs import Output
from .vocabulary import EXPERIMENT_IDS, LOGGERS, PRESETS, THEORY_IDS

__all__ = ["add_reproduce", "add_theory"]


def _outputs(args: argparse.Namespace) -> list[Output]:
    return [Output(args.out, "dir", "--out")]


def _add_run_options(p: argparse.ArgumentParser, ids: tuple[str, ...]) -> None:
    a = p.add_argument
    a("--preset", choices=PRESETS, default="quick",
      help="experiment sizes: quick (minutes on 2 CPU cores, default), small, paper; released: only the authors' "
      "released paper-scale runs re-judged by headgeom's rules (seconds; needs --released DIR)")
    a("--only", default=None, metavar="ID[,ID...]",
      help=f"run only these experiments, comma-separated; ids: {', '.join(ids)}")
    a("--out", default="reproduce-out", metavar="DIR",
      help="output folder for report.md, report.html, results.json, figures/ and runs/ (default reproduce-out)")
    a("--seeds", type=int, default=None, metavar="N", help="override the presets' number of seeds")
    a("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
      help="override one setting of the selected presets (repeatable); the training recipe is nested under "
      "train., e.g. --set train.batch_size=64 --set train.max_steps=20 --set readings='[\"tangential\"]'; "
      "VALUE is JSON or a plain string; an unknown key is an error listing the known ones")
    quiet = a("--quiet", action="store_true", help="no progress bar")
    a("--checkpoints", default=None, metavar="DIR",
      help="folder holding the official pretrained checkpoints for C10 (default $HEADGEOM_CHECKPOINTS)")
    a("--released", default=None, metavar="DIR",
      help="folder holding the authors' released results (default $HEADGEOM_RELEASED, else the copy `headgeom "
      "released fetch` put in ~/.cache/headgeom/released): their rows are judged beside ours; without a copy "
      "the RELEASED rows are skipped and the report says how to add them")
    a("--logger", default="jsonl", metavar="NAME[,NAME...]",
      help=f"how the training runs inside the cells log, a comma list of {', '.join(LOGGERS)}: jsonl (default, "
      "always written), tensorboard, mlflow, wandb, as `headgeom train --logger` (under each cell's train/; "
      "each needs its extra: pip install -e \".[NAME]\")")
    deprecated_alias(p, "--no-progress", quiet)
    add_launch_options(p)


def add_reproduce(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers, "reproduce", help="run registered experiments and write report.md, report.html, results.json, figures",
        description="Run the registered experiments (claims C1...C12 of the paper) cell by cell into "
        "DIR/runs/, skipping finished cells, and write DIR/report.md, DIR/report.html (the same report as one "
        "self-contained page: figures embedded, claims filterable by evidence kind, verdict and source), "
        "DIR/results.json and DIR/figures/. "
        "Exits 1 when a cell failed.",
        examples=["headgeom reproduce                     # quick preset of every experiment, offline",
                  "headgeom reproduce --only C1,C4 --preset small --seeds 5 --out results",
                  "headgeom reproduce --only C10 --checkpoints ~/checkpoints   # the official files",
                  "headgeom reproduce --preset released --released ~/released  # the authors' runs re-judged, seconds",
                  "headgeom reproduce --preset paper --dry-run    # cells, settings vs the paper, GPU-hours",
                  "headgeom reproduce --preset paper --launcher slurm --partition gpu --time 12:00:00",
                  "headgeom reproduce --preset paper --launcher slurm --status"])
    _add_run_options(p, EXPERIMENT_IDS)
    p.set_defaults(func=Command("headgeom.experiments.cli:run_reproduce", outputs=_outputs))
    return p


def add_theory(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers, "theory", help="reproduce restricted to the theory experiments (C1-C7)",
        description="Same as `headgeom reproduce`, restricted to the theory experiments "
        f"({', '.join(THEORY_IDS)}).",
        examples=["headgeom theory", "headgeom theory --only C2 --out theory-out"])
    _add_run_options(p, THEORY_IDS)
    p.set_defaults(func=Command("headgeom.experiments.cli:run_theory", outputs=_outputs))
    return p

"""Launcher options of ``headgeom reproduce`` and ``headgeom theory``.

Wiring (in headgeom/cli.py): ``add_launch_options(parser)`` on the sub-parser, then
``launcher_from_args(args)`` builds the launcher and ``print_submission(res)`` reports a run
whose cells are still queued.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from headgeom.launch import LAUNCHERS, make_launcher

__all__ = ["add_launch_options", "launcher_from_args", "print_submission"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def add_launch_options(p: argparse.ArgumentParser) -> None:
    """--launcher, --jobs, --wait, --status and the SLURM resource overrides."""
    g = p.add_argument_group("where cells run")
    g.add_argument("--launcher", choices=LAUNCHERS, default="local",
                   help="local: this machine, independent cells in parallel processes (default); slurm: one SLURM "
                        "job per cell through submitit (pip install -e \".[cluster]\")")
    g.add_argument("--jobs", type=_positive_int, default=None, metavar="N",
                   help="local: cells run side by side in N processes, each with cores/N torch threads "
                        "(default: the usable CPU cores; 1 = one after another in this process)")
    g.add_argument("--status", action="store_true",
                   help="print every cell's state (done, failed with its log and error, pending, running, "
                        "missing) and exit; runs and submits nothing")
    g.add_argument("--wait", action="store_true",
                   help="slurm: wait for the jobs and write the report (default: submit and return; rerun the "
                        "same command later to aggregate finished cells and resubmit failed ones)")
    s = p.add_argument_group("SLURM resources (override the experiments' per-preset values)")
    s.add_argument("--partition", default=None, help="SLURM partition")
    s.add_argument("--account", default=None, help="SLURM account")
    s.add_argument("--gpus-per-cell", type=_count, default=None, metavar="N", help="GPUs per cell (job)")
    s.add_argument("--time", default=None, metavar="TIME",
                   help="time limit per cell: minutes, HH:MM:SS or D-HH:MM:SS (a cell that reaches it is "
                        "checkpointed and requeued)")
    s.add_argument("--slurm-option", action="append", default=None, metavar="KEY=VALUE",
                   help="any other sbatch option, repeatable (e.g. --slurm-option constraint=a100 "
                        "--slurm-option qos=high)")


def launcher_from_args(args: argparse.Namespace) -> Any:
    """The launcher the options ask for (raises RuntimeError naming the install step when the slurm
    launcher lacks submitit or sbatch, ValueError for a bad --time or --slurm-option)."""
    slurm_only = {"--wait": args.wait, "--partition": args.partition, "--account": args.account,
                  "--gpus-per-cell": args.gpus_per_cell, "--time": args.time, "--slurm-option": args.slurm_option}
    if args.launcher == "local":
        given = [k for k, v in slurm_only.items() if v not in (None, False)]
        if given:
            raise ValueError(f"{', '.join(given)} only apply to --launcher slurm")
        return make_launcher("local", Path(args.out), jobs=args.jobs)
    if args.jobs is not None:
        raise ValueError("--jobs applies to --launcher local; on SLURM every cell is its own job")
    return make_launcher("slurm", Path(args.out), wait=args.wait, partition=args.partition, account=args.account,
                         gpus=args.gpus_per_cell, time=args.time, options=args.slurm_option)


def print_submission(res: dict[str, Any]) -> None:
    """What a run that left cells in SLURM's queue says: jobs submitted, cells waiting, what next."""
    jobs = sorted({job.split("_")[0] for _, job in res["submitted"]}, key=int)
    if res["submitted"]:
        print(f"submitted {len(res['submitted'])} cell(s) as SLURM job(s) {', '.join(jobs)}")
    print(f"{len(res['waiting'])} cell(s) pending or running; logs under {res['paths']['slurm']}\n"
          f"their state: {res['command']} --status\n"
          f"rerun the same command once they finish to write {res['paths']['report']} (finished cells are "
          f"kept, failed ones resubmitted), or add --wait to wait for them")

"""The launcher of ``headgeom reproduce`` and ``headgeom theory`` from their options.

The options are declared (torch-free) by :func:`headgeom.commands.launch.add_launch_options`;
``launcher_from_args(args)`` builds the launcher and ``print_submission(res)`` reports a run
whose cells are still queued.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from headgeom.launch import make_launcher
from headgeom.report.markdown import count_noun

__all__ = ["launcher_from_args", "print_submission"]


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
        print(f"submitted {count_noun(len(res['submitted']), 'cell')} as SLURM "
              f"{'job' if len(jobs) == 1 else 'jobs'} {', '.join(jobs)}")
    print(f"{count_noun(len(res['waiting']), 'cell')} pending or running; logs under {res['paths']['slurm']}\n"
          f"their state: {res['command']} --status\n"
          f"rerun the same command once they finish to write {res['paths']['report']} (finished cells are "
          f"kept, failed ones resubmitted), or add --wait to wait for them")

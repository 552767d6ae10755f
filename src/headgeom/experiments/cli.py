"""``headgeom reproduce`` and ``headgeom theory``: run the paper's experiments (or their plan,
``--dry-run``, or their state, ``--status``) and print where the report went.

The parsers are :func:`headgeom.commands.reproduce.add_reproduce` and ``add_theory`` (torch-free);
they name :func:`run_reproduce` and :func:`run_theory`.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from headgeom.experiments.runner import cell_status, plan_experiments, run_experiments
from headgeom.launch.cli import launcher_from_args, print_submission
from headgeom.launch.dry_run import dry_run
from headgeom.released.manifest import RELEASED_ENV, resolve_released_dir
from headgeom.report.markdown import count_noun
from headgeom.report.terminal import terminal_summary
from headgeom.train.loggers import check_logger

__all__ = ["run_reproduce", "run_theory"]


def _run(args: argparse.Namespace, theory_only: bool) -> int:
    """Dry run, status or run of the selected cells; 1 when a cell or summary step failed."""
    # an unknown name or a missing optional writer fails now, before any cell runs; the cells get the
    # canonical list ("jsonl,tensorboard")
    train_logger = ",".join(check_logger(args.logger))
    ids = [i for i in args.only.split(",") if i.strip()] if args.only else None
    if args.checkpoints is not None:
        if not Path(args.checkpoints).is_dir():
            raise FileNotFoundError(f"--checkpoints {args.checkpoints!r} is not a directory; create it and place "
                                    f"the official checkpoint files there (see the C10 section of the report)")
        os.environ["HEADGEOM_CHECKPOINTS"] = str(Path(args.checkpoints).resolve())
    if args.released is not None:  # as --checkpoints: the cells (maybe in other processes) read the variable
        os.environ[RELEASED_ENV] = str(resolve_released_dir(args.released).resolve())
    if args.dry_run:
        plan, load_errors = plan_experiments(ids, args.preset, args.seeds, theory_only, tuple(args.overrides))
        print(dry_run(plan, load_errors, preset=args.preset, seeds=args.seeds, launcher=args.launcher,
                      partition=args.partition, account=args.account, gpus=args.gpus_per_cell, time=args.time,
                      options=args.slurm_option))
        return 0
    if args.status:
        print(cell_status(ids, preset=args.preset, out=Path(args.out), seeds=args.seeds, theory_only=theory_only,
                          overrides=tuple(args.overrides)))
        return 0
    res = run_experiments(ids, preset=args.preset, out=Path(args.out), seeds=args.seeds,
                          progress=not args.quiet, theory_only=theory_only, launcher=launcher_from_args(args),
                          train_logger=train_logger, overrides=tuple(args.overrides))
    if "waiting" in res:
        print_submission(res)
        return 0
    print("\n" + terminal_summary(res))
    paths = res["paths"]
    print(f"\nwrote {paths['report']}\nwrote {paths['html']}\nwrote {paths['results']}\n"
          f"run directories under {paths['runs']}")
    if paths["figures"]:
        print(f"figures: {count_noun(len(paths['figures']), 'PNG file')} under {Path(paths['figures'][0]).parent}")
    if res["n_failed"]:
        failed = count_noun(res["n_failed"], "cell or summary step", "cells or summary steps")
        print(f"headgeom {args.command}: {failed} failed; "
              f"see {paths['report']}", file=sys.stderr)
        return 1
    return 0


def run_reproduce(args: argparse.Namespace) -> int:
    """``headgeom reproduce``: every claim's experiments (or those of ``--only``)."""
    return _run(args, theory_only=False)


def run_theory(args: argparse.Namespace) -> int:
    """``headgeom theory``: the experiments that need no training or downloads."""
    return _run(args, theory_only=True)

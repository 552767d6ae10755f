"""The ``headgeom`` command line: ``headgeom --help`` lists the commands.

Every parser lives in :mod:`headgeom.commands` and imports no torch; a command's work is imported
when it runs. :func:`main` is the one error boundary: the outputs a command declares are checked
before any work, and user errors (bad values, missing or unwritable files, a full disk) end as
one line on stderr with exit status 2.
"""
from __future__ import annotations

import argparse
import sys

from headgeom import __version__
from headgeom.commands.analyze import add_parser as add_analyze
from headgeom.commands.checkpoint import add_parser as add_checkpoint
from headgeom.commands.eval import add_parser as add_eval
from headgeom.commands.heads import add_parser as add_heads
from headgeom.commands.hessian import add_hessian, add_version
from headgeom.commands.options import HelpFormatter, examples_epilog
from headgeom.commands.outputs import check_output, os_error_message
from headgeom.commands.reproduce import add_reproduce, add_theory
from headgeom.commands.train import add_parser as add_train

__all__ = ["build_parser", "main"]

EXAMPLES = [
    "headgeom hessian --head 512-2048-2048:silu --objective negative_cosine",
    "headgeom reproduce --only C2",
    "headgeom train --method simsiam --backbone resnet18 --data shapes --epochs 2 --out runs/simsiam",
    "headgeom eval runs/simsiam",
    "headgeom heads                           # the head-spec grammar",
]


def run_version(args: argparse.Namespace) -> int:
    import platform

    import torch

    print(f"headgeom {__version__} (torch {torch.__version__}, python {platform.python_version()})")
    return 0


def run_hessian(args: argparse.Namespace) -> int:
    import torch

    from headgeom.geometry.report import format_report, hessian_report
    from headgeom.io import atomic_write_json

    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    report = hessian_report(
        args.head, args.objective, batch=args.batch_size, state=args.state, reading=args.reading,
        seed=args.seed, scope=args.scope, mode=args.mode, dtype=dtype,
    )
    print(format_report(report))
    if args.json:
        atomic_write_json(args.json, report)
        print(f"\nwrote {args.json}")
    return 0


def _run(args: argparse.Namespace, theory_only: bool) -> int:
    import os
    from pathlib import Path

    from headgeom.experiments.runner import cell_status, plan_experiments, run_experiments
    from headgeom.launch.cli import launcher_from_args, print_submission
    from headgeom.launch.dry_run import dry_run
    from headgeom.report.markdown import count_noun, format_claims_short
    from headgeom.train.loggers import check_logger

    check_logger(args.logger)  # a missing optional writer fails now, before any cell runs
    ids = [i for i in args.only.split(",") if i.strip()] if args.only else None
    if args.checkpoints is not None:
        if not Path(args.checkpoints).is_dir():
            raise FileNotFoundError(f"--checkpoints {args.checkpoints!r} is not a directory; create it and place "
                                    f"the official checkpoint files there (see the C10 section of the report)")
        os.environ["HEADGEOM_CHECKPOINTS"] = str(Path(args.checkpoints).resolve())
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
                          train_logger=args.logger, overrides=tuple(args.overrides))
    if "waiting" in res:
        print_submission(res)
        return 0
    print("\n" + format_claims_short(res["claims"]))
    paths = res["paths"]
    print(f"\nwrote {paths['report']}\nwrote {paths['results']}\nrun directories under {paths['runs']}")
    if paths["figures"]:
        print(f"figures: {count_noun(len(paths['figures']), 'PNG file')} under {Path(paths['figures'][0]).parent}")
    if res["n_failed"]:
        failed = count_noun(res["n_failed"], "cell or summary step", "cells or summary steps")
        print(f"headgeom {args.command}: {failed} failed; "
              f"see {paths['report']}", file=sys.stderr)
        return 1
    return 0


def run_reproduce(args: argparse.Namespace) -> int:
    return _run(args, theory_only=False)


def run_theory(args: argparse.Namespace) -> int:
    return _run(args, theory_only=True)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``headgeom`` parser; builds without importing torch."""
    p = argparse.ArgumentParser(
        prog="headgeom", formatter_class=HelpFormatter,
        description="Exact geometry of SSL projection heads: H_eff = G + M, collapse, invariance. "
        "`headgeom COMMAND --help` gives each command's options and examples.",
        epilog=examples_epilog(EXAMPLES))
    p.add_argument("--version", action="version", version=f"headgeom {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    add_version(sub)
    add_hessian(sub)
    add_reproduce(sub)
    add_theory(sub)
    add_train(sub)
    add_eval(sub)
    add_analyze(sub)
    add_checkpoint(sub)
    add_heads(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    outputs = args.func.outputs(args)
    try:
        for out in outputs:  # before any work: a bad --out fails now, not after an hour
            check_output(out)
        return args.func(args)
    except OSError as err:  # FileNotFoundError, PermissionError, a full disk, ...
        print(f"headgeom {args.command}: error: {os_error_message(err, outputs)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, RuntimeError) as err:
        print(f"headgeom {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``headgeom`` command line: ``headgeom --help`` lists the commands.

Every parser lives in :mod:`headgeom.commands` and imports no torch; a command's work is imported
when it runs. :func:`main` is the one error boundary: the outputs a command declares are checked
before any work, and user errors (bad values, missing or unwritable files, a full disk) end as
one line on stderr with exit status 2. While a command runs, the INFO messages of the libraries it
drives stay off the console unless ``--verbose`` (:mod:`headgeom.commands.verbosity`).
"""
from __future__ import annotations

import argparse
import platform
import sys

from headgeom import __version__
from headgeom.commands.analyze import add_parser as add_analyze
from headgeom.commands.checkpoint import add_parser as add_checkpoint
from headgeom.commands.data import add_parser as add_data
from headgeom.commands.eval import add_parser as add_eval
from headgeom.commands.heads import add_parser as add_heads
from headgeom.commands.hessian import add_hessian, add_version
from headgeom.commands.options import HelpFormatter, examples_epilog
from headgeom.commands.outputs import check_output, os_error_message
from headgeom.commands.released import add_parser as add_released
from headgeom.commands.reproduce import add_reproduce, add_theory
from headgeom.commands.train import add_parser as add_train
from headgeom.commands.verbosity import third_party_logs, verbose_requested

__all__ = ["build_parser", "main"]

EXAMPLES = [
    "headgeom hessian --head 512-2048-2048:silu --objective negative_cosine",
    "headgeom reproduce --only C2",
    "headgeom train --method simsiam --backbone resnet18 --data shapes --epochs 2 --out runs/simsiam",
    "headgeom eval runs/simsiam",
    "headgeom heads                           # the head-spec grammar",
]


def run_version(args: argparse.Namespace) -> int:
    import torch  # here, not at the top: `headgeom --help` builds every parser without importing torch

    print(f"headgeom {__version__} (torch {torch.__version__}, python {platform.python_version()})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole ``headgeom`` parser; builds without importing torch."""
    p = argparse.ArgumentParser(
        prog="headgeom", formatter_class=HelpFormatter, allow_abbrev=False,  # --epoch is not --epochs
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
    add_released(sub)
    add_data(sub)
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
        with third_party_logs(verbose_requested(getattr(args, "verbose", False))):
            return args.func(args)
    except OSError as err:  # FileNotFoundError, PermissionError, a full disk, ...
        print(f"headgeom {args.command}: error: {os_error_message(err, outputs)}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, RuntimeError) as err:
        print(f"headgeom {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``headgeom`` command line: ``headgeom --help`` lists the commands."""
from __future__ import annotations

import argparse
import sys

from headgeom import __version__


def _cmd_version(args: argparse.Namespace) -> int:
    import platform

    import torch

    print(f"headgeom {__version__} (torch {torch.__version__}, python {platform.python_version()})")
    return 0


def _cmd_hessian(args: argparse.Namespace) -> int:
    import torch

    from headgeom.geometry.report import format_report, hessian_report
    from headgeom.io import atomic_write_json

    dtype = {"float64": torch.float64, "float32": torch.float32}[args.dtype]
    report = hessian_report(
        args.head, args.objective, batch=args.batch, state=args.state, reading=args.reading,
        seed=args.seed, scope=args.scope, mode=args.mode, dtype=dtype,
    )
    print(format_report(report))
    if args.json:
        atomic_write_json(args.json, report)
        print(f"\nwrote {args.json}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from headgeom.geometry.readings import READINGS

    p = argparse.ArgumentParser(
        prog="headgeom",
        description="Exact geometry of SSL projection heads: H_eff = G + M, collapse, invariance.",
    )
    p.add_argument("--version", action="version", version=f"headgeom {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    v = sub.add_parser("version", help="print the versions of headgeom, torch and python")
    v.set_defaults(func=_cmd_version)

    h = sub.add_parser(
        "hessian",
        help="spectra of H_eff, G and M for a head and an objective",
        description="Spectra of the effective Hessian H_eff = G + M of an SSL objective with respect to "
        "the representation z, for a head given as a preset name or a compact spec (e.g. 512-2048-2048:silu:bn).",
    )
    h.add_argument("--head", required=True, help="preset name (paper_projector, simclr, ...) or spec string")
    h.add_argument("--objective", required=True,
                   help="mse, negative_cosine, nt_xent, info_nce, vicreg, barlow_twins, dino")
    h.add_argument("--batch", type=int, default=32, help="samples N (default 32)")
    h.add_argument("--state", choices=["random", "pseudo-collapsed"], default="random",
                   help="head at initialisation, or its Linear weights x0.1 (paper's pseudo-collapse)")
    h.add_argument("--reading", choices=sorted(READINGS), default="ambient", help="loss-Hessian reading for G")
    h.add_argument("--scope", choices=["blocks", "dense", "operator"], default="blocks",
                   help="per-sample blocks (default), the whole dense matrix (small N*d), or Lanczos on the operator")
    h.add_argument("--mode", choices=["eval", "train"], default="eval", help="head mode (BatchNorm statistics)")
    h.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--json", default=None, metavar="PATH", help="also write the full result as JSON")
    h.set_defaults(func=_cmd_hessian)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        print(f"headgeom {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The ``headgeom`` command line: ``headgeom --help`` lists the commands."""
from __future__ import annotations

import argparse
import sys

from headgeom import __version__
from headgeom.launch.cli import add_launch_options


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


def _run(args: argparse.Namespace, theory_only: bool) -> int:
    import os
    from pathlib import Path

    from headgeom.experiments.runner import cell_status, run_experiments
    from headgeom.launch.cli import launcher_from_args, print_submission
    from headgeom.report.markdown import format_claims_short

    ids = [i for i in args.only.split(",") if i.strip()] if args.only else None
    if args.checkpoints is not None:
        if not Path(args.checkpoints).is_dir():
            raise FileNotFoundError(f"--checkpoints {args.checkpoints!r} is not a directory; create it and place "
                                    f"the official checkpoint files there (see the C10 section of the report)")
        os.environ["HEADGEOM_CHECKPOINTS"] = str(Path(args.checkpoints).resolve())
    if args.status:
        print(cell_status(ids, preset=args.preset, out=Path(args.out), seeds=args.seeds, theory_only=theory_only))
        return 0
    res = run_experiments(ids, preset=args.preset, out=Path(args.out), seeds=args.seeds,
                          progress=not args.no_progress, theory_only=theory_only, launcher=launcher_from_args(args))
    if "waiting" in res:
        print_submission(res)
        return 0
    print("\n" + format_claims_short(res["claims"]))
    paths = res["paths"]
    print(f"\nwrote {paths['report']}\nwrote {paths['results']}\nrun directories under {paths['runs']}")
    if paths["figures"]:
        print(f"figures: {len(paths['figures'])} PNG under {Path(paths['figures'][0]).parent}")
    if res["n_failed"]:
        print(f"headgeom {args.command}: {res['n_failed']} cell(s) or summary step(s) failed; "
              f"see {paths['report']}", file=sys.stderr)
        return 1
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    return _run(args, theory_only=False)


def _cmd_theory(args: argparse.Namespace) -> int:
    return _run(args, theory_only=True)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", choices=["quick", "small", "paper"], default="quick",
                   help="experiment sizes: quick (minutes on 2 CPU cores, default), small, paper")
    p.add_argument("--only", default=None, metavar="ID[,ID...]", help="run only these experiment ids (e.g. C1,C4)")
    p.add_argument("--out", default="reproduce-out", metavar="DIR",
                   help="output folder for report.md, results.json, figures/ and runs/ (default reproduce-out)")
    p.add_argument("--seeds", type=int, default=None, metavar="N", help="override the presets' number of seeds")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--checkpoints", default=None, metavar="DIR",
                   help="folder holding the official pretrained checkpoints for C10 (default $HEADGEOM_CHECKPOINTS)")
    add_launch_options(p)


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

    r = sub.add_parser(
        "reproduce", help="run registered experiments and write report.md, results.json, figures",
        description="Run the registered experiments (claims C1...C12 of the paper) cell by cell into "
        "DIR/runs/, skipping finished cells, and write DIR/report.md, DIR/results.json and DIR/figures/. "
        "Exits 1 when a cell failed.",
    )
    _add_run_options(r)
    r.set_defaults(func=_cmd_reproduce)
    t = sub.add_parser(
        "theory", help="reproduce restricted to the theory experiments (C1-C7)",
        description="Same as `headgeom reproduce`, restricted to experiments marked theory=True (C1-C7).",
    )
    _add_run_options(t)
    t.set_defaults(func=_cmd_theory)

    from headgeom.checkpoints.cli import add_parser as add_checkpoint
    from headgeom.eval.cli import add_parser as add_eval
    from headgeom.orbits.cli import add_parser as add_analyze
    from headgeom.train.cli import add_parser as add_train

    add_train(sub)
    add_eval(sub)
    add_analyze(sub)
    add_checkpoint(sub)
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

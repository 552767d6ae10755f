"""``headgeom eval RUN``: probes at every point of a trained run, written into the run dir.

Wiring (in headgeom.cli.build_parser): ``from headgeom.eval import cli as eval_cli`` then
``eval_cli.add_parser(sub)``; the parser's ``func`` is :func:`run`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

__all__ = ["add_parser", "format_table", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``eval`` on the ``headgeom`` sub-command parser."""
    p = subparsers.add_parser(
        "eval", help="kNN, linear and rotation probes on z and every head layer of a run",
        description="Evaluate a run written by `headgeom train --out RUN` on frozen features: "
        "weighted kNN (cosine, k=200, T=0.1) and a linear probe (standardised features, "
        "L-BFGS, weight decay 1e-4) for classes, and the paper's 4-way rotation probe, on the "
        "backbone output z and after every layer of the projector (a guillotine sweep), plus "
        "RankMe and covariance statistics. Writes RUN/eval.json (or --out).",
    )
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
    p.add_argument("--no-knn", action="store_true", help="skip the kNN probe")
    p.add_argument("--no-linear", action="store_true", help="skip the class linear probe")
    p.add_argument("--no-rotation", action="store_true", help="skip the rotation probe")
    p.add_argument("--l2-input", action="store_true",
                   help="also feed the head z/||z|| (the paper's variant; points l2z/head.i)")
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
    p.add_argument("--batch-size", type=int, default=256, help="feature-extraction batch (default 256)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda[:i]")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsets (default 0)")
    p.add_argument("--out", default=None, metavar="FILE", help="result file (default RUN/eval.json)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)
    return p


def format_table(results: dict) -> str:
    """One line per point: module, kNN, linear and rotation top-1 (%)."""
    from headgeom.eval.evaluate import summary_rows

    k0 = results["protocol"]["k"][0]
    lines = [f"{'point':<14} {'module':<22} {'kNN@' + str(k0):>8} {'linear':>8} {'rotation':>9}"]

    def cell(v: float, w: int) -> str:
        return f"{'-':>{w}}" if math.isnan(v) else f"{v:>{w}.2f}"

    for point, module, knn, lin, rot in summary_rows(results):
        lines.append(f"{point:<14} {module[:22]:<22} {cell(knn, 8)} {cell(lin, 8)} {cell(rot, 9)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Evaluate RUN and write the results atomically; returns the exit status."""
    from headgeom.eval.evaluate import EvalConfig, evaluate_run
    from headgeom.eval.linear_probe import LinearProbeConfig
    from headgeom.io import atomic_write_json

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist; pass the --out folder "
                                f"of `headgeom train`")
    config = EvalConfig(
        k=tuple(args.k) if args.k else (200,), temperature=args.temperature,
        knn=not args.no_knn, linear=not args.no_linear, rotation=not args.no_rotation,
        probe=LinearProbeConfig(weight_decay=args.probe_wd, max_iter=args.probe_max_iter),
        head_inputs=("raw", "l2") if args.l2_input else ("raw",),
        max_train=args.max_train, max_test=args.max_test, rotation_train=args.rotation_train,
        rotation_test=args.rotation_test, stats_max=args.stats_max,
        points=tuple(q.strip() for q in args.points.split(",") if q.strip()) if args.points else None,
        batch_size=args.batch_size, seed=args.seed)
    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    results = evaluate_run(run_dir, data_dir=args.data_dir, config=config, device=args.device,
                           checkpoint=args.checkpoint, predictor=args.predictor,
                           random_baseline=args.random_baseline, log=log)
    out = Path(args.out) if args.out else run_dir / "eval.json"
    atomic_write_json(out, results)
    print(f"{results['method']} / {results['backbone']} on {results['data']}, step "
          f"{results['step']} (top-1 %, test set of {results['trained']['n_test']})")
    print(format_table(results["trained"]))
    if "random_init" in results:
        print("\nrandom initialisation, same architecture:")
        print(format_table(results["random_init"]))
    print(f"\nwrote {out}")
    return 0

"""``headgeom eval RUN``: probes at every point of a trained run, written into the run dir.

The parser is :func:`headgeom.commands.eval.add_parser` (torch-free); it names :func:`run`.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from headgeom.commands.eval import add_parser  # the parser lives with the torch-free parsers
from headgeom.eval.evaluate import EvalConfig, evaluate_run, summary_rows
from headgeom.eval.linear_probe import LinearProbeConfig
from headgeom.eval.mlp_probe import MLPProbeConfig
from headgeom.io import atomic_write_json

__all__ = ["add_parser", "format_table", "run"]


def format_table(results: dict) -> str:
    """One line per point: module, kNN, linear, MLP (when run) and rotation top-1 (%)."""
    k0 = results["protocol"]["k"][0]
    rows = summary_rows(results)
    mlp = any(not math.isnan(row[4]) for row in rows)
    lines = [f"{'point':<14} {'module':<22} {'kNN@' + str(k0):>8} {'linear':>8}"
             + (f" {'MLP':>8}" if mlp else "") + f" {'rotation':>9}"]

    def cell(v: float, w: int) -> str:
        return f"{'-':>{w}}" if math.isnan(v) else f"{v:>{w}.2f}"

    for point, module, knn, lin, mlp_acc, rot in rows:
        lines.append(f"{point:<14} {module[:22]:<22} {cell(knn, 8)} {cell(lin, 8)}"
                     + (f" {cell(mlp_acc, 8)}" if mlp else "") + f" {cell(rot, 9)}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Evaluate RUN and write the results atomically; returns the exit status."""
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist; pass the --out folder "
                                f"of `headgeom train`")
    config = EvalConfig(
        k=tuple(args.k) if args.k else (200,), temperature=args.temperature,
        knn=not args.no_knn, linear=not args.no_linear, rotation=not args.no_rotation, mlp=args.mlp,
        probe=LinearProbeConfig(weight_decay=args.probe_wd, max_iter=args.probe_max_iter),
        mlp_probe=MLPProbeConfig(hidden=args.mlp_hidden, epochs=args.mlp_epochs, seed=args.seed),
        head_inputs={"raw": ("raw",), "l2": ("l2",), "both": ("raw", "l2")}[args.head_input],
        max_train=args.max_train, max_test=args.max_test, rotation_train=args.rotation_train,
        rotation_test=args.rotation_test, stats_max=args.stats_max,
        points=tuple(q.strip() for q in args.points.split(",") if q.strip()) if args.points else None,
        batch_size=args.batch_size, seed=args.seed)
    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    results = evaluate_run(run_dir, data_dir=args.data_dir, config=config, device=args.device,
                           checkpoint=args.checkpoint, predictor=args.predictor,
                           random_baseline=args.random_baseline, log=log)
    out = Path(args.json) if args.json else run_dir / "eval.json"
    atomic_write_json(out, results)
    print(f"{results['method']} / {results['backbone']} on {results['data']}, step "
          f"{results['step']} (top-1 %, test set of {results['trained']['n_test']})")
    print(format_table(results["trained"]))
    if "random_init" in results:
        print("\nrandom initialisation, same architecture:")
        print(format_table(results["random_init"]))
    print(f"\nwrote {out}")
    return 0

"""``headgeom hessian``: spectra of H_eff, G and M for a head, an objective and a state, printed
(and written with ``--json FILE``).

The parser is :func:`headgeom.commands.hessian.add_hessian` (torch-free); it names :func:`run`.
"""
from __future__ import annotations

import argparse

import torch

from headgeom.geometry.report import format_report, hessian_report
from headgeom.io import atomic_write_json

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Compute the report of ``args`` (see :func:`headgeom.geometry.report.hessian_report`); returns 0."""
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

"""``headgeom hessian`` and ``headgeom version``: their parsers."""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .options import add_command, deprecated_alias
from .outputs import json_output
from .vocabulary import OBJECTIVES, READINGS

__all__ = ["add_hessian", "add_version"]


def add_version(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(subparsers, "version", help="print the versions of headgeom, torch and python",
                    description="Print the versions of headgeom, torch and python.",
                    examples=["headgeom version"])
    p.set_defaults(func=Command("headgeom.cli:run_version"))
    return p


def add_hessian(subparsers: Any) -> argparse.ArgumentParser:
    p = add_command(
        subparsers, "hessian", help="spectra of H_eff, G and M for a head and an objective",
        description="Spectra of the effective Hessian H_eff = G + M of an SSL objective with respect to "
        "the representation z, for a head given as a preset name or a compact spec (see `headgeom heads`). "
        "z ~ N(0, I) (N, d); a second view z + 0.1*eps, whose head output is held fixed, is the target.",
        examples=["headgeom hessian --head 512-2048-2048:silu --objective negative_cosine --batch-size 32 "
                  "--json h.json",
                  "headgeom hessian --head paper_projector --objective negative_cosine --state pseudo-collapsed "
                  "--reading tangential",
                  "headgeom hessian --head 64-256-256:gelu:bn --objective nt_xent --mode train --scope dense"])
    a = p.add_argument
    a("--head", required=True, metavar="SPEC", help="preset name (paper_projector, simclr, ...) or head spec "
      "(`headgeom heads` explains the grammar)")
    a("--objective", required=True, metavar="NAME", help=", ".join(OBJECTIVES))
    batch = a("--batch-size", type=int, default=32, metavar="N", help="samples N (default 32)")
    a("--state", choices=["random", "pseudo-collapsed"], default="random",
      help="head at initialisation, or its Linear weights x0.1 (paper's pseudo-collapse)")
    a("--reading", choices=READINGS, default="ambient",
      help="loss-Hessian reading for G (default ambient): ambient = the exact Hessian of the loss; tangential = "
      "its Riemannian Hessian on the sphere (cosine losses; unchanged by the head output's scale). The MSE "
      "premise is --objective mse read ambient")
    a("--scope", choices=["blocks", "dense", "operator"], default="blocks",
      help="per-sample blocks (default), the whole dense matrix (small N*d), or Lanczos on the operator")
    a("--mode", choices=["eval", "train"], default="eval", help="head mode (BatchNorm statistics)")
    a("--dtype", choices=["float64", "float32"], default="float64")
    a("--seed", type=int, default=0)
    a("--json", default=None, metavar="FILE", help="also write the full result (all eigenvalues) as JSON")
    deprecated_alias(p, "--batch", batch)
    p.set_defaults(func=Command("headgeom.geometry.cli:run", outputs=json_output))
    return p

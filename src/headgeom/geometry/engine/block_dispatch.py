"""Which strategy computes a block query, decided from the analysis's facts alone.

A query of the per-sample diagonal blocks of H_eff, G or M is dispatched by the head and the loss
(:class:`~headgeom.geometry.engine.analysis_facts.AnalysisFacts`): row-wise head and separable loss: the
sandwich (an MLP chain, when the FLOP count of :func:`~headgeom.geometry.engine.sandwich.block_costs`
and memory allow) or the Jacobian strategy; row-wise head and coupled loss: the rows strategy; a
head that couples samples: the coupled-matvecs strategy (:mod:`headgeom.geometry.engine.block_strategies`).
:func:`plan` is the pure decision, :func:`compute_blocks` runs it and returns the path taken.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from .analysis_facts import AnalysisFacts
from .block_strategies import coupled_head_blocks, coupled_loss_blocks, separable_blocks
from .loss_curvature import LowRankCurvature
from .sandwich import block_costs, tail_width

SANDWICH_MEMORY = 1 << 30  # bytes of (N, m, m) loss blocks the generic sandwich may hold
PARTS = {"H": (True, True), "G": (True, False), "M": (False, True)}
Rows = int | slice | Tensor | list | tuple | range | None


class Plan(NamedTuple):
    """The path a query takes, whether it is the sandwich, and the loss's low-rank blocks it reads."""

    path: str
    sandwich: bool
    curvature: LowRankCurvature | None


def _use_sandwich(facts: AnalysisFacts, want_g: bool) -> tuple[bool, LowRankCurvature | None]:
    """(True, the loss's low-rank blocks or None) when the sandwich path (:mod:`headgeom.geometry.engine.sandwich`) runs."""
    layers, strategy = facts.layers, facts.settings.block_strategy
    if layers is None or strategy == "jacobian":
        return False, None
    curv = facts.loss_curvature[0] if want_g else None
    if strategy == "sandwich" or not want_g:
        return True, curv
    costs = block_costs(layers, facts.d, facts.k, curv is not None, diagonal=curv is not None and curv.diag is not None)
    m = tail_width(layers, facts.k)
    fits = curv is not None or facts.n * m * m * facts.z.element_size() <= SANDWICH_MEMORY
    return costs["sandwich"] <= costs["jacobian"] and fits, curv


def plan(facts: AnalysisFacts, want_g: bool, want_m: bool) -> Plan:
    """The path of a query of G (``want_g``) and/or M (``want_m``) blocks.

    "sandwich+<how>" / "jacobian[+<how>]" (row-wise head, separable loss; <how> is where the
    loss's blocks come from: declared-curvature, discovered-curvature or hvp), "rows[+...]"
    (row-wise head, coupled loss), "coupled-matvecs" (a head that couples samples). It may
    measure the loss curvature (a lazy fact), nothing else."""
    if not facts.row_wise_head:
        return Plan("coupled-matvecs", False, None)
    if facts.separable_loss:
        sandwich, curv = _use_sandwich(facts, want_g)
        if sandwich:
            return Plan("sandwich+" + (facts.loss_curvature[1] if curv is not None else "hvp"), True, curv)
        if want_g:
            curv, how = facts.loss_curvature
            return Plan("jacobian+" + how if curv is not None else "jacobian", False, curv)
        return Plan("jacobian", False, None)
    if want_g and facts.coupled_blocks is not None:
        return Plan("rows+declared-coupled-blocks", False, None)
    return Plan("rows+hvp" if want_g else "rows", False, None)


def block_path(facts: AnalysisFacts, part: str = "H") -> str:
    """The path a block query of ``part`` ("H", "G" or "M") takes; the same for every ``rows``."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {sorted(PARTS)}; got {part!r}")
    return plan(facts, *PARTS[part]).path


def rows_index(rows: Rows, n: int, device: torch.device) -> Tensor | None:
    """``rows`` as distinct sample indices (None: all n samples)."""
    if rows is None:
        return None
    if isinstance(rows, bool):
        raise ValueError(f"rows must be None, an int b (the first b samples), a slice or indices; got {rows!r}")
    if isinstance(rows, int):
        if not 1 <= rows <= n:
            raise ValueError(f"rows = b must satisfy 1 <= b <= N = {n} (the first b samples); got {rows}")
        return torch.arange(rows, device=device)
    if isinstance(rows, slice):
        idx = torch.arange(n, device=device)[rows]
    else:
        idx = torch.as_tensor(rows, device=device)
        if idx.dtype == torch.bool or idx.is_floating_point() or idx.ndim != 1:
            raise ValueError(f"rows must be a 1-D tensor or list of integer sample indices; got {rows!r}")
        idx = idx.long()
    if idx.numel() == 0:
        raise ValueError(f"rows selects no sample (N = {n}); give at least one index")
    if bool(((idx < -n) | (idx >= n)).any()):
        raise ValueError(f"rows has indices outside [-{n}, {n}) (N = {n} samples): {idx.tolist()}")
    idx = idx % n
    if idx.unique().numel() != idx.numel():
        raise ValueError(f"rows has repeated samples: {idx.tolist()}; give each sample once")
    return idx


def compute_blocks(facts: AnalysisFacts, want_g: bool, want_m: bool, merged: bool = False,
                   idx: Tensor | None = None) -> tuple[Tensor | None, Tensor | None, str]:
    """(G blocks, M blocks, path) of the samples idx (None: all). With ``merged`` only G + M is
    meaningful, and a strategy may return it whole as (G + M, None)."""
    chosen = plan(facts, want_g, want_m)
    if not facts.row_wise_head:
        g, m = coupled_head_blocks(facts, want_g, want_m, idx)
    elif facts.separable_loss:
        g, m = separable_blocks(facts, want_g, want_m, merged, chosen.sandwich, chosen.curvature, idx)
    else:
        g, m = coupled_loss_blocks(facts, want_g, want_m, idx)
    return g, m, chosen.path

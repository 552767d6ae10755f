"""Per-sample diagonal blocks of H_eff, G and M: the strategies, functions of the measured facts.

- row-wise head, separable loss (block-diagonal ∇²_u L): the sandwich of
  :mod:`headgeom.geometry.engine.sandwich` for MLP chains, with the loss's blocks declared,
  discovered (:mod:`headgeom.geometry.engine.loss_discovery`) or from loss HVPs; else J_iᵀ for
  every sample and one loss HVP per column of J carrying every sample at once ("jacobian")
  (:func:`separable_blocks`);
- row-wise head, coupled loss: per-sample Jacobians and the loss's diagonal blocks, declared
  (NT-Xent) or from k (or d) single-row HVPs per sample ("rows", :func:`coupled_loss_blocks`);
- batch-coupled head (train-mode BatchNorm): one H_eff matvec per basis vector e_{i,c} of the
  requested samples ("coupled-matvecs", :func:`coupled_head_blocks`).

Each takes the :class:`~headgeom.geometry.engine.analysis_facts.AnalysisFacts` (and the choice of
:mod:`headgeom.geometry.engine.block_dispatch`) and returns ``(G blocks, M blocks)``; every strategy is
exact, and none writes to the facts.
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import Tensor
from torch.func import hessian, jacfwd, jacrev, vmap

from .analysis_facts import AnalysisFacts
from .loss_curvature import LowRankCurvature
from .sandwich import sandwich_blocks
from .chain import chain_pass
from .operator_path import gauss_newton_matvec, interaction_matvec
from ..linalg.low_rank import add_low_rank_
from ..linalg.weighted_gram import symmetric_bmm

Blocks = tuple[Tensor | None, Tensor | None]


def _restricted_hvp(hvp: Callable[[Tensor], Tensor], like: Tensor, idx: Tensor) -> Callable[[Tensor], Tensor]:
    """w (b, k) ↦ rows idx of ∇²_u L [w on rows idx, 0 elsewhere]: for a block-diagonal ∇²_u L,
    the blocks [∇²L]_ii w_i of the samples idx alone."""
    def sub(w: Tensor) -> Tensor:
        return hvp(torch.zeros_like(like).index_copy(0, idx, w))[idx]
    return sub


def row_chunks(facts: AnalysisFacts, idx: Tensor | None = None) -> Iterator[Tensor]:
    """Index tensors of consecutive chunks of at most ``chunk_size`` of the samples idx (None: all)."""
    if idx is None:
        idx = torch.arange(facts.n, device=facts.z.device)
    size = facts.settings.chunk_size
    for start in range(0, idx.numel(), size):
        yield idx[start:start + size]


def separable_blocks(facts: AnalysisFacts, want_g: bool, want_m: bool, merged: bool, sandwich: bool,
                     curv: LowRankCurvature | None, idx: Tensor | None) -> Blocks:
    """Row-wise head and block-diagonal loss Hessian: the sandwich, or J_iᵀ for the samples and
    then one loss HVP per column of J carrying every sample at once: G_i = J_iᵀ [∇²_u L]_ii J_i."""
    d, k, size = facts.d, facts.k, facts.settings.chunk_size
    z_all, kw = facts.z, dict(dtype=facts.z.dtype, device=facts.z.device)
    hvp = facts.loss_hvp()
    if idx is not None:  # the requested samples' loss blocks alone (∇²_u L is block-diagonal)
        hvp = _restricted_hvp(hvp, facts.u, idx)
        curv = None if curv is None else curv.rows(idx)
    if sandwich:
        z, rho = (z_all, facts.rho) if idx is None else (z_all[idx], facts.rho[idx])
        with facts.head.facts.workspace.lease() as workspace:
            return sandwich_blocks(facts.layers, z, rho, curv, hvp, want_g, want_m, size, merged=merged,
                                   products=facts.chain_products(), workspace=workspace)
    n = facts.n if idx is None else idx.numel()
    jt_all = torch.empty(n, d, k, **kw) if want_g and n > size else None  # one chunk: its own J_iᵀ, no copy
    ms = []
    for start, chunk in zip(range(0, n, size), row_chunks(facts, idx)):
        jt, m = row_jacobian(facts, chunk, want_m)
        if want_g and jt_all is None:
            jt_all = jt.contiguous()
        elif want_g:
            jt_all[start:start + chunk.numel()] = jt
        if want_m:
            ms.append(m)
    g = None
    if want_g:
        hjt = torch.empty_like(jt_all)  # [∇²L]_ii J_i, transposed like J
        if curv is not None:  # declared or discovered blocks: α_i J_iᵀ (+ J_iᵀ diag δ_i) + J_iᵀ U_i B_i U_iᵀ, no HVPs
            with torch.no_grad():  # G is formed from detached factors below: no graph to keep
                _declared_products(curv, jt_all, hjt, size)
        else:
            step = max(1, min(d, (1 << 21) // max(1, facts.n * k)))  # ~16 MB of tangents: cache-sized chunks
            for c0 in range(0, d, step):
                cols = slice(c0, min(c0 + step, d))
                hjt[:, cols, :] = vmap(hvp)(jt_all[:, cols, :].transpose(0, 1)).transpose(0, 1)
        g = torch.empty(n, d, d, **kw)
        for start in range(0, n, size):
            rows = slice(start, min(start + size, n))
            symmetric_bmm(jt_all[rows].detach(), hjt[rows].detach(), g[rows])  # J_iᵀ (H_i J_i)
    return g, (torch.cat(ms) if want_m else None)


def _declared_products(curv: LowRankCurvature, jt_all: Tensor, hjt: Tensor, size: int) -> None:
    """hjt = [∇²_u L]_ii J_i, transposed like J, from the declared blocks α_i I (+ diag δ_i) + U_i B_i U_iᵀ,
    every term written in place (chunks of ``size`` samples)."""
    n = jt_all.shape[0]
    for start in range(0, n, size):
        rows = slice(start, min(start + size, n))
        c, jt, h = curv.rows(rows), jt_all[rows], hjt[rows]
        torch.mul(jt, c.alpha[:, None, None], out=h)
        if c.diag is not None:  # a declared diagonal (DINO): J_iᵀ diag(δ_i)
            h.addcmul_(jt, c.diag[:, None, :])
        if c.U is not None:  # + J_iᵀ U_i B_iᵀ U_iᵀ
            add_low_rank_(h, (jt @ c.U) @ c.B.transpose(1, 2), c.U)


def row_jacobian(facts: AnalysisFacts, idx: Tensor, want_m: bool) -> tuple[Tensor, Tensor | None]:
    """J_iᵀ (s, d, k) and M_i (s, d, d) for the samples idx of a row-wise head."""
    zc = facts.z[idx]
    rc = facts.rho[idx] if want_m else None
    if facts.layers is not None:
        out = chain_pass(facts.layers, zc, rc)
        return out.jt, out.interaction
    fn = facts.head.fn
    row = lambda zi: fn(zi[None])[0]  # noqa: E731
    # batched over samples by vmap; a forward with data-dependent control flow cannot be
    # vmapped (its branch depends on the sample), so it is run one sample at a time
    try:
        jac = vmap(jacfwd(row))(zc)
    except (NotImplementedError, RuntimeError):
        try:
            jac = vmap(jacrev(row))(zc)
        except (NotImplementedError, RuntimeError):
            jac = torch.stack([jacrev(row)(zi) for zi in zc])
    m = None
    if want_m:
        contracted = lambda zi, ri: (ri * row(zi)).sum()  # noqa: E731
        try:
            m = vmap(hessian(contracted))(zc, rc)
        except (NotImplementedError, RuntimeError):
            try:
                m = vmap(jacrev(jacrev(contracted)))(zc, rc)
            except (NotImplementedError, RuntimeError):
                m = torch.stack([jacrev(jacrev(contracted))(zi, ri) for zi, ri in zip(zc, rc)])
    return jac.transpose(1, 2), m


def _gauss_newton_rows(facts: AnalysisFacts, idx: Tensor, jt: Tensor) -> Tensor:
    """G_i = J_iᵀ [∇²_u L]_ii J_i for the samples idx of a coupled loss, from its declared
    diagonal blocks or single-row HVPs."""
    n, d, k = facts.n, facts.d, facts.k
    hvp = facts.loss_hvp()
    s = idx.numel()
    if (declared := facts.coupled_blocks) is not None:
        # a coupled loss that declares its diagonal blocks (NT-Xent): no loss HVPs at all
        hjt = jt @ declared[idx].transpose(1, 2)
    else:
        # coupled loss: [∇²L]_ii w needs a tangent w on row i alone, one loss HVP each
        def single(i: Tensor, w: Tensor) -> Tensor:
            onehot = (torch.arange(n, device=facts.z.device) == i).to(facts.u.dtype)
            return (hvp(onehot[:, None] * w[None, :]) * onehot[:, None]).sum(0)

        if k < d:
            # k HVPs per sample give the k × k block itself: hblk[i][c] = [∇²L]_ii e_c, then
            # [∇²L]_ii J_i[:, a] = Σ_c J_i[c, a] hblk[i][c] (no symmetry assumed)
            rows = idx.repeat_interleave(k)
            basis = torch.eye(k, dtype=facts.u.dtype, device=facts.u.device).repeat(s, 1)
            hblk = vmap(single, chunk_size=64)(rows, basis).reshape(s, k, k)
            hjt = jt @ hblk
        else:  # d HVPs per sample: one per column of J_i
            rows = idx.repeat_interleave(d)
            cols = jt.reshape(s * d, k)
            hjt = vmap(single, chunk_size=64)(rows, cols).reshape(s, d, k)
    return jt @ hjt.transpose(1, 2)


def coupled_loss_blocks(facts: AnalysisFacts, want_g: bool, want_m: bool, idx: Tensor | None) -> Blocks:
    """Row-wise head, coupled loss: per chunk of samples their Jacobians (and M_i), then G_i from
    the loss's declared diagonal blocks or single-row HVPs."""
    gs, ms = [], []
    for chunk in row_chunks(facts, idx):
        jt, m = row_jacobian(facts, chunk, want_m)
        if want_g:
            gs.append(_gauss_newton_rows(facts, chunk, jt))
        if want_m:
            ms.append(m)
    return (torch.cat(gs) if want_g else None), (torch.cat(ms) if want_m else None)


def coupled_head_blocks(facts: AnalysisFacts, want_g: bool, want_m: bool, idx: Tensor | None = None) -> Blocks:
    """Diagonal blocks of the samples idx (None: all) when the head couples samples
    (train-mode BatchNorm): one matvec of the whole batch per basis vector e_{i,c}, i in idx,
    keeping block i of the result (column c of A_ii = (A e_{i,c})_i)."""
    n, d = facts.n, facts.d
    device = facts.z.device
    idx = torch.arange(n, device=device) if idx is None else idx
    b = idx.numel()
    kw = dict(dtype=facts.z.dtype, device=device)
    step = max(1, 4 * facts.settings.chunk_size)

    def block_of(matvec: Callable[[AnalysisFacts, Tensor], Tensor]) -> Tensor:
        flat = torch.empty(b * d, d, **kw)
        for j0 in range(0, b * d, step):
            j = torch.arange(j0, min(j0 + step, b * d), device=device)
            rows, cols = idx[torch.div(j, d, rounding_mode="floor")], j % d
            basis = torch.zeros(j.numel(), n, d, **kw)
            basis[torch.arange(j.numel()), rows, cols] = 1.0
            flat[j] = vmap(lambda v: matvec(facts, v))(basis)[torch.arange(j.numel()), rows].detach()
        return flat.reshape(b, d, d).transpose(1, 2).contiguous()  # (b, d, d)

    g = block_of(gauss_newton_matvec) if want_g else None
    m = block_of(interaction_matvec) if want_m else None
    return g, m

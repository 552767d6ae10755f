"""Per-sample diagonal blocks of H_eff, G and M: the strategies, chosen by the head and the loss.

- row-wise head, separable loss (block-diagonal ∇²_u L): the sandwich of
  :mod:`headgeom.geometry.mlp_sandwich` for MLP chains, with the loss's blocks declared,
  discovered (:mod:`headgeom.geometry.loss_discovery`) or from loss HVPs; else J_iᵀ for
  every sample and one loss HVP per column of J carrying every sample at once ("jacobian");
- row-wise head, coupled loss: per-sample Jacobians and the loss's diagonal blocks, declared
  (NT-Xent) or from k (or d) single-row HVPs per sample;
- batch-coupled head (train-mode BatchNorm): one H_eff matvec per basis vector e_{i,c}.

A mixin of :class:`headgeom.geometry.effective_hessian.EffectiveHessian` (it reads the
analysis's z, u, rho, head, loss, reading and chunk_size); every strategy is exact.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.func import hessian, jacfwd, jacrev, vmap

from .loss_curvature import LowRankCurvature, coupled_blocks_for, curvature_for
from .loss_discovery import discover_curvature
from .mlp_sandwich import block_costs, is_linear_chain, sandwich_blocks, tail_width
from .mlp_structure import chain_pass
from .readings import loss_hvp

SANDWICH_MEMORY = 1 << 30  # bytes of (N, m, m) loss blocks the generic sandwich may hold


class BlockStrategies:
    """blocks(), gauss_newton_blocks(), interaction_blocks(), decomposed_blocks()."""

    def blocks(self) -> Tensor:
        """(N, d, d) diagonal blocks of H_eff, batched over samples."""
        g, m = self._blocks(True, True, merged=True)
        return (g + m).detach()

    def gauss_newton_blocks(self) -> Tensor:
        """(N, d, d) diagonal blocks of G."""
        return self._blocks(True, False)[0].detach()

    def interaction_blocks(self) -> Tensor:
        """(N, d, d) diagonal blocks of M."""
        return self._blocks(False, True)[1].detach()

    def decomposed_blocks(self) -> tuple[Tensor, Tensor, Tensor]:
        """(H_eff, G, M) diagonal blocks from one pass, each (N, d, d)."""
        g, m = self._blocks(True, True)
        g, m = g.detach(), m.detach()
        return g + m, g, m

    def _blocks(self, want_g: bool, want_m: bool, merged: bool = False) -> tuple[Tensor | None, Tensor | None]:
        """G and M blocks; with ``merged`` only their sum is meaningful (blocks())."""
        if not self.row_wise_head:
            return self._coupled_blocks(want_g, want_m)
        if self.separable_loss:
            return self._separable_blocks(want_g, want_m, merged)
        gs, ms = [], []
        for idx in self._row_chunks():
            jt, m = self._row_jacobian(idx, want_m)
            if want_g:
                gs.append(self._gauss_newton_rows(idx, jt))
            if want_m:
                ms.append(m)
        return (torch.cat(gs) if want_g else None), (torch.cat(ms) if want_m else None)

    def _row_chunks(self):
        """Index tensors of consecutive chunks of at most ``chunk_size`` samples."""
        for start in range(0, self.n, self.chunk_size):
            yield torch.arange(start, min(start + self.chunk_size, self.n), device=self.z.device)

    def _use_sandwich(self, want_g: bool):
        """(True, declared curvature or None) when the sandwich path of mlp_sandwich runs."""
        if self._layers is None or not is_linear_chain(self._layers) or self.block_strategy == "jacobian":
            return False, None
        curv = self._loss_curvature()[0] if want_g else None
        if self.block_strategy == "sandwich" or not want_g:
            return True, curv
        costs = block_costs(self._layers, self.d, self.k, curv is not None)
        ours, theirs = costs["sandwich"], costs["jacobian"]
        m = tail_width(self._layers, self.k)
        fits = curv is not None or self.n * m * m * self.z.element_size() <= SANDWICH_MEMORY
        return ours <= theirs and fits, curv

    def _separable_blocks(self, want_g: bool, want_m: bool, merged: bool = False) -> tuple[Tensor | None, Tensor | None]:
        """Row-wise head and block-diagonal loss Hessian: J_iᵀ for all samples, then one loss
        HVP per column of J carries every sample at once: G_i = J_iᵀ [∇²_u L]_ii J_i."""
        n, d, k = self.n, self.d, self.k
        sandwich, curv = self._use_sandwich(want_g)
        if sandwich:
            self.last_block_path = "sandwich+" + (self._loss_curvature()[1] if curv is not None else "hvp")
            hvp = loss_hvp(self.loss, self.u, self.reading)
            return sandwich_blocks(self._layers, self.z, self.rho, curv, hvp, want_g, want_m, self.chunk_size,
                                   merged=merged)
        self.last_block_path = "jacobian"
        jt_all = torch.empty(n, d, k, dtype=self.z.dtype, device=self.z.device) if want_g else None
        ms = []
        for idx in self._row_chunks():
            jt, m = self._row_jacobian(idx, want_m)
            if want_g:
                jt_all[idx] = jt
            if want_m:
                ms.append(m)
        g = None
        if want_g:
            curv, how = self._loss_curvature()
            hjt = torch.empty_like(jt_all)  # [∇²L]_ii J_i, transposed like J
            if curv is not None:  # declared or discovered blocks: α_i J_iᵀ (+ J_iᵀ diag δ_i) + J_iᵀ U_i B_i U_iᵀ, no HVPs
                self.last_block_path = "jacobian+" + how
                for start in range(0, n, self.chunk_size):
                    rows = slice(start, min(start + self.chunk_size, n))
                    c, jt = curv.rows(rows), jt_all[rows]
                    hjt[rows] = c.alpha[:, None, None] * jt
                    if c.diag is not None:  # a declared diagonal (DINO): J_iᵀ diag(δ_i)
                        hjt[rows] += jt * c.diag[:, None, :]
                    if c.U is not None:
                        hjt[rows] += (jt @ c.U) @ c.B.transpose(1, 2) @ c.U.transpose(1, 2)
            else:
                hvp = loss_hvp(self.loss, self.u, self.reading)
                step = max(1, min(d, (1 << 21) // max(1, n * k)))  # ~16 MB of tangents: cache-sized chunks
                for c0 in range(0, d, step):
                    cols = slice(c0, min(c0 + step, d))
                    hjt[:, cols, :] = vmap(hvp)(jt_all[:, cols, :].transpose(0, 1)).transpose(0, 1)
            g = torch.empty(n, d, d, dtype=self.z.dtype, device=self.z.device)
            for start in range(0, n, self.chunk_size):
                rows = slice(start, min(start + self.chunk_size, n))
                g[rows] = torch.bmm(jt_all[rows], hjt[rows].transpose(1, 2)).detach()
        return g, (torch.cat(ms) if want_m else None)

    def _row_jacobian(self, idx: Tensor, want_m: bool) -> tuple[Tensor, Tensor | None]:
        """J_iᵀ (s, d, k) and M_i (s, d, d) for the samples idx of a row-wise head."""
        zc = self.z[idx]
        rc = self.rho[idx] if want_m else None
        if self._layers is not None:
            out = chain_pass(self._layers, zc, rc)
            return out.jt, out.interaction
        fn = self.head.fn
        row = lambda zi: fn(zi[None])[0]  # noqa: E731
        try:
            jac = vmap(jacfwd(row))(zc)
        except (NotImplementedError, RuntimeError):
            jac = vmap(jacrev(row))(zc)
        m = None
        if want_m:
            contracted = lambda zi, ri: (ri * row(zi)).sum()  # noqa: E731
            try:
                m = vmap(hessian(contracted))(zc, rc)
            except (NotImplementedError, RuntimeError):
                m = vmap(jacrev(jacrev(contracted)))(zc, rc)
        return jac.transpose(1, 2), m

    def _gauss_newton_rows(self, idx: Tensor, jt: Tensor) -> Tensor:
        """G_i = J_iᵀ [∇²_u L]_ii J_i for the samples idx, from HVPs of the loss only."""
        hvp = loss_hvp(self.loss, self.u, self.reading)
        s = idx.numel()
        if self.separable_loss:
            # one tangent per column c carries J_i[:, c] on every row i of the chunk at once
            def column(jcol: Tensor) -> Tensor:  # jcol (s, k)
                w = torch.zeros_like(self.u).index_copy(0, idx, jcol)
                return hvp(w)[idx]

            hj = vmap(column, chunk_size=64)(jt.transpose(0, 1))  # (d, s, k)
            hjt = hj.transpose(0, 1)  # (s, d, k)
        elif (declared := self._declared_coupled_blocks()) is not None:
            # a coupled loss that declares its diagonal blocks (NT-Xent): no loss HVPs at all
            self.last_block_path = "rows+declared-coupled-blocks"
            hjt = jt @ declared[idx].transpose(1, 2)
        else:
            # coupled loss: [∇²L]_ii w needs a tangent w on row i alone, one loss HVP each
            def single(i: Tensor, w: Tensor) -> Tensor:
                onehot = (torch.arange(self.n, device=self.z.device) == i).to(self.u.dtype)
                return (hvp(onehot[:, None] * w[None, :]) * onehot[:, None]).sum(0)

            if self.k < self.d:
                # k HVPs per sample give the k × k block itself: hblk[i][c] = [∇²L]_ii e_c, then
                # [∇²L]_ii J_i[:, a] = Σ_c J_i[c, a] hblk[i][c] (no symmetry assumed)
                rows = idx.repeat_interleave(self.k)
                basis = torch.eye(self.k, dtype=self.u.dtype, device=self.u.device).repeat(s, 1)
                hblk = vmap(single, chunk_size=64)(rows, basis).reshape(s, self.k, self.k)
                hjt = jt @ hblk
            else:  # d HVPs per sample: one per column of J_i
                rows = idx.repeat_interleave(self.d)
                cols = jt.reshape(s * self.d, self.k)
                hjt = vmap(single, chunk_size=64)(rows, cols).reshape(s, self.d, self.k)
        return jt @ hjt.transpose(1, 2)

    def _declared_curvature(self) -> LowRankCurvature | None:
        """The loss's declared, checked low-rank blocks under the reading (or None), once."""
        if not hasattr(self, "_curvature_cache"):
            self._curvature_cache = curvature_for(self.loss, self.u, self.reading)
        return self._curvature_cache

    def _loss_curvature(self) -> tuple[LowRankCurvature | None, str]:
        """The separable loss's blocks in low-rank form and where they come from, once:
        declared (checked), else discovered (verified, headgeom.geometry.loss_discovery) when
        ``discover_structure``, else (None, "hvp")."""
        if not hasattr(self, "_loss_curvature_cache"):
            curv, how = self._declared_curvature(), "declared-curvature"
            if curv is None and self.discover_structure and self.separable_loss:
                hvp = loss_hvp(self.loss, self.u, self.reading)
                curv, how = discover_curvature(hvp, self.u), "discovered-curvature"
            self._loss_curvature_cache = (curv, how if curv is not None else "hvp")
        return self._loss_curvature_cache

    def _declared_coupled_blocks(self) -> Tensor | None:
        """The loss's declared, checked diagonal blocks (N, k, k) under the reading, once."""
        if not hasattr(self, "_coupled_cache"):
            self._coupled_cache = coupled_blocks_for(self.loss, self.u, self.reading)
        return self._coupled_cache

    def _coupled_blocks(self, want_g: bool, want_m: bool) -> tuple[Tensor | None, Tensor | None]:
        """Diagonal blocks when the head couples samples (train-mode BatchNorm): one matvec
        per basis vector e_{i,c}, keeping block i of the result."""
        n, d = self.n, self.d

        def block_of(matvec: Callable[[Tensor], Tensor]) -> Tensor:
            eye = torch.eye(self.dim, dtype=self.z.dtype, device=self.z.device)
            cols = vmap(matvec, chunk_size=max(1, 4 * self.chunk_size))(eye)  # (N·d, N·d): row j = A e_j
            cols = cols.reshape(n, d, n, d)
            ar = torch.arange(n, device=self.z.device)
            return cols[ar, :, ar, :].transpose(1, 2).contiguous()  # (N, d, d)

        g = block_of(self.gauss_newton_matvec) if want_g else None
        m = block_of(self.interaction_matvec) if want_m else None
        return g, m

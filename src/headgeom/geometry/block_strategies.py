"""Per-sample diagonal blocks of H_eff, G and M: the strategies, chosen by the head and the loss.

- row-wise head, separable loss (block-diagonal ∇²_u L): the sandwich of
  :mod:`headgeom.geometry.mlp_sandwich` for MLP chains, with the loss's blocks declared,
  discovered (:mod:`headgeom.geometry.loss_discovery`) or from loss HVPs; else J_iᵀ for
  every sample and one loss HVP per column of J carrying every sample at once ("jacobian");
- row-wise head, coupled loss: per-sample Jacobians and the loss's diagonal blocks, declared
  (NT-Xent) or from k (or d) single-row HVPs per sample ("rows");
- batch-coupled head (train-mode BatchNorm): one H_eff matvec per basis vector e_{i,c} of the
  requested samples ("coupled-matvecs").

A mixin of :class:`headgeom.geometry.effective_hessian.EffectiveHessian` (it reads the
analysis's z, u, rho, head, loss, reading and chunk_size); every strategy is exact. Each
strategy returns ``(G blocks, M blocks, path)``; which path a query takes is the pure dispatch
decision :meth:`BlockStrategies.block_path`. A query assigns nothing to the object except the
caches of pure results named in ``QUERY_CACHES`` (the loss's checked or discovered curvature,
HVP closures, the measured precision, the operand scale).
"""
from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import Tensor
from torch.func import hessian, jacfwd, jacrev, vmap

from .loss_curvature import LowRankCurvature, coupled_blocks_for, curvature_for
from .loss_discovery import discover_curvature
from .mlp_sandwich import ChainProducts, block_costs, chain_products, is_linear_chain, sandwich_blocks, tail_width
from .mlp_structure import chain_pass
from .readings import loss_hvp
from .weighted_gram import symmetric_bmm

SANDWICH_MEMORY = 1 << 30  # bytes of (N, m, m) loss blocks the generic sandwich may hold
QUERY_CACHES = ("_curvature_cache", "_loss_curvature_cache", "_coupled_cache", "_hvp_closures", "_precision_cache",
                "_operand_scale_cache")
PARTS = {"H": (True, True), "G": (True, False), "M": (False, True)}
Rows = int | slice | Tensor | list | tuple | range | None


def _restricted_hvp(hvp: Callable[[Tensor], Tensor], like: Tensor, idx: Tensor) -> Callable[[Tensor], Tensor]:
    """w (b, k) ↦ rows idx of ∇²_u L [w on rows idx, 0 elsewhere]: for a block-diagonal ∇²_u L,
    the blocks [∇²L]_ii w_i of the samples idx alone."""
    def sub(w: Tensor) -> Tensor:
        return hvp(torch.zeros_like(like).index_copy(0, idx, w))[idx]
    return sub


class BlockStrategies:
    """blocks(), gauss_newton_blocks(), interaction_blocks(), decomposed_blocks(), block_path()."""

    def blocks(self, rows: Rows = None) -> Tensor:
        """(b, d, d) diagonal blocks of H_eff of the samples ``rows`` (None: all N, b = N; an int b:
        the first b; a slice or index tensor), batched over samples."""
        g, m, _ = self._blocks(True, True, merged=True, idx=self._rows_index(rows))
        return (g + m).detach()

    def gauss_newton_blocks(self, rows: Rows = None) -> Tensor:
        """(b, d, d) diagonal blocks of G of the samples ``rows`` (as in :meth:`blocks`)."""
        return self._blocks(True, False, idx=self._rows_index(rows))[0].detach()

    def interaction_blocks(self, rows: Rows = None) -> Tensor:
        """(b, d, d) diagonal blocks of M of the samples ``rows`` (as in :meth:`blocks`)."""
        return self._blocks(False, True, idx=self._rows_index(rows))[1].detach()

    def decomposed_blocks(self, rows: Rows = None) -> tuple[Tensor, Tensor, Tensor]:
        """(H_eff, G, M) diagonal blocks from one pass, each (b, d, d), of the samples ``rows``."""
        g, m, _ = self._blocks(True, True, idx=self._rows_index(rows))
        g, m = g.detach(), m.detach()
        return g + m, g, m

    def block_path(self, part: str = "H") -> str:
        """The path a block query of ``part`` takes: "H" (blocks, decomposed_blocks), "G"
        (gauss_newton_blocks) or "M" (interaction_blocks); the same for every ``rows``.

        "sandwich+<how>" / "jacobian[+<how>]" (row-wise head, separable loss; <how> is where the
        loss's blocks come from: declared-curvature, discovered-curvature or hvp), "rows[+...]"
        (row-wise head, coupled loss), "coupled-matvecs" (a head that couples samples).
        The dispatch decision only: it may compute the cached loss curvature, nothing else."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {sorted(PARTS)}; got {part!r}")
        return self._plan(*PARTS[part])[0]

    # ------------------------------------------------------------------ dispatch
    def _plan(self, want_g: bool, want_m: bool) -> tuple[str, bool, LowRankCurvature | None]:
        """(path, sandwich?, the loss's low-rank blocks or None) of a query."""
        if not self.row_wise_head:
            return "coupled-matvecs", False, None
        if self.separable_loss:
            sandwich, curv = self._use_sandwich(want_g)
            if sandwich:
                return "sandwich+" + (self._loss_curvature()[1] if curv is not None else "hvp"), True, curv
            if want_g:
                curv, how = self._loss_curvature()
                return ("jacobian+" + how if curv is not None else "jacobian"), False, curv
            return "jacobian", False, None
        if want_g and self._declared_coupled_blocks() is not None:
            return "rows+declared-coupled-blocks", False, None
        return ("rows+hvp" if want_g else "rows"), False, None

    def _rows_index(self, rows: Rows) -> Tensor | None:
        """rows as distinct sample indices (None: all samples)."""
        if rows is None:
            return None
        n = self.n
        if isinstance(rows, bool):
            raise ValueError(f"rows must be None, an int b (the first b samples), a slice or indices; got {rows!r}")
        if isinstance(rows, int):
            if not 1 <= rows <= n:
                raise ValueError(f"rows = b must satisfy 1 <= b <= N = {n} (the first b samples); got {rows}")
            return torch.arange(rows, device=self.z.device)
        if isinstance(rows, slice):
            idx = torch.arange(n, device=self.z.device)[rows]
        else:
            idx = torch.as_tensor(rows, device=self.z.device)
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

    def _blocks(self, want_g: bool, want_m: bool, merged: bool = False,
                idx: Tensor | None = None) -> tuple[Tensor | None, Tensor | None, str]:
        """(G, M, path) of the samples idx (None: all); with ``merged`` only G + M is meaningful."""
        path, sandwich, curv = self._plan(want_g, want_m)
        if not self.row_wise_head:
            g, m = self._coupled_blocks(want_g, want_m, idx)
        elif self.separable_loss:
            g, m = self._separable_blocks(want_g, want_m, merged, sandwich, curv, idx)
        else:
            gs, ms = [], []
            for chunk in self._row_chunks(idx):
                jt, m = self._row_jacobian(chunk, want_m)
                if want_g:
                    gs.append(self._gauss_newton_rows(chunk, jt))
                if want_m:
                    ms.append(m)
            g, m = (torch.cat(gs) if want_g else None), (torch.cat(ms) if want_m else None)
        return g, m, path

    def _row_chunks(self, idx: Tensor | None = None) -> Iterator[Tensor]:
        """Index tensors of consecutive chunks of at most ``chunk_size`` of the samples idx (None: all)."""
        if idx is None:
            idx = torch.arange(self.n, device=self.z.device)
        for start in range(0, idx.numel(), self.chunk_size):
            yield idx[start:start + self.chunk_size]

    def _chain_products(self) -> ChainProducts:
        """The verified chain's shared products, kept with the prepared head (its facts live as long
        as the cached analysis copy, which is handed out again only while the weights are unchanged)."""
        facts = self.head.facts
        if facts.get("chain_products") is None:
            facts["chain_products"] = chain_products(self._layers, self.d, self.z)
        return facts["chain_products"]

    def _use_sandwich(self, want_g: bool):
        """(True, declared curvature or None) when the sandwich path of mlp_sandwich runs."""
        if self._layers is None or not is_linear_chain(self._layers) or self.block_strategy == "jacobian":
            return False, None
        curv = self._loss_curvature()[0] if want_g else None
        if self.block_strategy == "sandwich" or not want_g:
            return True, curv
        costs = block_costs(self._layers, self.d, self.k, curv is not None,
                            diagonal=curv is not None and curv.diag is not None)
        ours, theirs = costs["sandwich"], costs["jacobian"]
        m = tail_width(self._layers, self.k)
        fits = curv is not None or self.n * m * m * self.z.element_size() <= SANDWICH_MEMORY
        return ours <= theirs and fits, curv

    # ------------------------------------------------------------------ strategies
    def _separable_blocks(self, want_g: bool, want_m: bool, merged: bool, sandwich: bool,
                          curv: LowRankCurvature | None, idx: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
        """Row-wise head and block-diagonal loss Hessian: J_iᵀ for the samples, then one loss
        HVP per column of J carries every sample at once: G_i = J_iᵀ [∇²_u L]_ii J_i."""
        d, k = self.d, self.k
        hvp = loss_hvp(self.loss, self.u, self.reading)
        if idx is not None:  # the requested samples' loss blocks alone (∇²_u L is block-diagonal)
            hvp = _restricted_hvp(hvp, self.u, idx)
            curv = None if curv is None else curv.rows(idx)
        if sandwich:
            z, rho = (self.z, self.rho) if idx is None else (self.z[idx], self.rho[idx])
            return sandwich_blocks(self._layers, z, rho, curv, hvp, want_g, want_m, self.chunk_size, merged=merged,
                                   products=self._chain_products())
        n = self.n if idx is None else idx.numel()
        jt_all = torch.empty(n, d, k, dtype=self.z.dtype, device=self.z.device) if want_g else None
        ms = []
        for start, chunk in zip(range(0, n, self.chunk_size), self._row_chunks(idx)):
            jt, m = self._row_jacobian(chunk, want_m)
            if want_g:
                jt_all[start:start + chunk.numel()] = jt
            if want_m:
                ms.append(m)
        g = None
        if want_g:
            hjt = torch.empty_like(jt_all)  # [∇²L]_ii J_i, transposed like J
            if curv is not None:  # declared or discovered blocks: α_i J_iᵀ (+ J_iᵀ diag δ_i) + J_iᵀ U_i B_i U_iᵀ, no HVPs
                for start in range(0, n, self.chunk_size):
                    rows = slice(start, min(start + self.chunk_size, n))
                    c, jt = curv.rows(rows), jt_all[rows]
                    hjt[rows] = c.alpha[:, None, None] * jt
                    if c.diag is not None:  # a declared diagonal (DINO): J_iᵀ diag(δ_i)
                        hjt[rows] += jt * c.diag[:, None, :]
                    if c.U is not None:
                        hjt[rows] += (jt @ c.U) @ c.B.transpose(1, 2) @ c.U.transpose(1, 2)
            else:
                step = max(1, min(d, (1 << 21) // max(1, self.n * k)))  # ~16 MB of tangents: cache-sized chunks
                for c0 in range(0, d, step):
                    cols = slice(c0, min(c0 + step, d))
                    hjt[:, cols, :] = vmap(hvp)(jt_all[:, cols, :].transpose(0, 1)).transpose(0, 1)
            g = torch.empty(n, d, d, dtype=self.z.dtype, device=self.z.device)
            for start in range(0, n, self.chunk_size):
                rows = slice(start, min(start + self.chunk_size, n))
                symmetric_bmm(jt_all[rows].detach(), hjt[rows].detach(), g[rows])  # J_iᵀ (H_i J_i)
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

    def _gauss_newton_rows(self, idx: Tensor, jt: Tensor) -> Tensor:
        """G_i = J_iᵀ [∇²_u L]_ii J_i for the samples idx of a coupled loss, from its declared
        diagonal blocks or single-row HVPs."""
        hvp = loss_hvp(self.loss, self.u, self.reading)
        s = idx.numel()
        if (declared := self._declared_coupled_blocks()) is not None:
            # a coupled loss that declares its diagonal blocks (NT-Xent): no loss HVPs at all
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

    def _coupled_blocks(self, want_g: bool, want_m: bool,
                        idx: Tensor | None = None) -> tuple[Tensor | None, Tensor | None]:
        """Diagonal blocks of the samples idx (None: all) when the head couples samples
        (train-mode BatchNorm): one matvec of the whole batch per basis vector e_{i,c}, i in idx,
        keeping block i of the result (column c of A_ii = (A e_{i,c})_i)."""
        idx = torch.arange(self.n, device=self.z.device) if idx is None else idx
        b, d = idx.numel(), self.d
        kw = dict(dtype=self.z.dtype, device=self.z.device)
        step = max(1, 4 * self.chunk_size)

        def block_of(matvec: Callable[[Tensor], Tensor]) -> Tensor:
            flat = torch.empty(b * d, d, **kw)
            for j0 in range(0, b * d, step):
                j = torch.arange(j0, min(j0 + step, b * d), device=self.z.device)
                rows, cols = idx[torch.div(j, d, rounding_mode="floor")], j % d
                basis = torch.zeros(j.numel(), self.n, d, **kw)
                basis[torch.arange(j.numel()), rows, cols] = 1.0
                flat[j] = vmap(matvec)(basis)[torch.arange(j.numel()), rows].detach()
            return flat.reshape(b, d, d).transpose(1, 2).contiguous()  # (b, d, d)

        g = block_of(self.gauss_newton_matvec) if want_g else None
        m = block_of(self.interaction_matvec) if want_m else None
        return g, m

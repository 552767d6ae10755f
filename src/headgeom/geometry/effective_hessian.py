"""The effective Hessian H_eff = G + M of an SSL loss with respect to the representation z.

    H_eff = ∇²_z L(h(z)) = J_hᵀ ∇²_u L J_h  +  Σ_i ρ_i ∇²_z h_i,      ρ = ∇_u L
                           \\___ G ______/     \\______ M ________/

(docs/paper.md §1.) z is a batch (N, d) flattened row-major, so H_eff is (N·d, N·d) and its
diagonal blocks are the per-sample (d, d) blocks. Whatever the loss closes over (targets,
stop-gradient views, centres) is a constant; the loss's reduction is kept as given (headgeom's
objectives average over the batch, so each per-sample block carries a factor 1/N).

M is computed from the head's second derivatives contracted with ρ, never as H_eff − G, so
that H_eff = G + M is a check rather than a definition.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

from .head_function import HeadFn, PreparedHead, is_row_wise, prepare_head
from .loss_curvature import coupled_blocks_for, curvature_for
from .mlp_sandwich import block_costs, is_linear_chain, sandwich_blocks, tail_width
from .mlp_structure import chain_pass, flatten_layers, fuse_affine_runs
from .readings import READINGS, Loss, check_reading, loss_hvp

DEFAULT_MAX_DENSE = 6144
BLOCK_STRATEGIES = ("auto", "sandwich", "jacobian")
SANDWICH_MEMORY = 1 << 30  # bytes of (N, m, m) loss blocks the generic sandwich may hold


def _check_finite(name: str, t: Tensor, hint: str) -> None:
    if not torch.isfinite(t).all():
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{name} has {bad} non-finite entries (NaN or Inf) of {t.numel()}; {hint}")


def _jvp_or_double_vjp(fn: Callable[[Tensor], Tensor], x: Tensor, v: Tensor) -> Tensor:
    """J v by forward mode, falling back to reverse-over-reverse where forward AD is missing."""
    try:
        return jvp(fn, (x,), (v,))[1]
    except (NotImplementedError, RuntimeError):
        y, pull = vjp(fn, x)
        _, pull2 = vjp(lambda w: pull(w)[0], torch.zeros_like(y))
        return pull2(v)[0]


@dataclass(eq=False, repr=False)
class EffectiveHessian:
    """Exact H_eff, G and M of ``loss ∘ head`` at ``z``; build it with :func:`effective_hessian`."""

    head: PreparedHead
    loss: Loss
    z: Tensor  # (N, d) in the analysis dtype
    reading: str
    max_dense: int
    u: Tensor = field(init=False)  # (N, k)
    rho: Tensor = field(init=False)  # (N, k), ∇_u L
    row_wise_head: bool = field(init=False)
    separable_loss: bool = field(init=False)
    chunk_size: int = 32
    block_strategy: str = "auto"
    last_block_path: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        fn = self.head.fn
        self.u = fn(self.z).detach()
        if self.u.ndim != 2 or self.u.shape[0] != self.z.shape[0]:
            raise ValueError(
                f"the head must map (N, d) to (N, k); it mapped {tuple(self.z.shape)} to {tuple(self.u.shape)}"
            )
        _check_finite("the head output u = h(z)", self.u, "check z and the head's weights")
        value = self.loss(self.u)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ValueError("the loss must map the head output (N, k) to a scalar tensor")
        self.rho = grad(self.loss)(self.u).detach()
        _check_finite("the residual gradient rho = dL/du", self.rho, "the loss is not differentiable here")
        self.row_wise_head = (not self.head.train_mode_batchnorm) and is_row_wise(fn, self.z)
        self.separable_loss = self._probe_separable()
        self._layers = None
        if self.row_wise_head and self.head.module is not None:
            layers = flatten_layers(self.head.module)
            if layers is not None:
                layers = fuse_affine_runs(layers)
                probe = chain_pass(layers, self.z[: min(4, self.n)], None).u
                if torch.allclose(probe, self.u[: probe.shape[0]], rtol=1e-9, atol=1e-12):
                    self._layers = layers

    # ------------------------------------------------------------------ sizes and facts
    @property
    def n(self) -> int:
        return self.z.shape[0]

    @property
    def d(self) -> int:
        return self.z.shape[1]

    @property
    def k(self) -> int:
        return self.u.shape[1]

    @property
    def dim(self) -> int:
        return self.n * self.d

    @property
    def structured(self) -> bool:
        """True when blocks use the layer-structured MLP path (else the generic torch.func one)."""
        return self._layers is not None

    @property
    def structured_layers(self) -> list[nn.Module] | None:
        """The (affine-folded) layer chain the structured block path runs on, or None."""
        return self._layers

    def info(self) -> dict:
        """What was computed and how: recorded in every output."""
        return {
            "N": self.n, "d": self.d, "k": self.k, "dtype": str(self.z.dtype).replace("torch.", ""),
            "reading": self.reading, "reading_definition": READINGS[self.reading],
            "reduction": "as the loss defines it (headgeom objectives: mean over the batch, so blocks carry 1/N)",
            "row_wise_head": self.row_wise_head, "separable_loss": self.separable_loss,
            "block_path": "structured-mlp" if self.structured else "generic-torch.func",
            "block_strategy": self.block_strategy, "last_block_path": self.last_block_path,
            "train_mode_batchnorm": self.head.train_mode_batchnorm,
        }

    def _probe_separable(self) -> bool:
        if self.n < 2:
            return True
        w = torch.zeros_like(self.u)
        w[0] = torch.linspace(1.0, 2.0, self.k, dtype=self.u.dtype, device=self.u.device)
        hw = loss_hvp(self.loss, self.u, self.reading)(w)
        return bool((hw[1:] == 0).all())

    # ------------------------------------------------------------------ operator path
    def _full(self, zf: Tensor) -> Tensor:
        return self.loss(self.head.fn(zf.reshape(self.n, self.d)))

    def _contracted(self, zf: Tensor) -> Tensor:
        """⟨sg(ρ), h(z)⟩: its Hessian in z is M."""
        return (self.rho * self.head.fn(zf.reshape(self.n, self.d))).sum()

    def _as_flat(self, v: Tensor) -> tuple[Tensor, tuple[int, ...]]:
        if v.shape not in ((self.dim,), (self.n, self.d)):
            raise ValueError(
                f"v must have shape ({self.dim},) or ({self.n}, {self.d}); got {tuple(v.shape)}"
            )
        return v.reshape(-1).to(self.z.dtype), tuple(v.shape)

    def _hvp(self, f: Callable[[Tensor], Tensor], v: Tensor) -> Tensor:
        x = self.z.reshape(-1)
        return _jvp_or_double_vjp(grad(f), x, v)

    def interaction_matvec(self, v: Tensor) -> Tensor:
        """M v, with M = Σ_i ρ_i ∇²_z h_i (ρ held constant)."""
        flat, shape = self._as_flat(v)
        return self._hvp(self._contracted, flat).reshape(shape)

    def gauss_newton_matvec(self, v: Tensor) -> Tensor:
        """G v = Jᵀ ∇²_u L (J v) under the chosen reading."""
        flat, shape = self._as_flat(v)
        h = lambda zf: self.head.fn(zf.reshape(self.n, self.d))  # noqa: E731
        x = self.z.reshape(-1)
        jv = _jvp_or_double_vjp(h, x, flat)
        hjv = loss_hvp(self.loss, self.u, self.reading)(jv)
        return vjp(h, x)[1](hjv)[0].reshape(shape)

    def matvec(self, v: Tensor) -> Tensor:
        """H_eff v for v of shape (N·d,) or (N, d); forward-over-reverse, never dense."""
        if self.reading == "ambient":
            flat, shape = self._as_flat(v)
            return self._hvp(self._full, flat).reshape(shape)
        return self.gauss_newton_matvec(v) + self.interaction_matvec(v)

    def operator(self, part: str = "H"):
        """H_eff ("H"), G ("G") or M ("M") as a SymmetricOperator (see ``.to_scipy()``)."""
        from .operators import SymmetricOperator

        mv = {"H": self.matvec, "G": self.gauss_newton_matvec, "M": self.interaction_matvec}
        if part not in mv:
            raise ValueError(f"part must be one of 'H', 'G', 'M'; got {part!r}")
        return SymmetricOperator(mv[part], self.dim, self.z.dtype, self.z.device)

    def to_scipy(self, part: str = "H"):
        """A scipy.sparse.linalg.LinearOperator for H_eff, G or M (float64 numpy vectors)."""
        return self.operator(part).to_scipy()

    # ------------------------------------------------------------------ dense path
    def _check_dense(self, what: str) -> None:
        if self.dim > self.max_dense:
            raise ValueError(
                f"{what}: the dense matrix would be {self.dim}x{self.dim} (N*d = {self.n}*{self.d}), "
                f"above max_dense={self.max_dense}; use .blocks() for per-sample blocks or "
                ".matvec()/.operator() for the whole operator, or raise max_dense"
            )

    def dense(self) -> Tensor:
        """(N·d, N·d) H_eff."""
        self._check_dense("dense()")
        if self.reading == "ambient":
            return self._dense_hessian(self._full)
        return self.gauss_newton() + self.interaction()

    def gauss_newton(self) -> Tensor:
        """(N·d, N·d) G = Jᵀ ∇²_u L J under the chosen reading."""
        self._check_dense("gauss_newton()")
        h = lambda zf: self.head.fn(zf.reshape(self.n, self.d)).reshape(-1)  # noqa: E731
        x = self.z.reshape(-1)
        try:
            jac = jacfwd(h)(x)
        except (NotImplementedError, RuntimeError):
            jac = jacrev(h)(x)
        hvp = loss_hvp(self.loss, self.u, self.reading)
        cols = jac.T.reshape(self.dim, self.n, self.k)  # column c of J as an (N, k) tangent
        hj = vmap(hvp, chunk_size=max(1, 4 * self.chunk_size))(cols).reshape(self.dim, -1)
        return jac.T @ hj.T

    def interaction(self) -> Tensor:
        """(N·d, N·d) M = Σ_i ρ_i ∇²_z h_i, from the head's second derivatives."""
        self._check_dense("interaction()")
        return self._dense_hessian(self._contracted)

    def _dense_hessian(self, f: Callable[[Tensor], Tensor]) -> Tensor:
        """Dense Hessian of a scalar function of flat z: forward-over-reverse, else reverse-over-reverse."""
        x = self.z.reshape(-1)
        try:
            return hessian(f)(x)
        except (NotImplementedError, RuntimeError):
            return jacrev(jacrev(f))(x)

    # ------------------------------------------------------------------ block path
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
        curv = curvature_for(self.loss, self.u, self.reading) if want_g else None
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
            self.last_block_path = "sandwich" + ("+declared-curvature" if curv is not None else "+hvp")
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
            hvp = loss_hvp(self.loss, self.u, self.reading)
            hjt = torch.empty_like(jt_all)  # [∇²L]_ii J_i, transposed like J
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


def effective_hessian(
    head: nn.Module | HeadFn,
    loss: Loss,
    z: Tensor,
    *,
    reading: str = "ambient",
    dtype: torch.dtype | None = torch.float64,
    max_dense: int = DEFAULT_MAX_DENSE,
    chunk_size: int = 32,
    block_strategy: str = "auto",
) -> EffectiveHessian:
    """Exact effective Hessian of ``loss ∘ head`` with respect to the representation ``z``.

    Args:
        head: any nn.Module or callable mapping (N, d) to (N, k). Modules are analysed on a
            copy in ``dtype``; their train/eval mode is respected and never changed.
        loss: callable mapping the head output (N, k) to a scalar; what it closes over is a
            constant.
        z: (N, d) representation batch.
        reading: loss-Hessian reading for G: "ambient", "tangential" or "mse" (see
            :mod:`headgeom.geometry.readings`).
        dtype: analysis dtype (float64 by default; float32 is allowed and recorded; None keeps z's).
        max_dense: largest N·d for which ``dense()``, ``gauss_newton()`` and ``interaction()``
            build a matrix.
        chunk_size: samples per chunk in the block path (memory vs speed).
        block_strategy: for MLP heads under separable losses, "sandwich" (blocks formed at the
            last activation's width, :mod:`headgeom.geometry.mlp_sandwich`), "jacobian" (J
            propagated to the output, :mod:`headgeom.geometry.mlp_structure`) or "auto" (the
            cheaper by a FLOP count). Every strategy is exact; the one used is in ``info()``.
    """
    check_reading(reading)
    if not isinstance(z, Tensor) or z.ndim != 2:
        raise ValueError(f"z must be a tensor of shape (N, d); got {getattr(z, 'shape', type(z))}")
    if z.shape[0] < 1 or z.shape[1] < 1:
        raise ValueError(f"z must have at least one sample and one feature; got shape {tuple(z.shape)}")
    dtype = z.dtype if dtype is None else dtype
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype; got {dtype}")
    z = z.detach().to(dtype)
    _check_finite("z", z, "the representation batch must be finite")
    prepared = prepare_head(head, dtype, z.device)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    if block_strategy not in BLOCK_STRATEGIES:
        raise ValueError(f"block_strategy must be one of {BLOCK_STRATEGIES}; got {block_strategy!r}")
    return EffectiveHessian(prepared, loss, z, reading, max_dense, chunk_size=chunk_size,
                            block_strategy=block_strategy)

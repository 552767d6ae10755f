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
from torch.func import grad_and_value, hessian, jacfwd, jacrev, jvp, vjp, vmap

from headgeom.objectives.declared import AnalysisLoss, as_analysis_loss

from .block_strategies import BlockStrategies
from .discovery import Discovery, discover
from .head_function import HeadFn, PreparedHead, is_row_wise, prepare_head
from .loss_curvature import curvature_for
from .loss_discovery import is_block_diagonal
from .mlp_sandwich import chain_output
from .mlp_structure import fuse_affine_runs
from .operand_scale import OperandScale, low_rank_norms, operand_scale, power_norms
from .operators import SymmetricOperator
from .precision import measured_error
from .readings import READINGS, Loss, check_reading, hvp_fn, loss_hvp

DEFAULT_MAX_DENSE = 6144
BLOCK_STRATEGIES = ("auto", "sandwich", "jacobian")


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
class EffectiveHessian(BlockStrategies):
    """Exact H_eff, G and M of ``loss ∘ head`` at ``z``; build it with :func:`effective_hessian`."""

    head: PreparedHead
    loss: AnalysisLoss  # a plain callable is wrapped by effective_hessian (nothing declared)
    z: Tensor  # (N, d) in the analysis dtype
    reading: str
    max_dense: int
    u: Tensor = field(init=False)  # (N, k)
    rho: Tensor = field(init=False)  # (N, k), ∇_u L
    row_wise_head: bool = field(init=False)
    discovered_by: str = field(init=False)  # "sequential", "traced" or "generic (<reason>)"
    separable_loss: bool = field(init=False)
    chunk_size: int = 32
    block_strategy: str = "auto"
    discover_structure: bool = True
    source: tuple | None = None  # (head, z) as given: the float64 reference of a float32 analysis

    def __post_init__(self) -> None:
        fn = self.head.fn
        self.u = fn(self.z).detach()
        if self.u.ndim != 2 or self.u.shape[0] != self.z.shape[0]:
            raise ValueError(
                f"the head must map (N, d) to (N, k); it mapped {tuple(self.z.shape)} to {tuple(self.u.shape)}"
            )
        _check_finite("the head output u = h(z)", self.u, "check z and the head's weights")
        rho, value = grad_and_value(self._scalar_loss)(self.u)
        self.rho = rho.detach()
        _check_finite("the residual gradient rho = dL/du", self.rho, "the loss is not differentiable here")
        self._layers = self._verified_chain()
        # a verified chain of Linear / eval-BatchNorm / element-wise layers is row-wise by construction
        self.row_wise_head = self._layers is not None or (
            not self.head.train_mode_batchnorm and is_row_wise(fn, self.z))
        self.separable_loss = self._probe_separable()

    def _scalar_loss(self, u: Tensor) -> Tensor:
        value = self.loss(u)
        if not isinstance(value, Tensor) or value.numel() != 1:
            raise ValueError("the loss must map the head output (N, k) to a scalar tensor")
        return value.reshape(())

    def _verified_chain(self) -> list[nn.Module] | None:
        """The head's affine-folded layer chain when it reproduces u on the first rows, else None.

        Discovery (:mod:`headgeom.geometry.discovery`) and folding are per head (kept in the prepared
        head's facts, which live as long as the cached analysis copy; a traced chain per input shape,
        as a forward may read it); the check against u is per call and needs no Jacobian. How the
        chain was found, or why there is none, is ``self.discovered_by`` (in ``info()``).
        """
        module = self.head.module
        if module is None:
            self.discovered_by = "generic (a callable, not an nn.Module)"
            return None
        if self.head.train_mode_batchnorm:
            self.discovered_by = "generic (BatchNorm in train mode couples the samples)"
            return None
        facts = self.head.facts
        shape_key = ("discovery", tuple(self.z.shape))
        found = facts.get("discovery") or facts.get(shape_key)
        if found is None:
            raw = discover(module, tuple(self.z.shape))
            found = raw if raw.layers is None else Discovery(fuse_affine_runs(raw.layers), raw.how)
            facts["discovery" if found.how == "sequential" else shape_key] = found
        self.discovered_by = found.describe()
        layers = found.layers
        if layers is None:
            return None
        rows = min(4, self.n)
        with torch.no_grad():  # the values alone (the derivatives' autograd passes were half a small call)
            probe = chain_output(layers, self.z[:rows])
        # folding reassociates products: allow the dtype's rounding (1e-9 in float64, ~1e-3 in float32)
        rtol = max(1e-9, 1e4 * torch.finfo(self.z.dtype).eps)
        atol = rtol * float(self.u[:rows].abs().max()) + 1e-12
        if probe.shape == self.u[:rows].shape and torch.allclose(probe, self.u[:rows], rtol=rtol, atol=atol):
            return layers
        self.discovered_by = f"generic (the {found.how} chain does not reproduce the head's output on the first rows)"
        return None

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
            "discovered_by": self.discovered_by,
            "block_strategy": self.block_strategy, "blocks_path": self.block_path("H"),
            "train_mode_batchnorm": self.head.train_mode_batchnorm,
            **({"precision": self._precision()} if self.z.dtype != torch.float64 else {}),
        }

    def _precision(self) -> dict:
        """The measured error against float64 (headgeom.geometry.precision), once."""
        if not hasattr(self, "_precision_cache"):
            if self.source is None:
                self._precision_cache = {"measured": False, "why": "built without effective_hessian()"}
            else:
                head, z = self.source
                self._precision_cache = measured_error(self, lambda: effective_hessian(
                    head, self.loss, z, reading=self.reading, dtype=torch.float64, max_dense=self.max_dense,
                    chunk_size=self.chunk_size, block_strategy=self.block_strategy,
                    discover_structure=self.discover_structure))
        return self._precision_cache

    def operand_scale(self) -> OperandScale:
        """S = 1.1 · max_i ‖A_i‖₂ ‖J_i‖₂² (A_i the ambient loss-Hessian block, J_i the head Jacobian),
        the operand-relative reference of the sign floor (:mod:`headgeom.geometry.operand_scale`), once.

        ‖J_i‖₂ by batched power steps (a head that couples samples: of the whole J, an upper bound);
        ‖A_i‖₂ exactly from a declared low-rank form, else by power steps on the ambient loss HVP,
        per sample for a separable loss, of the whole loss Hessian otherwise (an upper bound)."""
        if not hasattr(self, "_operand_scale_cache"):
            gen = torch.Generator(device="cpu").manual_seed(0)
            fn, z = self.head.fn, self.z
            _, pull = vjp(fn, z)
            jac = power_norms(lambda v: pull(_jvp_or_double_vjp(fn, z, v))[0],
                              torch.randn(z.shape, generator=gen, dtype=z.dtype).to(z.device),
                              per_row=self.row_wise_head)
            j_how = ("power steps on J_i^T J_i, every sample at once" if self.row_wise_head else
                     "power steps on the whole J^T J (the head couples samples): an upper bound of every |J_i|")
            curv = curvature_for(self.loss, self.u, "ambient") if self.separable_loss else None
            if curv is not None:
                a, a_how, a_steps, a_ok = low_rank_norms(curv, self.k), "exact from the declared low-rank form", 0, True
            else:
                pn = power_norms(loss_hvp(self.loss, self.u, "ambient"),
                                 torch.randn(self.u.shape, generator=gen, dtype=self.u.dtype).to(self.u.device),
                                 per_row=self.separable_loss)
                a, a_steps, a_ok = pn.values, pn.steps, pn.converged
                a_how = ("power steps on the loss HVP, every sample at once" if self.separable_loss else
                         "power steps on the whole loss Hessian (the loss couples samples): an upper bound")
            self._operand_scale_cache = operand_scale(jac, a, a_how, j_how, a_steps, a_ok)
        return self._operand_scale_cache

    def _probe_separable(self) -> bool:
        """Whether ∇²_u L is block-diagonal over samples (no row's tangent leaks to another row)."""
        if self.n < 2:
            return True
        if self.loss.hessian_structure is not None:
            # a declared block-diagonal form is checked against the exact HVP of a random tangent
            # on every row (curvature_for raises on a mismatch): that check is the probe too
            self._declared_curvature()
            return True
        # ⌈log₂ N⌉ batched probes separate every pair of rows (headgeom.geometry.loss_discovery)
        return is_block_diagonal(loss_hvp(self.loss, self.u, self.reading), self.u)

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
        """∇²f(z) v for f = _full or _contracted, through readings.hvp_fn (one closure per f,
        so that a fallback to reverse mode is found once, not on every matvec)."""
        cache = self.__dict__.setdefault("_hvp_closures", {})
        if f.__name__ not in cache:
            cache[f.__name__] = hvp_fn(f, self.z.reshape(-1))
        return cache[f.__name__](v)

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


def effective_hessian(
    head: nn.Module | HeadFn,
    loss: AnalysisLoss | Loss,
    z: Tensor,
    *,
    reading: str = "ambient",
    dtype: torch.dtype | None = torch.float64,
    max_dense: int = DEFAULT_MAX_DENSE,
    chunk_size: int = 32,
    block_strategy: str = "auto",
    discover_structure: bool = True,
) -> EffectiveHessian:
    """Exact effective Hessian of ``loss ∘ head`` with respect to the representation ``z``.

    Args:
        head: any nn.Module or callable mapping (N, d) to (N, k). Modules are analysed on a
            copy in ``dtype``; their train/eval mode is respected and never changed.
        loss: callable mapping the head output (N, k) to a scalar; what it closes over is a
            constant. An :class:`headgeom.objectives.AnalysisLoss` may declare closed forms of
            its Hessian (checked against exact HVPs before use); a plain callable declares none.
        z: (N, d) representation batch.
        reading: loss-Hessian reading for G: "ambient" or "tangential" (see
            :mod:`headgeom.geometry.readings`).
        dtype: analysis dtype: float64 by default (on every device); float32 is faster (on a GPU much
            faster), and its error against float64, measured on the same problem, is reported in
            ``info()["precision"]`` (:mod:`headgeom.geometry.precision`); None keeps z's dtype.
        max_dense: largest N·d for which ``dense()``, ``gauss_newton()`` and ``interaction()``
            build a matrix.
        chunk_size: samples per chunk in the block path (memory vs speed).
        block_strategy: for MLP heads under separable losses, "sandwich" (blocks formed at the
            last activation's width, :mod:`headgeom.geometry.mlp_sandwich`), "jacobian" (J
            propagated to the output, :mod:`headgeom.geometry.mlp_structure`) or "auto" (the
            cheaper by a FLOP count). Every strategy is exact; the one used is in ``info()``.
        discover_structure: for a separable loss that declares no Hessian form, find its
            per-sample blocks as a scaled identity plus low rank from a few batched HVPs and
            verify them exactly (:mod:`headgeom.geometry.loss_discovery`) so that the sandwich
            needs no further loss HVPs; False keeps one loss HVP per sandwich column (the
            result is the same to round-off either way).
    """
    check_reading(reading)
    loss = as_analysis_loss(loss)  # a plain callable declares nothing
    if not isinstance(z, Tensor) or z.ndim != 2:
        raise ValueError(f"z must be a tensor of shape (N, d); got {getattr(z, 'shape', type(z))}")
    if z.shape[0] < 1 or z.shape[1] < 1:
        raise ValueError(f"z must have at least one sample and one feature; got shape {tuple(z.shape)}")
    dtype = z.dtype if dtype is None else dtype
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype; got {dtype}")
    given = z.detach()
    z = given.to(dtype)
    _check_finite("z", z, "the representation batch must be finite")
    prepared = prepare_head(head, dtype, z.device)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    if block_strategy not in BLOCK_STRATEGIES:
        raise ValueError(f"block_strategy must be one of {BLOCK_STRATEGIES}; got {block_strategy!r}")
    return EffectiveHessian(prepared, loss, z, reading, max_dense, chunk_size=chunk_size,
                            block_strategy=block_strategy, discover_structure=discover_structure,
                            source=(head, given))

"""The effective Hessian H_eff = G + M of an SSL loss with respect to the representation z.

    H_eff = ∇²_z L(h(z)) = J_hᵀ ∇²_u L J_h  +  Σ_i ρ_i ∇²_z h_i,      ρ = ∇_u L
                           \\___ G ______/     \\______ M ________/

(docs/paper.md §1.) z is a batch (N, d) flattened row-major, so H_eff is (N·d, N·d) and its
diagonal blocks are the per-sample (d, d) blocks. Whatever the loss closes over (targets,
stop-gradient views, centres) is a constant; the loss's reduction is kept as given (headgeom's
objectives average over the batch, so each per-sample block carries a factor 1/N).

M is computed from the head's second derivatives contracted with ρ, never as H_eff − G, so
that H_eff = G + M is a check rather than a definition.

Shape: :func:`effective_hessian` prepares the head (an analysis copy, reused through a
:class:`~headgeom.geometry.engine.head_cache.HeadCache` when the caller passes one) and measures the
facts (:mod:`headgeom.geometry.engine.analysis_facts`); an :class:`EffectiveHessian` holds them, frozen,
and answers queries through the strategies: per-sample blocks (:mod:`headgeom.geometry.engine.block_dispatch`,
:mod:`headgeom.geometry.engine.block_strategies`), matvecs and dense matrices
(:mod:`headgeom.geometry.engine.operator_path`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor, nn

from headgeom.objectives.declared import AnalysisLoss, as_analysis_loss

from . import operator_path
from .analysis_facts import AnalysisFacts, Settings, check_finite, measure_facts
from .block_dispatch import PARTS, Rows, block_path, compute_blocks, rows_index
from .head_cache import HeadCache
from .head_function import HeadFn, prepare_head
from .operand_scale import OperandScale
from ..linalg.operators import SymmetricOperator
from .precision import measured_error
from .readings import READINGS, Loss, check_reading

DEFAULT_MAX_DENSE = 6144
BLOCK_STRATEGIES = ("auto", "sandwich", "jacobian")
LAZY_RESULTS = ("precision",)  # what a query may add to an EffectiveHessian (its facts: analysis_facts.LAZY_FACTS)


def _fact(name: str, doc: str) -> property:
    return property(lambda self: getattr(self.facts, name), doc=f"{doc} (a measured fact)")


def _setting(name: str) -> property:
    return property(lambda self: getattr(self.facts.settings, name), doc=f"the analysis's {name} setting")


@dataclass(frozen=True, eq=False, repr=False)
class EffectiveHessian:
    """Exact H_eff, G and M of ``loss ∘ head`` at ``z``; build it with :func:`effective_hessian`."""

    facts: AnalysisFacts
    source: tuple | None = None  # (head, z) as given: the float64 reference of a float32 analysis

    # ------------------------------------------------------------------ facts and sizes
    head = _fact("head", "the analysis copy of the head (a PreparedHead)")
    loss = _fact("loss", "the AnalysisLoss (a plain callable is wrapped: nothing declared)")
    z = _fact("z", "(N, d) in the analysis dtype")
    u = _fact("u", "(N, k) = h(z)")
    rho = _fact("rho", "(N, k) = ∇_u L")
    row_wise_head = _fact("row_wise_head", "output row i depends on input row i alone")
    separable_loss = _fact("separable_loss", "∇²_u L is block-diagonal over samples")
    discovered_by = _fact("discovered_by", '"sequential", "traced" or "generic (<reason>)"')
    n = _fact("n", "samples")
    d = _fact("d", "representation width")
    k = _fact("k", "head output width")
    dim = _fact("dim", "N·d")
    reading = _setting("reading")
    max_dense = _setting("max_dense")
    chunk_size = _setting("chunk_size")
    block_strategy = _setting("block_strategy")
    discover_structure = _setting("discover_structure")

    @property
    def structured(self) -> bool:
        """True when blocks use the layer-structured MLP path (else the generic torch.func one)."""
        return self.facts.layers is not None

    @property
    def structured_layers(self) -> list[nn.Module] | None:
        """The (affine-folded) layer chain the structured block path runs on, or None."""
        return self.facts.layers

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
            **({"precision": self.precision} if self.z.dtype != torch.float64 else {}),
        }

    @cached_property
    def precision(self) -> dict:
        """The measured error against float64 (headgeom.geometry.engine.precision), once."""
        if self.source is None:
            return {"measured": False, "why": "built without effective_hessian()"}
        head, z = self.source
        s = self.facts.settings
        return measured_error(self, lambda: effective_hessian(
            head, self.loss, z, reading=s.reading, dtype=torch.float64, max_dense=s.max_dense,
            chunk_size=s.chunk_size, block_strategy=s.block_strategy, discover_structure=s.discover_structure))

    def operand_scale(self) -> OperandScale:
        """S = 1.1 · max_i ‖A_i‖₂ ‖J_i‖₂² (A_i the ambient loss-Hessian block, J_i the head Jacobian),
        the operand-relative reference of the sign floor (:mod:`headgeom.geometry.engine.operand_scale`), once."""
        return self.facts.operand_scale

    # ------------------------------------------------------------------ blocks
    def blocks(self, rows: Rows = None) -> Tensor:
        """(b, d, d) diagonal blocks of H_eff of the samples ``rows`` (None: all N, b = N; an int b:
        the first b; a slice or index tensor), batched over samples."""
        g, m, _ = compute_blocks(self.facts, True, True, merged=True, idx=self._rows(rows))
        return (g if m is None else g.add_(m)).detach()  # g is the strategy's own fresh tensor

    def gauss_newton_blocks(self, rows: Rows = None) -> Tensor:
        """(b, d, d) diagonal blocks of G of the samples ``rows`` (as in :meth:`blocks`)."""
        return compute_blocks(self.facts, True, False, idx=self._rows(rows))[0].detach()

    def interaction_blocks(self, rows: Rows = None) -> Tensor:
        """(b, d, d) diagonal blocks of M of the samples ``rows`` (as in :meth:`blocks`)."""
        return compute_blocks(self.facts, False, True, idx=self._rows(rows))[1].detach()

    def decomposed_blocks(self, rows: Rows = None) -> tuple[Tensor, Tensor, Tensor]:
        """(H_eff, G, M) diagonal blocks from one pass, each (b, d, d), of the samples ``rows``."""
        g, m, _ = compute_blocks(self.facts, True, True, idx=self._rows(rows))
        g, m = g.detach(), m.detach()
        return g + m, g, m

    def block_path(self, part: str = "H") -> str:
        """The path a block query of ``part`` takes: "H" (blocks, decomposed_blocks), "G"
        (gauss_newton_blocks) or "M" (interaction_blocks); the same for every ``rows``.
        See :func:`headgeom.geometry.engine.block_dispatch.plan` for the paths."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {sorted(PARTS)}; got {part!r}")
        return block_path(self.facts, part)

    def _rows(self, rows: Rows) -> Tensor | None:
        return rows_index(rows, self.n, self.z.device)

    # ------------------------------------------------------------------ operator path
    def interaction_matvec(self, v: Tensor) -> Tensor:
        """M v, with M = Σ_i ρ_i ∇²_z h_i (ρ held constant)."""
        return operator_path.interaction_matvec(self.facts, v)

    def gauss_newton_matvec(self, v: Tensor) -> Tensor:
        """G v = Jᵀ ∇²_u L (J v) under the chosen reading."""
        return operator_path.gauss_newton_matvec(self.facts, v)

    def matvec(self, v: Tensor) -> Tensor:
        """H_eff v for v of shape (N·d,) or (N, d); forward-over-reverse, never dense."""
        return operator_path.matvec(self.facts, v)

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
        return operator_path.dense(self.facts)

    def gauss_newton(self) -> Tensor:
        """(N·d, N·d) G = Jᵀ ∇²_u L J under the chosen reading."""
        self._check_dense("gauss_newton()")
        return operator_path.gauss_newton_dense(self.facts)

    def interaction(self) -> Tensor:
        """(N·d, N·d) M = Σ_i ρ_i ∇²_z h_i, from the head's second derivatives."""
        self._check_dense("interaction()")
        return operator_path.interaction_dense(self.facts)


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
    cache: HeadCache | None = None,
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
            :mod:`headgeom.geometry.engine.readings`).
        dtype: analysis dtype: float64 by default (on every device); float32 is faster (on a GPU much
            faster), and its error against float64, measured on the same problem, is reported in
            ``info()["precision"]`` (:mod:`headgeom.geometry.engine.precision`); None keeps z's dtype.
        max_dense: largest N·d for which ``dense()``, ``gauss_newton()`` and ``interaction()``
            build a matrix.
        chunk_size: samples per chunk in the block path (memory vs speed).
        block_strategy: for MLP heads under separable losses, "sandwich" (blocks formed at the
            last activation's width, :mod:`headgeom.geometry.engine.sandwich`), "jacobian" (J
            propagated to the output, :mod:`headgeom.geometry.engine.chain`) or "auto" (the
            cheaper by a FLOP count). Every strategy is exact; the one used is in ``info()``.
        discover_structure: for a separable loss that declares no Hessian form, find its
            per-sample blocks as a scaled identity plus low rank from a few batched HVPs and
            verify them exactly (:mod:`headgeom.geometry.engine.loss_discovery`) so that the sandwich
            needs no further loss HVPs; False keeps one loss HVP per sandwich column (the
            result is the same to round-off either way).
        cache: a :class:`~headgeom.geometry.engine.head_cache.HeadCache` owned by a caller that analyses
            the same head across calls (a tracker): the head's analysis copy, its discovered chain
            and kept weight products are reused while the head is unchanged (checked at every
            call); None (the default) copies the head afresh.
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
    check_finite("z", z, "the representation batch must be finite")
    prepared = prepare_head(head, dtype, z.device, cache)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1; got {chunk_size}")
    if block_strategy not in BLOCK_STRATEGIES:
        raise ValueError(f"block_strategy must be one of {BLOCK_STRATEGIES}; got {block_strategy!r}")
    settings = Settings(reading, max_dense, chunk_size, block_strategy, discover_structure)
    return EffectiveHessian(measure_facts(prepared, loss, z, settings), source=(head, given))

"""The one-view loss u ↦ L(u) that the effective-Hessian engine analyses, and what it declares.

``AnalysisLoss`` is what :func:`headgeom.objectives.analysis_loss` and every method's
``geometry_problem`` return (docs/paper.md §1, §3): the function of one view's head output
u (N, k) -> scalar, everything else held constant, plus optional closed forms of its Hessian
that let the engine skip loss-Hessian-vector products:

- ``hessian_structure(u) -> (alpha (N,), U (N, k, r) | None, B (N, r, r) | None[, diag (N, k)])``:
  ∇²_u L is block-diagonal over samples with blocks alpha_i I + U_i B_i U_iᵀ (+ diag(diag_i) when
  a fourth element is given) (the separable objectives: MSE, negative cosine, DINO);
- ``diagonal_blocks(u) -> (N, k, k)``: the diagonal blocks [∇²_u L]_ii of a batch-coupled loss
  (NT-Xent, VICReg, Barlow Twins), all the per-sample pullback blocks need.

A declaration is never trusted: the engine checks it against exact HVPs before use
(:mod:`headgeom.geometry.loss_curvature`). A plain callable is accepted wherever an
AnalysisLoss is and declares nothing (:func:`as_analysis_loss`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor

Structure = Tuple[Optional[Tensor], ...]  # (alpha, U, B) or (alpha, U, B, diag)


@dataclass(frozen=True)
class AnalysisLoss:
    """u (N, k) ↦ scalar, with optional declared Hessian forms (see the module docstring)."""

    fn: Callable[[Tensor], Tensor]
    hessian_structure: Callable[[Tensor], Structure] | None = None
    diagonal_blocks: Callable[[Tensor], Tensor] | None = None

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"AnalysisLoss.fn must be callable u -> scalar tensor; got {type(self.fn).__name__}")

    def __call__(self, u: Tensor) -> Tensor:
        return self.fn(u)

    @property
    def declares(self) -> bool:
        """True when the loss declares some closed form of its Hessian."""
        return self.hessian_structure is not None or self.diagonal_blocks is not None

    def first_rows(self, b: int, u: Tensor) -> "AnalysisLoss":
        """u_sub (b, k) ↦ L([u_sub; u[b:]]): the loss of the first b rows, the other rows of the
        head output ``u`` (N, k) held constant. Declarations carry over to those rows."""
        if not 1 <= b <= u.shape[0]:
            raise ValueError(f"first_rows needs 1 <= b <= N = {u.shape[0]}; got b = {b}")
        rest = u[b:].detach()

        def whole(u_sub: Tensor) -> Tensor:
            return torch.cat([u_sub, rest.to(u_sub.dtype)], dim=0)

        def fn(u_sub: Tensor) -> Tensor:
            return self.fn(whole(u_sub))

        structure = blocks = None
        if self.hessian_structure is not None:
            declare = self.hessian_structure

            def structure(u_sub: Tensor) -> Structure:
                alpha, U, B, *diag = declare(whole(u_sub))  # an optional diagonal (N, k) last
                return (alpha[:b], None if U is None else U[:b], None if B is None else B[:b],
                        *(None if d is None else d[:b] for d in diag))

        if self.diagonal_blocks is not None:
            coupled = self.diagonal_blocks

            def blocks(u_sub: Tensor) -> Tensor:
                return coupled(whole(u_sub))[:b]

        return AnalysisLoss(fn, structure, blocks)

    def scaled(self, c: float, shift: float = 0.0) -> "AnalysisLoss":
        """u ↦ shift + c · L(u), its declared Hessian forms scaled by c."""
        fn0 = self.fn

        def fn(u: Tensor) -> Tensor:
            return shift + c * fn0(u)

        structure = blocks = None
        if self.hessian_structure is not None:
            declare = self.hessian_structure

            def structure(u: Tensor) -> Structure:
                alpha, U, B, *diag = declare(u)  # an optional diagonal (N, k) last
                return (c * alpha, U, None if B is None else c * B, *(None if d is None else c * d for d in diag))

        if self.diagonal_blocks is not None:
            coupled = self.diagonal_blocks

            def blocks(u: Tensor) -> Tensor:
                return c * coupled(u)

        return AnalysisLoss(fn, structure, blocks)


def as_analysis_loss(loss: AnalysisLoss | Callable[[Tensor], Tensor]) -> AnalysisLoss:
    """``loss`` itself if it is an AnalysisLoss, else a plain callable wrapped with nothing declared."""
    if isinstance(loss, AnalysisLoss):
        return loss
    if not callable(loss):
        raise TypeError(f"the loss must be a callable u (N, k) -> scalar tensor or an AnalysisLoss; "
                        f"got {type(loss).__name__}")
    return AnalysisLoss(loss)

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
(:mod:`headgeom.geometry.engine.loss_curvature`). A plain callable is accepted wherever an
AnalysisLoss is and declares nothing (:func:`as_analysis_loss`).

:meth:`AnalysisLoss.against` builds one from a pair loss ``(u, other) -> scalar`` with the other
view frozen (:func:`frozen`), the way every objective spec (:mod:`headgeom.objectives.spec`) and the
framework-free monitor build theirs; :func:`sum_losses` adds several (DINO's teachers).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple

import torch
from torch import Tensor

Structure = Tuple[Optional[Tensor], ...]  # (alpha, U, B) or (alpha, U, B, diag)


def frozen(t: Tensor) -> Callable[[Tensor], Tensor]:
    """A detached constant that follows the dtype and device of the tensor it meets.

    The effective-Hessian engine analyses in float64 what a method trains in float32: a constant
    closed over by a loss (the other view, a target, DINO's centre) is cast to the head output's
    dtype and device at each call, ``like(u)``.
    """
    c = t.detach()

    def like(u: Tensor) -> Tensor:
        return c.to(device=u.device, dtype=u.dtype)

    return like


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

    @classmethod
    def against(cls, pair: Callable[..., Tensor], other: Tensor, options: Mapping[str, Any] | None = None, *,
                hessian_structure: Callable[..., Structure] | None = None,
                diagonal_blocks: Callable[..., Tensor] | None = None) -> "AnalysisLoss":
        """u ↦ pair(u, other, **options): one view's loss with the other view's output ``other``
        (N, k) held fixed, detached and cast to u's dtype and device at each call (:func:`frozen`;
        so are tensor-valued options, e.g. DINO's centre). ``hessian_structure`` and
        ``diagonal_blocks``, the pair's closed forms (module docstring), are called as
        ``form(u, other, **the options their signature names)``."""
        if not isinstance(other, Tensor):
            raise TypeError(f"other must be a torch.Tensor (N, k), the other view's output; got {type(other).__name__}")
        fixed = frozen(other)
        consts = {k: frozen(v) for k, v in (options or {}).items() if isinstance(v, Tensor)}
        plain = {k: v for k, v in (options or {}).items() if not isinstance(v, Tensor)}

        def opts(u: Tensor, names: Sequence[str] | None = None) -> dict[str, Any]:
            out = {**plain, **{k: like(u) for k, like in consts.items()}}
            return out if names is None else {k: v for k, v in out.items() if k in names}

        def loss(u: Tensor) -> Tensor:
            return pair(u, fixed(u), **opts(u))

        def declared(form: Callable[..., Any] | None) -> Callable[[Tensor], Any] | None:
            if form is None:
                return None
            names = keyword_parameters(form)
            return lambda u: form(u, fixed(u), **opts(u, names))

        return cls(loss, declared(hessian_structure), declared(diagonal_blocks))

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


def keyword_parameters(fn: Callable[..., Any], n_positional: int = 2) -> list[str]:
    """The parameters of ``fn`` after its first ``n_positional`` ((u, other) for a pair loss)."""
    return list(inspect.signature(fn).parameters)[n_positional:]


def _summed_structure(parts: Sequence[Structure]) -> Structure:
    """Σ_j (alpha_j I + U_j B_j U_jᵀ + diag(d_j)) as one (alpha, U, B, diag): U side by side, B block-diagonal."""
    alpha = sum(p[0] for p in parts)
    pairs = [(p[1], p[2]) for p in parts if p[1] is not None]
    diags = [p[3] for p in parts if len(p) > 3 and p[3] is not None]
    U = B = None
    if pairs:
        U = torch.cat([u for u, _ in pairs], dim=-1)
        B = U.new_zeros(U.shape[0], U.shape[-1], U.shape[-1])
        at = 0
        for _, b in pairs:
            r = b.shape[-1]
            B[:, at:at + r, at:at + r] = b
            at += r
    return (alpha, U, B, sum(diags) if diags else None)


def sum_losses(terms: Sequence[AnalysisLoss]) -> AnalysisLoss:
    """u ↦ Σ_j L_j(u), declaring a closed form where every term declares it (the low-rank forms
    side by side, the diagonal blocks added); one term is returned as it is."""
    terms = [as_analysis_loss(t) for t in terms]
    if not terms:
        raise ValueError("sum_losses needs at least one loss")
    if len(terms) == 1:
        return terms[0]

    def fn(u: Tensor) -> Tensor:
        return torch.stack([t.fn(u) for t in terms]).sum()

    structure = blocks = None
    if all(t.hessian_structure is not None for t in terms):
        def structure(u: Tensor) -> Structure:
            return _summed_structure([t.hessian_structure(u) for t in terms])

    if all(t.diagonal_blocks is not None for t in terms):
        def blocks(u: Tensor) -> Tensor:
            return sum(t.diagonal_blocks(u) for t in terms)

    return AnalysisLoss(fn, structure, blocks)


def as_analysis_loss(loss: AnalysisLoss | Callable[[Tensor], Tensor]) -> AnalysisLoss:
    """``loss`` itself if it is an AnalysisLoss, else a plain callable wrapped with nothing declared."""
    if isinstance(loss, AnalysisLoss):
        return loss
    if not callable(loss):
        raise TypeError(f"the loss must be a callable u (N, k) -> scalar tensor or an AnalysisLoss; "
                        f"got {type(loss).__name__}")
    return AnalysisLoss(loss)

"""Augmentation tangents and Rayleigh quotients of metrics on them (docs/paper.md §1, §2 C6; Prop 5.2).

V_aug at x is span{∂ f(t_ξ(x)) / ∂ξ} over the continuous parameters ξ of an augmentation family.
Prop 5.2 says invariance forces vᵀ G v = 0 on V_aug for the head's pullback metric G = J_hᵀJ_h
(and so for J_hᵀ ∇²_u L J_h). This module computes, for any feature map and any metric:

- :func:`augmentation_tangent`: ∂ fn(t_ξ(x)) / ∂ξ by forward mode, for a registered family
  (via :func:`headgeom.augment.families.tangent`) or any transform ``(x, ξ) -> x'``.
- :func:`rayleigh_quotients`: vᵀ A v / ‖v‖² for A dense (n, n), per-sample blocks (N, d, d),
  an operator (``.matvec``/``.matmat``, e.g. :class:`~headgeom.geometry.SymmetricOperator`),
  or a Jacobian metric A = JᵀJ of a map (:class:`JacobianMetric`), evaluated as ‖J v‖² / ‖v‖²
  by jvp without forming J or A.
- :func:`random_unit_directions` and :func:`directions_in_span`: the controls (random unit
  directions of the ambient space, or of a given subspace).
- :func:`quotient_contrast`: tangent quotients against control quotients (median ratio and the
  probability that a tangent's quotient is below a control's).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.func import jvp, vmap

from headgeom.augment.families import AugmentationFamily, get_family
from headgeom.augment.families import tangent as family_tangent

__all__ = [
    "augmentation_tangent", "JacobianMetric", "rayleigh_quotients", "random_unit_directions",
    "directions_in_span", "quotient_contrast",
]

Transform = Callable[[Tensor, Tensor], Tensor]


def augmentation_tangent(fn: Callable[[Tensor], Tensor], x: Tensor, family: str | AugmentationFamily | Transform,
                         xi0: float | Tensor | None = None) -> Tensor:
    """Per-sample tangent d fn(t_ξ(x)) / dξ at ξ = xi0 by one forward-mode jvp.

    fn maps x (N, ...) to features (N, ...) row by row (eval-mode BatchNorm only). ``family``:
    a registered family name or AugmentationFamily (xi0 defaults to its tangent point), or a
    callable transform(x, xi) with xi of shape (N,) (xi0 defaults to 0.0). Returns (N, ...)
    like fn's output; fn = identity gives the input-space tangent ∂t_ξ(x)/∂ξ.
    """
    if isinstance(family, (str, AugmentationFamily)):
        return family_tangent(fn, x, get_family(family), xi0)
    if not callable(family):
        raise TypeError(f"family must be a family name, an AugmentationFamily or a callable (x, xi) -> x'; "
                        f"got {type(family).__name__}")
    n = x.shape[0]
    value = 0.0 if xi0 is None else xi0
    xi = torch.as_tensor(value, dtype=x.dtype, device=x.device)
    xi = (xi.expand(n) if xi.ndim == 0 else xi).clone()
    if xi.shape != (n,):
        raise ValueError(f"xi0 must be a number or have shape (N,) = ({n},); got {tuple(xi.shape)}")
    return jvp(lambda v: fn(family(x, v)), (xi,), (torch.ones_like(xi),))[1]


@dataclass(frozen=True)
class JacobianMetric:
    """The metric A = J_fn(at)ᵀ J_fn(at) of a map fn at a point, never formed.

    per_sample=True: ``at`` is a batch (N, ...) and fn is row-wise, so A is block-diagonal
    with one block per sample and quotients are per sample. per_sample=False: ``at`` is one
    point of any shape and A acts on vectors of that shape.
    """

    fn: Callable[[Tensor], Tensor]
    at: Tensor
    per_sample: bool = True

    def sq_norm_jv(self, v: Tensor) -> Tensor:
        """‖J v‖² for v of the shape of ``at``: (N,) if per_sample else a 0-d tensor."""
        jv = jvp(self.fn, (self.at,), (v.to(self.at.dtype),))[1]
        return jv.flatten(1).pow(2).sum(1) if self.per_sample else jv.pow(2).sum()


def _flat_quotient(av_dot_v: Tensor, v: Tensor, dims: int) -> Tensor:
    vv = v.flatten(-dims).pow(2).sum(-1) if dims else v.pow(2)
    if (vv == 0).any():
        raise ValueError("a direction v has zero norm; the Rayleigh quotient vᵀAv/‖v‖² is undefined for it "
                         "(e.g. a tangent of a family that does not move this input): drop or report it separately")
    return av_dot_v / vv


def rayleigh_quotients(metric: Any, v: Tensor) -> Tensor:
    """vᵀ A v / ‖v‖² for each direction in ``v``.

    metric and v:
    - dense A (n, n), v (n,) or (m, n) -> () or (m,);
    - blocks A (N, d, d), v (N, d) or (N, m, d) -> (N,) or (N, m) (sample i uses block i);
    - JacobianMetric (A = JᵀJ): per_sample, v (N, ...) like ``at`` -> (N,), or (N, m, ...) ->
      (N, m); otherwise v like ``at`` -> (), or (m, *at.shape) -> (m,);
    - an operator with .matvec (and .shape (n, n)), v (n,) or (m, n) -> () or (m,).
    """
    if isinstance(metric, JacobianMetric):
        at = metric.at
        if metric.per_sample:
            if v.shape == at.shape:
                return _flat_quotient(metric.sq_norm_jv(v), v.flatten(1), 1)
            if v.ndim == at.ndim + 1 and v.shape[0] == at.shape[0] and v.shape[2:] == at.shape[1:]:
                num = vmap(metric.sq_norm_jv, in_dims=1, out_dims=1)(v)  # (N, m)
                return _flat_quotient(num, v.flatten(2), 1)
            raise ValueError(f"per-sample directions must have shape {tuple(at.shape)} or "
                             f"({at.shape[0]}, m, {', '.join(map(str, at.shape[1:]))}); got {tuple(v.shape)}")
        if v.shape == at.shape:
            return _flat_quotient(metric.sq_norm_jv(v), v.flatten(), 1)
        if v.shape[1:] == at.shape:
            return _flat_quotient(vmap(metric.sq_norm_jv)(v), v.flatten(1), 1)
        raise ValueError(f"directions must have shape {tuple(at.shape)} or (m, {tuple(at.shape)}); got {tuple(v.shape)}")
    if isinstance(metric, Tensor):
        a = metric.to(v.dtype)
        if a.ndim == 2:
            if a.shape[0] != a.shape[1] or v.shape[-1] != a.shape[0] or v.ndim > 2:
                raise ValueError(f"dense metric {tuple(a.shape)} needs v of shape ({a.shape[0]},) or (m, {a.shape[0]}); "
                                 f"got {tuple(v.shape)}")
            return _flat_quotient(((v @ a) * v).sum(-1), v, 1)
        if a.ndim == 3:
            n, d, d2 = a.shape
            if d != d2 or v.shape[0] != n or v.shape[-1] != d or v.ndim not in (2, 3):
                raise ValueError(f"blocks {tuple(a.shape)} need v of shape ({n}, {d}) or ({n}, m, {d}); "
                                 f"got {tuple(v.shape)}")
            vv = v if v.ndim == 3 else v.unsqueeze(1)
            q = _flat_quotient(torch.einsum("nmi,nij,nmj->nm", vv, a, vv), vv, 1)
            return q if v.ndim == 3 else q.squeeze(1)
        raise ValueError(f"a tensor metric must be dense (n, n) or blocks (N, d, d); got shape {tuple(a.shape)}")
    if callable(getattr(metric, "matvec", None)):
        if v.ndim == 1:
            return _flat_quotient((metric.matvec(v) * v).sum(), v, 1)
        if v.ndim == 2:
            mm = getattr(metric, "matmat", None)
            av = mm(v.T).T if callable(mm) else torch.stack([metric.matvec(r) for r in v])
            return _flat_quotient((av * v).sum(-1), v, 1)
        raise ValueError(f"an operator metric needs v of shape (n,) or (m, n); got {tuple(v.shape)}")
    raise TypeError(f"metric must be a tensor (dense or blocks), a JacobianMetric or an operator with .matvec; "
                    f"got {type(metric).__name__}")


def random_unit_directions(shape: tuple[int, ...], generator: torch.Generator, dtype: torch.dtype = torch.float64,
                           sample_dims: int = 1) -> Tensor:
    """Gaussian directions of ``shape`` normalised to unit norm over the last ``sample_dims`` dims
    (uniform on the unit sphere of that space): e.g. (N, m, d) with sample_dims=1."""
    g = torch.randn(*shape, generator=generator, dtype=dtype)
    norm = g.flatten(-sample_dims).norm(dim=-1)
    return g / norm.reshape(*norm.shape, *([1] * sample_dims))


def directions_in_span(basis: Tensor, m: int, generator: torch.Generator) -> Tensor:
    """m random unit directions in the column span of ``basis`` (..., n, r): (..., m, n).

    Gaussian coefficients in the basis, then normalised, so the control lives in the subspace
    (e.g. the data manifold's content tangents) rather than in the whole ambient space.
    """
    w = torch.randn(*basis.shape[:-2], basis.shape[-1], m, generator=generator, dtype=basis.dtype)
    dirs = (basis @ w).transpose(-1, -2)
    return dirs / dirs.norm(dim=-1, keepdim=True)


def quotient_contrast(q_tangent: Tensor, q_control: Tensor) -> dict[str, float]:
    """Tangent quotients against control quotients, on |q| (loss-Hessian metrics can be indefinite).

    ratio = median|q_tangent| / median|q_control|; p_below = P(|q_t| < |q_c|) over all pairs
    (ties count ½): 0.5 when the tangents look like the control, → 1 when they are suppressed.
    """
    t = q_tangent.detach().abs().flatten().double()
    c = q_control.detach().abs().flatten().double()
    if t.numel() == 0 or c.numel() == 0:
        raise ValueError(f"quotient_contrast needs non-empty quotients; got {t.numel()} tangents and {c.numel()} controls")
    mt, mc = float(t.median()), float(c.median())
    less = (t[:, None] < c[None, :]).double().mean() + 0.5 * (t[:, None] == c[None, :]).double().mean()
    return {"median_tangent": mt, "median_control": mc, "ratio": mt / mc if mc > 0 else float("inf"),
            "p_below": float(less)}

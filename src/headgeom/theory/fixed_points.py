"""Fixed points of a loss in the head output u: the premise of Thm 3.1 (docs/paper.md §2 C1), ∇_u L(u*) = 0.

At a fixed point the residual gradient ρ = ∇_u L vanishes, so M = 0 and H_eff = J_hᵀ [∇²_u L] J_h for every head.
:func:`stationary_point` finds one from a start u0 (N, k) by a Levenberg–Marquardt iteration on the gradient
system ∇L(u) = 0: each step minimises ‖∇L(u) + H δ‖² + μ‖δ‖² with H = ∇²_u L (Newton's step as μ → 0, a
gradient step on ½‖∇L‖² for large μ), and is kept only if it lowers ‖∇L‖. The iteration never looks at the
sign of H: it converges to the stationary point near u0, whether a minimum, a saddle or a maximum of L.

Gauges. A loss invariant under a group acting on u has no isolated fixed points, and its gradient can be
made small by moving along the group alone: −cos(u_i, c_i) and InfoNCE do not change when a row u_i is scaled,
and the gradient falls like 1/‖u_i‖, so an unconstrained solver "converges" by growing ‖u‖ (DINO's softmax does
not change when a constant is added to a row). A :class:`Gauge`
names the group's orbit directions at u (``tangents``) and maps u to the point of its orbit with the start's
scale (``fix``). Steps are taken orthogonal to the orbit and every iterate is fixed, so ‖∇L‖ is always
measured at the start's scale. The gauges of :func:`loss_gauge` are tested to be invariances of their losses.
Barlow Twins is invariant to shifting a feature over the batch, and to scaling it only without the ``eps``
inside its sqrt(var + eps): with eps > 0 the scale directions carry a gradient of relative size eps/var that
vanishes only as the feature grows without bound, so its fixed points exist at finite u only for eps = 0.
A loss with a kink has no fixed point where its minimum sits on the kink: VICReg's variance hinge max(0, 1 − std_j)
is not differentiable at std_j = 1, ∇L jumps there, and the solver stops without progress; the caller's tolerance
(:meth:`FixedPoint.reached`) then says no fixed point was found.

The check (:func:`gradient_norm`) differentiates the loss with ``torch.autograd.grad``, apart from the solver's
``torch.func`` gradient. All in float64; sizes are small (the dense (N·k)² Hessian is formed each step).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["FEATURE_AFFINE", "FEATURE_SHIFT", "FixedPoint", "Gauge", "GAUGED", "NONE", "ROW_SCALE", "ROW_SHIFT",
           "gradient_norm", "loss_gauge", "stationary_point"]

Loss = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Gauge:
    """A group acting on u (N, k) that leaves the loss unchanged: ``name``, ``tangents(u)`` the orbit
    directions at u (m, N·k) (m = 0: no group), and ``fix(u, u0)`` the point of u's orbit at u0's scale."""

    name: str
    tangents: Callable[[Tensor], Tensor]
    fix: Callable[[Tensor, Tensor], Tensor]


def _no_tangents(u: Tensor) -> Tensor:
    return u.new_zeros(0, u.numel())


def _row_scale_tangents(u: Tensor) -> Tensor:
    """e_i ⊗ u_i for every row i: scaling row i alone."""
    n, k = u.shape
    t = u.new_zeros(n, n, k)
    t[torch.arange(n), torch.arange(n)] = u
    return t.reshape(n, n * k)


def _row_scale_fix(u: Tensor, u0: Tensor) -> Tensor:
    return u * (u0.norm(dim=1, keepdim=True) / u.norm(dim=1, keepdim=True))


def _row_shift_tangents(u: Tensor) -> Tensor:
    """e_i ⊗ 1 for every row i: adding a constant to every entry of row i."""
    n, k = u.shape
    t = u.new_zeros(n, n, k)
    t[torch.arange(n), torch.arange(n)] = 1.0
    return t.reshape(n, n * k)


def _row_shift_fix(u: Tensor, u0: Tensor) -> Tensor:
    return u - u.mean(dim=1, keepdim=True) + u0.mean(dim=1, keepdim=True)


def _feature_shift_tangents(u: Tensor) -> Tensor:
    """1 ⊗ e_j for every feature j: shifting feature j over the batch."""
    n, k = u.shape
    t = u.new_zeros(k, n, k)
    t[torch.arange(k), :, torch.arange(k)] = 1.0
    return t.reshape(k, n * k)


def _feature_affine_tangents(u: Tensor) -> Tensor:
    """Shifting and scaling each feature j over the batch: 1 ⊗ e_j and u_{:,j} ⊗ e_j."""
    n, k = u.shape
    scale = u.new_zeros(k, n, k)
    scale[torch.arange(k), :, torch.arange(k)] = u.T
    return torch.cat([_feature_shift_tangents(u), scale.reshape(k, n * k)])


def _feature_shift_fix(u: Tensor, u0: Tensor) -> Tensor:
    return u - u.mean(dim=0) + u0.mean(dim=0)


def _feature_affine_fix(u: Tensor, u0: Tensor) -> Tensor:
    return (u - u.mean(dim=0)) * (u0.std(dim=0) / u.std(dim=0)) + u0.mean(dim=0)


NONE = Gauge("none", _no_tangents, lambda u, u0: u)
ROW_SCALE = Gauge("scale of each row u_i", _row_scale_tangents, _row_scale_fix)
ROW_SHIFT = Gauge("shift of every entry of each row u_i", _row_shift_tangents, _row_shift_fix)
FEATURE_SHIFT = Gauge("shift of each feature over the batch", _feature_shift_tangents, _feature_shift_fix)
FEATURE_AFFINE = Gauge("shift and scale of each feature over the batch", _feature_affine_tangents, _feature_affine_fix)
GAUGED = {"negative_cosine": ROW_SCALE, "info_nce": ROW_SCALE, "nt_xent": ROW_SCALE, "mocov3": ROW_SCALE,
          "dino": ROW_SHIFT}
"""The objectives whose loss in u is invariant under a group whatever their options (Barlow Twins: :func:`loss_gauge`)."""


def loss_gauge(objective: str, options: Mapping[str, object] | None = None) -> Gauge:
    """The gauge of ``objective`` (a name of headgeom.objectives) with its ``options``: row scale for the losses of
    L2-normalised rows, row shift for DINO's softmax, the feature shift (and scale when ``eps`` = 0) for Barlow
    Twins, none otherwise."""
    if objective == "barlow_twins":
        return FEATURE_AFFINE if float((options or {}).get("eps", 1e-5)) == 0.0 else FEATURE_SHIFT
    return GAUGED.get(objective, NONE)


def gradient_norm(loss: Loss, u: Tensor) -> float:
    """‖∇_u L(u)‖ by ``torch.autograd.grad`` (the independent check of :func:`stationary_point`)."""
    x = u.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(x), x)
    return float(g.norm())


def _orthogonal_projector(tangents: Tensor, eye: Tensor) -> Tensor:
    """I − QQᵀ (n, n), Q an orthonormal basis of the rows of ``tangents`` (m, n); I when m = 0."""
    if tangents.shape[0] == 0:
        return eye
    q = torch.linalg.qr(tangents.T)[0]
    return eye - q @ q.T


@dataclass(frozen=True)
class FixedPoint:
    """What :func:`stationary_point` reached: ``u`` (N, k); ``grad_norm`` = ‖∇L(u)‖ and ``grad_norm_start`` =
    ‖∇L(u0)‖ (at the gauge-fixed start), both by :func:`gradient_norm`; ``iterations``; ``stop`` ("tolerance",
    "no progress" or "iterations")."""

    u: Tensor
    grad_norm: float
    grad_norm_start: float
    iterations: int
    stop: str

    @property
    def relative_gradient(self) -> float:
        """‖∇L(u*)‖ / ‖∇L(u0)‖ (0 when the start was already stationary)."""
        return self.grad_norm / self.grad_norm_start if self.grad_norm_start > 0 else 0.0

    def reached(self, tol: float) -> bool:
        """Whether u* is a fixed point to the relative tolerance ``tol``."""
        return self.relative_gradient <= tol


def stationary_point(loss: Loss, u0: Tensor, gauge: Gauge = NONE, tol: float = 1e-14,
                     max_iter: int = 60) -> FixedPoint:
    """A stationary point of u ↦ L(u) near ``u0`` (N, k), float64 (module docstring).

    Stops when ‖∇L‖ ≤ tol · ‖∇L(u0)‖, when no damping lowers ‖∇L‖ (round-off reached), or after ``max_iter``
    steps. Whether the result is a fixed point is the caller's tolerance: :meth:`FixedPoint.reached`.
    """
    if u0.ndim != 2:
        raise ValueError(f"u0 must be a batch of head outputs (N, k); got shape {tuple(u0.shape)}")
    u0 = u0.detach().to(torch.float64)
    shape = u0.shape

    def flat_loss(x: Tensor) -> Tensor:
        return loss(x.reshape(shape))

    grad, hess = torch.func.grad(flat_loss), torch.func.hessian(flat_loss)
    x = gauge.fix(u0, u0).flatten()
    g = grad(x)
    g_start, mu, stop, it = float(g.norm()), None, "iterations", 0
    eye = torch.eye(x.numel(), dtype=x.dtype)
    for it in range(max_iter):
        if float(g.norm()) <= tol * g_start:
            stop = "tolerance"
            break
        proj = _orthogonal_projector(gauge.tangents(x.reshape(shape)), eye)
        h = proj @ hess(x) @ proj
        lam, vec = torch.linalg.eigh(0.5 * (h + h.T))
        coef = vec.T @ (proj @ g)
        mu = 1e-6 * float(lam.abs().max()) ** 2 if mu is None else mu
        while mu < 1e300:  # raise the damping until the step lowers ‖∇L‖
            trial = gauge.fix((x - vec @ (lam / (lam ** 2 + mu) * coef)).reshape(shape), u0).flatten()
            g_trial = grad(trial)
            if float(g_trial.norm()) < float(g.norm()):
                x, g, mu = trial, g_trial, mu / 10
                break
            mu *= 10
        else:
            stop = "no progress"
            break
    else:
        it = max_iter
    u = x.reshape(shape).detach()
    return FixedPoint(u, gradient_norm(loss, u), gradient_norm(loss, gauge.fix(u0, u0)), it, stop)

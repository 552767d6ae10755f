"""Readings of the loss Hessian ∇²_u L used in the pullback metric G (docs/paper.md §1).

Each reading is the Hessian of a stated loss; every output of headgeom states which it used:

- ``ambient``: the exact Hessian of the loss as given, ∇²_u L. G + M is then the exact
  Hessian of z ↦ L(h(z)).
- ``tangential``: P ∇²_u L P with P_i = I − û_i û_iᵀ per sample, the projection onto the
  tangent space of the sphere through u_i (the radial direction is removed on both sides).
  For a loss invariant to the scale of each row (negative cosine, NT-Xent, InfoNCE on
  normalised rows) ρ_i ⟂ u_i (Euler's identity), so the Weingarten term −(û_iᵀρ_i/‖u_i‖) P_i
  vanishes and P ∇²_u L P is the Riemannian Hessian of L on the sphere. G, M and H_eff are then
  unchanged when the head output is scaled by any α > 0 (G: α² · α⁻²; M: α⁻¹ · α), which makes
  this the reading for tracking cosine losses. It differs from the ambient H_eff by the radial
  cross terms Σ_i J_iᵀ(û_i ρ_iᵀ + ρ_i û_iᵀ)J_i / ‖u_i‖.

A premise such as the collapse theorem's ∇²_u L = I / N is analysed with the loss that has it
(:func:`headgeom.objectives.mse_to_target`, read ``ambient``), never by pairing it with another
loss's ρ: such a hybrid is the Hessian of no loss and its M/G ratio scales as 1/α².

The residual gradient ρ = ∇_u L in the interaction term M is always the true gradient of the
loss; only the curvature of the loss in G changes with the reading.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.func import grad, jvp, vjp

READINGS: dict[str, str] = {
    "ambient": "exact Hessian of the loss in u",
    "tangential": "P H P with P_i = I - u_i u_i^T / |u_i|^2 (sphere tangent at each u_i): the Riemannian "
                  "Hessian on the sphere for a loss invariant to each row's scale (cosine)",
}

Loss = Callable[[Tensor], Tensor]


def check_reading(reading: str) -> str:
    if reading not in READINGS:
        hint = (" (the MSE premise is the MSE loss itself: use objective 'mse' with reading 'ambient')"
                if reading == "mse" else "")
        raise ValueError(
            f"unknown loss-Hessian reading {reading!r}; choose one of {sorted(READINGS)}{hint}"
        )
    return reading


def _project_tangent(u: Tensor, w: Tensor) -> Tensor:
    """Row-wise projection of w (N, k) onto the tangent space of the sphere at u (N, k)."""
    u_hat = u / u.norm(dim=-1, keepdim=True)
    return w - u_hat * (u_hat * w).sum(dim=-1, keepdim=True)


def hvp_fn(f: Callable[[Tensor], Tensor], x: Tensor) -> Callable[[Tensor], Tensor]:
    """Return w ↦ ∇²f(x) w for a scalar f: forward-over-reverse (jvp of grad), falling back to
    reverse-over-reverse (vjp of grad, exact because the Hessian is symmetric) for good once
    forward mode fails.

    Forward mode is missing for some ops and, for others, yields a ZeroTensor that a backward
    formula then writes into ("ZeroTensors are immutable": ``F.mse_loss`` against a constant,
    ``relu`` where a hinge is inactive). Every loss HVP in headgeom goes through here.
    """
    g = grad(f)
    forward_ok = [True]

    def reverse(w: Tensor) -> Tensor:
        _, pull = vjp(g, x)
        return pull(w)[0]

    def hvp(w: Tensor) -> Tensor:
        if forward_ok[0]:
            try:
                return jvp(g, (x,), (w,))[1]
            except (NotImplementedError, RuntimeError):
                forward_ok[0] = False
        return reverse(w)

    return hvp


def jvp_or_double_vjp(fn: Callable[[Tensor], Tensor], x: Tensor, v: Tensor) -> Tensor:
    """J v of ``fn`` at ``x`` by forward mode, falling back to reverse-over-reverse where forward AD is missing."""
    try:
        return jvp(fn, (x,), (v,))[1]
    except (NotImplementedError, RuntimeError):
        y, pull = vjp(fn, x)
        _, pull2 = vjp(lambda w: pull(w)[0], torch.zeros_like(y))
        return pull2(v)[0]


def loss_hvp(loss: Loss, u: Tensor, reading: str = "ambient") -> Callable[[Tensor], Tensor]:
    """Return w ↦ (∇²_u L) w under ``reading``, for w of the shape of u (N, k).

    Through :func:`hvp_fn` (forward-over-reverse, else reverse-over-reverse): the loss Hessian
    is never formed.
    """
    check_reading(reading)
    ambient = hvp_fn(loss, u)
    if reading == "ambient":
        return ambient
    return lambda w: _project_tangent(u, ambient(_project_tangent(u, w)))


def autograd_loss_hvp(loss: Loss, u: Tensor, reading: str = "ambient") -> Callable[[Tensor], Tensor]:
    """w ↦ (∇²_u L) w under ``reading`` by reverse-over-reverse ``torch.autograd`` on one graph of
    the gradient, kept for the calls: the one-off checks of a loss's declared forms use it. Exact
    like :func:`loss_hvp`, and no ``torch.func``: the first torch.func vjp or grad of a process
    imports torch._dynamo (seconds), which a structured head with a declared loss never needs
    otherwise."""
    check_reading(reading)
    with torch.enable_grad():
        x = u.detach().requires_grad_(True)
        value = loss(x)
        g = torch.autograd.grad(value, x, create_graph=True)[0] if value.requires_grad else None

    def ambient(w: Tensor) -> Tensor:
        if g is None or not g.requires_grad:  # a loss linear (or constant) in u: no curvature
            return torch.zeros_like(u)
        with torch.enable_grad():  # ⟨g, w⟩ differentiated, not grad_outputs=w: that imports sympy (about a second)
            (hw,) = torch.autograd.grad((g * w).sum(), x, retain_graph=True, allow_unused=True)
        return torch.zeros_like(u) if hw is None else hw.detach()

    if reading == "ambient":
        return ambient
    return lambda w: _project_tangent(u, ambient(_project_tangent(u, w)))

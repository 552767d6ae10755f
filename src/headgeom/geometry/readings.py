"""Readings of the loss Hessian ∇²_u L used in the pullback metric G (docs/paper.md §1).

For cosine losses the paper's collapse theorem assumes the MSE premise, while the exact
("ambient") Hessian of −cos is strongly indefinite near small ‖u‖. Every output of headgeom
states which reading it used:

- ``ambient``: the exact Hessian of the loss as given, ∇²_u L.
- ``tangential``: P ∇²_u L P with P_i = I − û_i û_iᵀ per sample, the projection onto the
  tangent space of the sphere through u_i (the radial direction is removed on both sides).
- ``mse``: the MSE premise ∇²_u L := I / N, the exact Hessian of ½‖u − c‖² averaged over the
  N samples (the reduction of :func:`headgeom.objectives.mse_to_target`).

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
    "tangential": "P H P with P_i = I - u_i u_i^T / |u_i|^2 (sphere tangent at each u_i)",
    "mse": "MSE premise: Hessian of 1/2 |u - c|^2 averaged over the batch, i.e. I / N",
}

Loss = Callable[[Tensor], Tensor]


def check_reading(reading: str) -> str:
    if reading not in READINGS:
        raise ValueError(
            f"unknown loss-Hessian reading {reading!r}; choose one of {sorted(READINGS)}"
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


def loss_hvp(loss: Loss, u: Tensor, reading: str = "ambient") -> Callable[[Tensor], Tensor]:
    """Return w ↦ (∇²_u L) w under ``reading``, for w of the shape of u (N, k).

    Through :func:`hvp_fn` (forward-over-reverse, else reverse-over-reverse): the loss Hessian
    is never formed.
    """
    check_reading(reading)
    if reading == "mse":
        n = u.shape[0]
        return lambda w: w / n
    ambient = hvp_fn(loss, u)
    if reading == "ambient":
        return ambient
    return lambda w: _project_tangent(u, ambient(_project_tangent(u, w)))

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
from torch.func import grad, jvp

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


def loss_hvp(loss: Loss, u: Tensor, reading: str = "ambient") -> Callable[[Tensor], Tensor]:
    """Return w ↦ (∇²_u L) w under ``reading``, for w of the shape of u (N, k).

    Forward-over-reverse (jvp of grad): the loss Hessian is never formed.
    """
    check_reading(reading)
    if reading == "mse":
        n = u.shape[0]
        return lambda w: w / n
    g = grad(loss)

    def ambient(w: Tensor) -> Tensor:
        return jvp(g, (u,), (w,))[1]

    if reading == "ambient":
        return ambient
    return lambda w: _project_tangent(u, ambient(_project_tangent(u, w)))

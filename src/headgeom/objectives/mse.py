"""Squared error to a stop-gradient target: the MSE premise of the collapse theorem (docs/paper.md §1).

½‖u_i − sg(c_i)‖² per sample, averaged over the batch, so ∇²_u L = I / N (the ``mse``
reading of :mod:`headgeom.geometry.engine.readings`).
"""
from __future__ import annotations

from torch import Tensor

from headgeom.objectives._checks import check_pair
from headgeom.objectives.spec import ObjectiveSpec


def mse_to_target(u: Tensor, c: Tensor) -> Tensor:
    """mean_i ½‖u_i − sg(c_i)‖²: u (N, D) head output, c (N, D) target (no gradient) -> scalar."""
    u, c = check_pair("u", u, "c", c)
    return 0.5 * (u - c.detach()).pow(2).sum(dim=1).mean()


def mse_hessian_structure(u: Tensor, c: Tensor) -> tuple[Tensor, None, None]:
    """Per-sample blocks of ∇²_u mse_to_target(u, c): I/N, as (alpha (N,), None, None)."""
    return u.new_full((u.shape[0],), 1.0 / u.shape[0]), None, None


SPECS = (ObjectiveSpec("mse", mse_to_target, two_view=False, batch_coupled=False, cosine=False,
                       description="mean_i 1/2 |u_i - sg(c_i)|^2: the MSE premise of Thm 4.1",
                       hessian_structure=mse_hessian_structure),)

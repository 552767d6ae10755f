"""Negative cosine similarity to a stop-gradient target (SimSiam, BYOL; docs/paper.md §1, §3).

Follows facebookresearch/simsiam main_simsiam.py: nn.CosineSimilarity(dim=1), the target
detached, averaged over the batch, and the symmetric SimSiam loss
−½[cos(p1, sg(z2)) + cos(p2, sg(z1))]. Its loss Hessian has the ambient / tangential /
MSE-premise readings of :mod:`headgeom.geometry.engine.readings`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_pair
from headgeom.objectives.spec import ObjectiveSpec


def negative_cosine(p: Tensor, z: Tensor) -> Tensor:
    """−mean_i cos(p_i, sg(z_i)): p (N, D) prediction, z (N, D) target (no gradient) -> scalar."""
    p, z = check_pair("p", p, "z", z)
    return -F.cosine_similarity(p, z.detach(), dim=1).mean()


def simsiam_loss(p1: Tensor, p2: Tensor, z1: Tensor, z2: Tensor) -> Tensor:
    """SimSiam's symmetric loss ½[negative_cosine(p1, z2) + negative_cosine(p2, z1)] -> scalar."""
    return 0.5 * (negative_cosine(p1, z2) + negative_cosine(p2, z1))


def negative_cosine_hessian_structure(u: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-sample blocks of ∇²_u negative_cosine(u, c) as α_i I + U_i B_i U_iᵀ.

    With n = ‖u_i‖, û = u_i/n, ĉ = c_i/‖c_i‖, s = ûᵀĉ and the batch mean's 1/N:
    ∇²(−cos) = (1/n²)[s I + ĉûᵀ + ûĉᵀ − 3s ûûᵀ], so α = s/(N n²), U = [û, ĉ] and
    B = 1/(N n²) [[−3s, 1], [1, 0]]. Returns alpha (N,), U (N, k, 2), B (N, 2, 2).
    """
    n_batch = u.shape[0]
    norm = u.norm(dim=1)
    u_hat = u / norm[:, None]
    c_hat = c / c.norm(dim=1, keepdim=True)
    s = (u_hat * c_hat).sum(dim=1)
    scale = 1.0 / (n_batch * norm**2)
    alpha = s * scale
    U = torch.stack([u_hat, c_hat], dim=-1)
    B = torch.zeros(n_batch, 2, 2, dtype=u.dtype, device=u.device)
    B[:, 0, 0] = -3.0 * s * scale
    B[:, 0, 1] = scale
    B[:, 1, 0] = scale
    return alpha, U, B


SPECS = (ObjectiveSpec("negative_cosine", negative_cosine, two_view=False, batch_coupled=False, cosine=True,
                       description="-mean_i cos(p_i, sg(z_i)) (SimSiam/BYOL, facebookresearch/simsiam)",
                       hessian_structure=negative_cosine_hessian_structure),)

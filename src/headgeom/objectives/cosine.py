"""Negative cosine similarity to a stop-gradient target (SimSiam, BYOL; PAPER.md §1, §3).

Follows facebookresearch/simsiam main_simsiam.py: nn.CosineSimilarity(dim=1), the target
detached, averaged over the batch, and the symmetric SimSiam loss
−½[cos(p1, sg(z2)) + cos(p2, sg(z1))]. Its loss Hessian has the ambient / tangential /
MSE-premise readings of :mod:`headgeom.geometry.readings`.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_pair


def negative_cosine(p: Tensor, z: Tensor) -> Tensor:
    """−mean_i cos(p_i, sg(z_i)): p (N, D) prediction, z (N, D) target (no gradient) -> scalar."""
    p, z = check_pair("p", p, "z", z)
    return -F.cosine_similarity(p, z.detach(), dim=1).mean()


def simsiam_loss(p1: Tensor, p2: Tensor, z1: Tensor, z2: Tensor) -> Tensor:
    """SimSiam's symmetric loss ½[negative_cosine(p1, z2) + negative_cosine(p2, z1)] -> scalar."""
    return 0.5 * (negative_cosine(p1, z2) + negative_cosine(p2, z1))

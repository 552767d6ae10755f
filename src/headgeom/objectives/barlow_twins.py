"""Barlow Twins (Zbontar et al. 2021), as in facebookresearch/barlowtwins main.py BarlowTwins.forward.

Each view is standardised per feature as nn.BatchNorm1d(D, affine=False) does in train mode
(batch mean, biased variance, eps inside the square root); the cross-correlation is
c = âᵀ b̂ / N and the loss Σ_i (1 − c_ii)² + λ Σ_{i≠j} c_ij².
"""
from __future__ import annotations

import torch
from torch import Tensor

from headgeom.objectives._checks import check_batch, check_nonnegative, check_pair


def batch_standardize(x: Tensor, eps: float = 1e-5) -> Tensor:
    """(x − mean) / sqrt(var_biased + eps) per feature over the batch; x (N, D) -> (N, D)."""
    mean = x.mean(dim=0)
    var = x.var(dim=0, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps)


def cross_correlation(a: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """c = âᵀ b̂ / N of the batch-standardised views a, b (N, D) -> (D, D)."""
    return batch_standardize(a, eps).T @ batch_standardize(b, eps) / a.shape[0]


def barlow_twins(a: Tensor, b: Tensor, lambd: float = 0.0051, eps: float = 1e-5) -> Tensor:
    """Barlow Twins loss of two views' embeddings a, b (N, D) -> scalar (official λ = 0.0051)."""
    a, b = check_pair("a", a, "b", b)
    check_batch("barlow_twins", a)
    check_nonnegative("lambd", lambd)
    check_nonnegative("eps", eps)
    c = cross_correlation(a, b, eps)
    diag = torch.diagonal(c)
    on_diag = (1 - diag).pow(2).sum()
    off_diag = c.pow(2).sum() - diag.pow(2).sum()
    return on_diag + lambd * off_diag

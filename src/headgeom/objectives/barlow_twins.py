"""Barlow Twins (Zbontar et al. 2021), as in facebookresearch/barlowtwins main.py BarlowTwins.forward.

Each view is standardised per feature as nn.BatchNorm1d(D, affine=False) does in train mode
(batch mean, biased variance, eps inside the square root); the cross-correlation is
c = âᵀ b̂ / N and the loss Σ_i (1 − c_ii)² + λ Σ_{i≠j} c_ij².
"""
from __future__ import annotations

import torch
from torch import Tensor

from headgeom.objectives._checks import check_batch, check_nonnegative, check_pair
from headgeom.objectives.spec import ObjectiveSpec


def batch_standardize(x: Tensor, eps: float = 1e-5) -> Tensor:
    """(x − mean) / sqrt(var_biased + eps) per feature over the batch; x (N, D) -> (N, D)."""
    mean = x.mean(dim=0)
    var = x.var(dim=0, unbiased=False)
    return (x - mean) / torch.sqrt(var + eps)


def cross_correlation(a: Tensor, b: Tensor, eps: float = 1e-5) -> Tensor:
    """c = âᵀ b̂ / N of the batch-standardised views a, b (N, D) -> (D, D)."""
    return batch_standardize(a, eps).T @ batch_standardize(b, eps) / a.shape[0]


def _check(a: Tensor, b: Tensor, lambd: float, eps: float) -> tuple[Tensor, Tensor]:
    """The inputs of :func:`barlow_twins` and :func:`barlow_twins_diagonal_blocks`, checked."""
    a, b = check_pair("a", a, "b", b)
    check_batch("barlow_twins", a)
    check_nonnegative("lambd", lambd)
    check_nonnegative("eps", eps)
    return a, b


def barlow_twins(a: Tensor, b: Tensor, lambd: float = 0.0051, eps: float = 1e-5) -> Tensor:
    """Barlow Twins loss of two views' embeddings a, b (N, D) -> scalar (official λ = 0.0051)."""
    a, b = _check(a, b, lambd, eps)
    c = cross_correlation(a, b, eps)
    diag = torch.diagonal(c)
    on_diag = (1 - diag).pow(2).sum()
    off_diag = c.pow(2).sum() - diag.pow(2).sum()
    return on_diag + lambd * off_diag


def barlow_twins_diagonal_blocks(a: Tensor, b: Tensor, lambd: float = 0.0051, eps: float = 1e-5) -> Tensor:
    """∂²/∂a_i² of :func:`barlow_twins` (a, b) with b held fixed: the (N, D, D) diagonal blocks of
    its Hessian in a, in closed form. Row j of c = âᵀb̂/N depends on feature j of a alone, so the
    loss is a sum over features and every block is diagonal:

        H_ii[j, j] = Σ_l 2 w_jl [G_ijl² + (c_jl − δ_jl) K_ijl],  w_jj = 1, w_jl = λ,

    with G_ijl = ∂c_jl/∂a_ij and K_ijl = ∂²c_jl/∂a_ij² from the batch standardisation
    â_rj = (a_rj − μ_j)/s_j, s_j = sqrt(var_j + eps) (biased):
    ∂â_rj/∂a_ij = (δ_ri − 1/N)/s_j − â_rj â_ij/(N s_j). Cost O(N D²); tested against autograd.
    """
    a, b = _check(a, b, lambd, eps)
    n, d = a.shape
    s = torch.sqrt(a.var(dim=0, unbiased=False) + eps)  # (D,)
    ah = (a - a.mean(dim=0)) / s  # (N, D)
    bh = batch_standardize(b, eps)
    c = ah.T @ bh / n  # (D, D)
    col = bh.sum(dim=0)  # S_l (zero up to round-off; kept for exactness)
    base = bh[:, None, :] - col / n  # (N, 1, D): B_il − S_l/N
    ai = ah[:, :, None]  # â_ij as (N, D, 1)
    sj = s[None, :, None]
    g = (base - ai * c[None]) / (n * sj)  # G_ijl (N, D, D)
    g_self = (1 - 1 / n) / s - ah**2 / (n * s)  # ∂â_ij/∂a_ij (N, D)
    k = (-ai * base / (n * sj**2) - ai * g / sj - g_self[:, :, None] * c[None] / sj
         + ai**2 * c[None] / (n * sj**2)) / n  # K_ijl
    eye = torch.eye(d, dtype=a.dtype, device=a.device)
    w = torch.full((d, d), float(lambd), dtype=a.dtype, device=a.device).fill_diagonal_(1.0)
    diag = (2 * w[None] * (g**2 + (c - eye)[None] * k)).sum(dim=2)  # (N, D)
    return torch.diag_embed(diag)


SPECS = (ObjectiveSpec("barlow_twins", barlow_twins, two_view=True, batch_coupled=True, cosine=False,
                       description="Barlow Twins, lambda=0.0051 (facebookresearch/barlowtwins main.py)",
                       diagonal_blocks=barlow_twins_diagonal_blocks),)

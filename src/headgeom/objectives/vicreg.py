"""VICReg (Bardes, Ponce, LeCun 2022), as in facebookresearch/vicreg main_vicreg.py VICReg.forward.

Invariance F.mse_loss(a, b) (mean over all N·D entries); variance: std = sqrt(var(dim=0, unbiased) + eps) of the centred
embeddings, hinge mean(relu(1 − std)) / 2 per branch; covariance: cov = xᵀx / (N − 1) of the
centred embeddings, sum of squared off-diagonal entries / D per branch, summed. Written
without in-place ops (the official ``pow_`` / ``div`` chain is rewritten functionally), and
the invariance term as ``(a − b).pow(2).mean()``, equal to F.mse_loss(a, b) but safe under
forward-over-reverse AD: torch's mse_loss double-backward fails inside ``jvp(grad(...))``
("ZeroTensors are immutable") when one argument is a constant.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_batch, check_nonnegative, check_pair
from headgeom.objectives.spec import ObjectiveSpec


def off_diagonal_sq_sum(m: Tensor) -> Tensor:
    """Σ_{i≠j} m_ij² of a square matrix (D, D) -> scalar."""
    return m.pow(2).sum() - torch.diagonal(m).pow(2).sum()


def variance_loss(x: Tensor, eps: float = 1e-4) -> Tensor:
    """mean_d relu(1 − sqrt(var_d(x) + eps)), unbiased variance over the batch; x (N, D)."""
    std = torch.sqrt(x.var(dim=0) + eps)
    return F.relu(1 - std).mean()


def covariance_loss(x: Tensor) -> Tensor:
    """Σ_{i≠j} cov_ij² / D with cov = x̄ᵀx̄ / (N − 1), x̄ the centred x (N, D)."""
    n, d = x.shape
    xc = x - x.mean(dim=0)
    cov = xc.T @ xc / (n - 1)
    return off_diagonal_sq_sum(cov) / d


def _check(a: Tensor, b: Tensor, *coefficients: float) -> tuple[Tensor, Tensor]:
    """The inputs of :func:`vicreg` and :func:`vicreg_diagonal_blocks`, checked."""
    a, b = check_pair("a", a, "b", b)
    check_batch("vicreg", a)
    for name, value in zip(("sim_coeff", "std_coeff", "cov_coeff", "eps"), coefficients):
        check_nonnegative(name, value)
    return a, b


def vicreg(
    a: Tensor,
    b: Tensor,
    sim_coeff: float = 25.0,
    std_coeff: float = 25.0,
    cov_coeff: float = 1.0,
    eps: float = 1e-4,
) -> Tensor:
    """VICReg loss of two views' embeddings a, b (N, D) -> scalar (official defaults 25/25/1)."""
    a, b = _check(a, b, sim_coeff, std_coeff, cov_coeff, eps)
    invariance = (a - b).pow(2).mean()  # F.mse_loss(a, b); see the module docstring
    ac, bc = a - a.mean(dim=0), b - b.mean(dim=0)
    std_loss = variance_loss(ac, eps) / 2 + variance_loss(bc, eps) / 2
    cov_loss = covariance_loss(ac) + covariance_loss(bc)
    return sim_coeff * invariance + std_coeff * std_loss + cov_coeff * cov_loss


def vicreg_diagonal_blocks(
    a: Tensor,
    b: Tensor,
    sim_coeff: float = 25.0,
    std_coeff: float = 25.0,
    cov_coeff: float = 1.0,
    eps: float = 1e-4,
) -> Tensor:
    """∂²/∂a_i² of :func:`vicreg` (a, b) with b held fixed: the (N, D, D) diagonal blocks of its
    Hessian in a, in closed form (the variance and covariance terms couple the rows).

    With c_i the centred row i, P_ii = 1 − 1/N, s_j = sqrt(var_j + eps) and C the covariance:

        invariance  2 λ / (N D) · I
        variance    μ / (2D) · diag_j[ 1{s_j < 1} ( (2 c_ij/(N−1))² / (4 s_j³) − 1/(N s_j) ) ]
        covariance  2 ν / D · [ (2‖c_i‖² I + 2 c_i c_iᵀ − 4 diag(c_i²)) / (N−1)² + 2 P_ii C_off / (N−1) ]

    (C_off: C without its diagonal; at s_j = 1 exactly the hinge's second derivative is taken
    as 0, as autograd's relu does). Cost O(N D²); tested against autograd.
    """
    a, b = _check(a, b, sim_coeff, std_coeff, cov_coeff, eps)
    n, d = a.shape
    c = a - a.mean(dim=0)
    eye = torch.eye(d, dtype=a.dtype, device=a.device)
    inv = (2.0 * sim_coeff / (n * d)) * eye
    s = torch.sqrt(c.var(dim=0) + eps)  # (D,)
    active = (s < 1).to(a.dtype)
    var_diag = active * ((2 * c / (n - 1)) ** 2 / (4 * s**3) - 1.0 / (n * s))  # (N, D)
    var = (std_coeff / (2 * d)) * torch.diag_embed(var_diag)
    cov = c.T @ c / (n - 1)
    c_off = cov - torch.diag(torch.diagonal(cov))
    sq = (c**2).sum(dim=1)[:, None, None]
    outer = (2 * sq * eye + 2 * c[:, :, None] * c[:, None, :] - 4 * torch.diag_embed(c**2)) / (n - 1) ** 2
    covariance = (2 * cov_coeff / d) * (outer + (2 * (1 - 1 / n) / (n - 1)) * c_off)
    return inv + var + covariance


SPECS = (ObjectiveSpec("vicreg", vicreg, two_view=True, batch_coupled=True, cosine=False,
                       description="VICReg 25/25/1 (facebookresearch/vicreg main_vicreg.py)",
                       diagonal_blocks=vicreg_diagonal_blocks),)

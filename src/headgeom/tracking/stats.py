"""Representation statistics tracked during training (PAPER.md §3 collapse grid, §4 pitfalls 3, 7).

All take a batch of outputs x (N, D) and compute in float64:

- ``representation_spread``: mean over dimensions of the per-dimension std (over samples,
  ddof=1) of the L2-normalised rows, the paper's collapse measure (a collapsed batch gives 0,
  isotropic unit vectors give about 1/sqrt(D)).
- ``covariance_condition``: λ_max / λ_min of the sample covariance over eigenvalues above
  ``rel_tol · λ_max`` (pitfall 3: with N ≤ D the covariance is singular; a clamped λ_min would
  report "λ_max · 1e7"). The count of eigenvalues above the tolerance is returned beside it, so a
  rank-deficient batch is visible.
- ``rankme``: RankMe (Garrido et al., ICML 2023), exp of the entropy of the normalised singular
  values of the (uncentred) embedding matrix, p_k = σ_k / ‖σ‖₁ + ε.

headgeom.eval had no RankMe / covariance helpers when these were written; these are small,
self-contained and tested against numpy formulas in tests/test_tracking_stats.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

DEFAULT_COV_REL_TOL = 1e-8
RANKME_EPS = 1e-7

COV_DEFINITION = (
    "sample covariance (ddof=1) of the raw outputs in float64; condition number = "
    "lambda_max / lambda_min over eigenvalues > rel_tol * lambda_max; cov_rank = their count"
)


def _check_batch(name: str, x: Tensor, min_rows: int = 2) -> Tensor:
    if not isinstance(x, Tensor) or x.ndim != 2:
        raise ValueError(f"{name} must be a tensor of shape (N, D); got {getattr(x, 'shape', type(x).__name__)}")
    if x.shape[0] < min_rows or x.shape[1] < 1:
        raise ValueError(
            f"{name} needs at least {min_rows} samples and one dimension; got shape {tuple(x.shape)} "
            "(use a larger probe batch)"
        )
    x = x.detach().to(torch.float64)
    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name} has {bad} non-finite entries of {x.numel()}; the model has diverged")
    return x


def representation_spread(x: Tensor) -> float:
    """Mean per-dimension std (ddof=1) of the L2-normalised rows of x (N, D); N ≥ 2."""
    x = _check_batch("x", x)
    xn = torch.nn.functional.normalize(x, dim=1)  # eps 1e-12: a zero row (dead head) stays zero
    return float(xn.std(dim=0, unbiased=True).mean())


@dataclass(frozen=True)
class CovarianceCondition:
    """λ_max / λ_min of the covariance over eigenvalues above ``tol`` = rel_tol · λ_max."""

    condition_number: float  # NaN when the covariance is zero (a fully collapsed batch)
    rank: int  # eigenvalues above tol
    lambda_max: float
    tol: float
    rel_tol: float


def covariance_condition(x: Tensor, rel_tol: float = DEFAULT_COV_REL_TOL) -> CovarianceCondition:
    """Condition number of the sample covariance (ddof=1) of x (N, D) over eigenvalues > rel_tol·λ_max."""
    if not (isinstance(rel_tol, (int, float)) and 0 < rel_tol < 1):
        raise ValueError(f"rel_tol must be in (0, 1); got {rel_tol!r} (default {DEFAULT_COV_REL_TOL})")
    x = _check_batch("x", x)
    xc = x - x.mean(dim=0, keepdim=True)
    # the nonzero eigenvalues of XcᵀXc and XcXcᵀ agree: take the smaller side (wide DINO heads)
    gram = xc.T @ xc if x.shape[1] <= x.shape[0] else xc @ xc.T
    lam = torch.linalg.eigvalsh(gram / (x.shape[0] - 1))
    lmax = float(lam[-1])
    if lmax <= 0.0:
        return CovarianceCondition(math.nan, 0, lmax, 0.0, float(rel_tol))
    tol = rel_tol * lmax
    kept = lam[lam > tol]
    return CovarianceCondition(lmax / float(kept[0]), int(kept.numel()), lmax, tol, float(rel_tol))


def rankme(x: Tensor, eps: float = RANKME_EPS) -> float:
    """RankMe of x (N, D): exp(−Σ p_k log p_k), p_k = σ_k / ‖σ‖₁ + eps, σ the singular values of x."""
    x = _check_batch("x", x, min_rows=1)
    s = torch.linalg.svdvals(x)
    total = float(s.sum())
    if total == 0.0:
        return math.nan
    p = s / total + eps
    return float(torch.exp(-(p * torch.log(p)).sum()))

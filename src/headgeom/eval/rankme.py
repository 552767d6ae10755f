"""RankMe and representation statistics of a feature matrix (docs/paper.md §3, §4 pitfalls 3-4).

- RankMe (Garrido et al. 2023, "RankMe: Assessing the downstream performance of pretrained
  self-supervised representations by their rank", eq. 1): with singular values σ_k of the
  embedding matrix Z (N, D) (not centred, as in the paper),
      p_k = σ_k / ‖σ‖₁ + ε,   RankMe(Z) = exp(−Σ_k p_k log p_k),   ε = 1e-7 (the paper's).
- spread: the mean over dimensions of the per-dimension std (over samples, unbiased) of the
  L2-normalised rows, as SimSiam (Chen & He 2021, §4.1) and the paper track it; a collapsed
  output gives 0, a uniform spread on the sphere about 1/√D.
- total variance of the L2-normalised rows, Σ_j Var_j = trace of their covariance: a
  dimension-fair companion of the per-dimension mean, whose backbone/head ratios scale with
  D (docs/paper.md §4 pitfall 4).
- covariance condition number: of the sample covariance (unbiased) of the raw features,
  κ = λ_max / λ_min over the eigenvalues λ > rtol · λ_max only (rtol stated, default 1e-6),
  with the number of kept eigenvalues beside it. With N ≤ D the covariance has rank ≤ N − 1
  and clamping its zero eigenvalues would give a meaningless κ (docs/paper.md §4 pitfall 3). This
  is the covariance of the representation, not of H_eff (pitfall 7).

Everything is computed in float64.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["RANKME_EPS", "covariance_condition", "rankme", "representation_stats",
           "spread_l2", "total_variance_l2", "uniform_spread"]

RANKME_EPS = 1e-7


def _check(z: Tensor, min_rows: int = 1) -> Tensor:
    if z.ndim != 2:
        raise ValueError(f"features must be 2-D (N, D), got shape {tuple(z.shape)}")
    if z.shape[0] < min_rows:
        raise ValueError(f"need at least {min_rows} samples, got {z.shape[0]}")
    z = z.detach().to(torch.float64)
    if not bool(torch.isfinite(z).all()):
        raise ValueError("features contain NaN/inf; the model produced non-finite outputs")
    return z


def rankme(z: Tensor, eps: float = RANKME_EPS) -> float:
    """RankMe of Z (N, D): exp of the entropy of the ε-shifted normalised singular values.

    A zero matrix (all σ = 0) has no spectrum to normalise; it returns 0.0 (rank 0).
    """
    z = _check(z)
    sigma = torch.linalg.svdvals(z)
    total = float(sigma.sum())
    if total == 0.0:
        return 0.0
    p = sigma / total + eps
    return float(torch.exp(-(p * p.log()).sum()))


def spread_l2(z: Tensor) -> float:
    """Mean over dimensions of the per-dimension std of the L2-normalised rows (N ≥ 2)."""
    u = F.normalize(_check(z, 2), dim=1)
    return float(u.std(dim=0, unbiased=True).mean())


def uniform_spread(k: int) -> float:
    """1/√k: the per-dimension std of directions uniform on the unit sphere in R^k (each coordinate has mean 0
    and variance 1/k), the head-independent reference of a collapse level (docs/paper.md §3.3)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"the output width k must be a positive int; got {k!r}")
    return 1.0 / math.sqrt(k)


def total_variance_l2(z: Tensor) -> float:
    """Σ_j Var_j(u) of the L2-normalised rows u (unbiased) = trace of their covariance."""
    u = F.normalize(_check(z, 2), dim=1)
    return float(u.var(dim=0, unbiased=True).sum())


def covariance_condition(z: Tensor, rtol: float = 1e-6) -> dict:
    """Condition number of the sample covariance of z (N, D) over eigenvalues > rtol·λ_max.

    Returns {"cond": κ, "n_kept": count, "lambda_max", "lambda_min_kept", "rtol"}; κ is NaN
    when the covariance is zero (constant features: nothing to condition).
    """
    if not 0 <= rtol < 1:
        raise ValueError(f"rtol must be in [0, 1), got {rtol!r}")
    z = _check(z, 2)
    zc = z - z.mean(dim=0)
    n, d = z.shape
    # eigenvalues of the covariance from the smaller Gram matrix when N < D (same nonzero ones)
    gram = (zc @ zc.T) if n < d else (zc.T @ zc)
    lam = torch.linalg.eigvalsh(gram / (n - 1))
    lam_max = float(lam.max())
    if lam_max <= 0:
        return {"cond": math.nan, "n_kept": 0, "lambda_max": lam_max,
                "lambda_min_kept": math.nan, "rtol": rtol}
    kept = lam[lam > rtol * lam_max]
    lam_min = float(kept.min())
    return {"cond": lam_max / lam_min, "n_kept": int(kept.numel()), "lambda_max": lam_max,
            "lambda_min_kept": lam_min, "rtol": rtol}


def representation_stats(z: Tensor, rtol: float = 1e-6) -> dict:
    """All of the above for one feature matrix: rankme, spread_l2, total_variance_l2,
    cov_cond, cov_n_kept, cov_rtol, dim, n."""
    cond = covariance_condition(z, rtol)
    return {"n": int(z.shape[0]), "dim": int(z.shape[1]), "rankme": rankme(z),
            "spread_l2": spread_l2(z), "total_variance_l2": total_variance_l2(z),
            "cov_cond": cond["cond"], "cov_n_kept": cond["n_kept"], "cov_rtol": rtol}

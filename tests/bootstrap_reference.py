"""The BCa interval written from its textbook formulas (Efron & Tibshirani 1993 §14.3; Davison &
Hinkley 1997 §3.2 for strata), apart from headgeom.orbits.bootstrap, for tests that recompute a
statistic resample by resample and leave-one-out by leave-one-out."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def bca_by_hand(theta: float, boot: Sequence[float], jack: Sequence[float], strata: Sequence | None = None,
                level: float = 0.95) -> tuple[list[float], float, float]:
    """([lo, hi], z0, a): z0 = Φ⁻¹(share of replicates below theta, ties ½), a from the leave-one-out
    values of each stratum (l = (n_h − 1)(mean − t), a = Σ n_h⁻³ Σ l³ / (6 (Σ n_h⁻² Σ l²)^1.5)),
    np.percentile at Φ(z0 + (z0 + z)/(1 − a(z0 + z))). [nan, nan] when fewer than (1 − level)/2
    of the replicates lie on one side of theta (the bootstrap is bias-dominated)."""
    boot, jack = np.asarray(boot, dtype=np.float64), np.asarray(jack, dtype=np.float64)
    strata = np.zeros(len(jack)) if strata is None else np.asarray(strata)
    tie = np.abs(boot - theta) <= 1e-9 * abs(theta)  # e.g. a resample drawing every image once
    share = np.mean((boot < theta) & ~tie) + 0.5 * np.mean(tie)
    alpha = 1 - level
    if not alpha / 2 <= share <= 1 - alpha / 2:
        return [np.nan, np.nan], np.nan, np.nan
    z0 = stats.norm.ppf(share)
    ls = [(len(v) - 1) * (v.mean() - v) for v in (jack[strata == s] for s in np.unique(strata)) if len(v) > 1]
    var = sum((l**2).sum() / len(l)**2 for l in ls)
    a = sum((l**3).sum() / len(l)**3 for l in ls) / (6 * var**1.5) if var > 0 else 0.0
    z = stats.norm.ppf([alpha / 2, 1 - alpha / 2])
    levels = stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z)))
    return np.percentile(boot, 100 * levels).tolist(), float(z0), float(a)

"""Percentile bootstrap over images for orbit metrics and their ratios (docs/paper.md §3, house rule 9).

Images are the independent units: each replicate draws N images with replacement (within each
class when labels are given: a stratified bootstrap, so every class stays present for D_inter).
One index matrix (B, N), drawn from a seeded generator, serves every metric of an analysis, so
the numerator and the denominator of a ratio (spread_z / spread_h, D_inter / D_intra) are always
resampled jointly. The interval is the percentile interval [q_{α/2}, q_{1−α/2}] of the B
replicate values (Efron & Tibshirani 1993, §13.3); replicates that are NaN (an undefined
metric on every drawn image) are left out and counted.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["bootstrap_counts", "bootstrap_indices", "ci_mean", "ci_ratio", "ci_statistic",
           "estimate", "percentile_ci", "replicate_means"]


def bootstrap_indices(n: int, n_boot: int, seed: int, strata: Tensor | None = None) -> Tensor:
    """(B, n) image indices, each row a resample with replacement; within strata when given."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"need at least one image to bootstrap, got n={n!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"the number of bootstrap replicates B must be a positive int, got {n_boot!r}")
    gen = torch.Generator().manual_seed(int(seed))
    if strata is None:
        return torch.randint(0, n, (n_boot, n), generator=gen)
    strata = torch.as_tensor(strata).reshape(-1)
    if strata.shape[0] != n:
        raise ValueError(f"strata (labels) must have one entry per image ({n}), got {strata.shape[0]}")
    idx = torch.empty(n_boot, n, dtype=torch.int64)
    for s in torch.unique(strata):  # positions of each class keep their class
        members = torch.nonzero(strata == s).reshape(-1)
        draw = torch.randint(0, members.numel(), (n_boot, members.numel()), generator=gen)
        idx[:, members] = members[draw]
    return idx


def bootstrap_counts(idx: Tensor, n: int) -> Tensor:
    """(B, n) float64 multiplicities of each image in each replicate (rows sum to n)."""
    counts = torch.zeros(idx.shape[0], n, dtype=torch.float64)
    counts.scatter_add_(1, idx, torch.ones_like(idx, dtype=torch.float64))
    return counts


def percentile_ci(samples: Tensor, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the finite replicate values; (nan, nan) when none is finite."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}; e.g. 0.95")
    s = samples.detach().to(torch.float64).reshape(-1)
    s = s[torch.isfinite(s)]
    if s.numel() == 0:
        return float("nan"), float("nan")
    alpha = 1.0 - level
    q = torch.quantile(s, torch.tensor([alpha / 2, 1 - alpha / 2], dtype=torch.float64))
    return float(q[0]), float(q[1])


def estimate(value: float, samples: Tensor, level: float = 0.95) -> dict:
    """JSON-able {value, ci: [lo, hi], level, n_boot, n_boot_undefined}."""
    lo, hi = percentile_ci(samples, level)
    s = samples.reshape(-1)
    return {"value": float(value), "ci": [lo, hi], "level": level, "n_boot": int(s.numel()),
            "n_boot_undefined": int((~torch.isfinite(s)).sum())}


def replicate_means(values: Tensor, counts: Tensor) -> Tensor:
    """Bootstrap replicates of the mean of per-image values (N,) under counts (B, N) -> (B,).

    Images whose value is NaN (an undefined metric) are left out of each replicate's mean.
    """
    v = torch.as_tensor(values).detach().to(torch.float64).cpu().reshape(-1)
    if v.shape[0] != counts.shape[1]:
        raise ValueError(f"values must be per-image, shape ({counts.shape[1]},), got {tuple(v.shape)}")
    ok = torch.isfinite(v)
    return (counts @ torch.where(ok, v, torch.zeros_like(v))) / (counts @ ok.to(torch.float64))


def _per_image(values: Tensor, n: int, name: str) -> Tensor:
    v = torch.as_tensor(values).detach().to(torch.float64).cpu()
    if v.ndim != 1 or v.shape[0] != n:
        raise ValueError(f"{name} must be per-image values of shape ({n},) matching the bootstrap "
                         f"indices, got shape {tuple(v.shape)}")
    return v


def ci_mean(values: Tensor, idx: Tensor, level: float = 0.95) -> dict:
    """Mean over images of per-image values (N,) (NaN images ignored) with its bootstrap CI."""
    v = _per_image(values, idx.shape[1], "values")
    return estimate(float(torch.nanmean(v)), replicate_means(v, bootstrap_counts(idx, v.shape[0])),
                    level)


def ci_ratio(num: Tensor, den: Tensor, idx: Tensor, level: float = 0.95) -> dict:
    """mean(num) / mean(den) over images, both resampled with the same indices, with its CI."""
    n = idx.shape[1]
    num, den = _per_image(num, n, "numerator"), _per_image(den, n, "denominator")
    counts = bootstrap_counts(idx, n)
    value = float(torch.nanmean(num) / torch.nanmean(den))
    return estimate(value, replicate_means(num, counts) / replicate_means(den, counts), level)


def ci_statistic(stat: Callable[[Tensor], Tensor], n: int, idx: Tensor,
                 level: float = 0.95) -> dict:
    """A statistic of weighted images: ``stat(weights)`` maps (B, n) multiplicities to (B,).

    The estimate is ``stat`` at unit weights; the replicates are ``stat`` at the bootstrap counts.
    """
    value = stat(torch.ones(1, n, dtype=torch.float64)).reshape(-1)[0]
    return estimate(float(value), stat(bootstrap_counts(idx, n)).reshape(-1), level)

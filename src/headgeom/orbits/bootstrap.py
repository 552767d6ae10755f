"""BCa bootstrap over images for orbit metrics and their ratios (docs/paper.md §3, house rule 9).

Images are the independent units: each replicate draws N images with replacement (within each
class when labels are given: a stratified bootstrap, so every class stays present for D_inter).
One index matrix (B, N), drawn from a seeded generator, serves every metric of an analysis, so
the numerator and the denominator of a ratio (spread_z / spread_h, D_inter / D_intra) are always
resampled jointly; the N leave-one-out samples (:class:`Resamples`) are evaluated with the same
statistics, so a ratio's jackknife values are joint too.

The interval is the BCa interval (bias-corrected and accelerated; Efron & Tibshirani 1993,
§14.3): the quantiles of the B replicate values at

    α₁,₂ = Φ(z₀ + (z₀ + z_{α/2, 1−α/2}) / (1 − a (z₀ + z_{α/2, 1−α/2}))),

with z₀ = Φ⁻¹(share of replicates below the estimate, ties counted ½) the median bias and a the
acceleration from the jackknife over images, stratified (Davison & Hinkley 1997, §3.2 and §5.3):
l_hj = (n_h − 1)(mean_j t₋hj − t₋hj) for image j of stratum h (t₋hj: the statistic without it),

    a = Σ_h n_h⁻³ Σ_j l_hj³ / (6 (Σ_h n_h⁻² Σ_j l_hj²)^{3/2}).

With z₀ = a = 0 it is the percentile interval. Why not the percentile interval: with few images
per class a resample repeats images, which biases a statistic like D_inter (a distance between
noisy centroids) further upward, and the percentile interval moves *with* that bias, above the
estimate (the authors' ResNet-18 orbits: D_inter 0.432, percentile [0.465, 0.610]); BCa moves
against it. BCa contains its estimate exactly when z₀ lies in [z_{α/2}, z_{1−α/2}] (the same
condition under which the percentile interval does): when fewer than α/2 of the replicates fall
on one side of the estimate, the bootstrap says the statistic's bias exceeds its spread, and no
interval read from these replicates is honest. Then the interval is NaN and ``ci_undefined`` says
why (a verdict reading it sees "undefined", never a side); so every interval reported contains
its estimate. Replicates that are NaN or infinite (an undefined metric on every drawn image) are
left out and counted; a leave-one-out value that is not finite leaves a = 0 (the BC interval,
said in ``method``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist

import torch
from torch import Tensor

__all__ = ["METHOD", "Resamples", "acceleration", "bca_interval", "bootstrap_counts",
           "bootstrap_indices", "ci_mean", "ci_ratio", "ci_statistic", "estimate",
           "jackknife_weights", "percentile_ci", "replicate_means"]

METHOD = "BCa"  # the interval every estimate of this module reports (the module docstring)
_NORMAL = NormalDist()
TIE = 1e-9  # replicates within this relative distance of the estimate count as ties


def bootstrap_indices(n: int, n_boot: int, seed: int, strata: Tensor | None = None) -> Tensor:
    """(B, n) image indices, each row a resample with replacement; within strata when given."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"need at least one image to bootstrap, got n={n!r}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"the number of bootstrap replicates B must be a positive int, got {n_boot!r}")
    gen = torch.Generator().manual_seed(int(seed))
    if strata is None:
        return torch.randint(0, n, (n_boot, n), generator=gen)
    strata = _strata(strata, n)
    idx = torch.empty(n_boot, n, dtype=torch.int64)
    for s in torch.unique(strata):  # positions of each class keep their class
        members = torch.nonzero(strata == s).reshape(-1)
        draw = torch.randint(0, members.numel(), (n_boot, members.numel()), generator=gen)
        idx[:, members] = members[draw]
    return idx


def _strata(strata: Tensor, n: int) -> Tensor:
    strata = torch.as_tensor(strata).reshape(-1)
    if strata.shape[0] != n:
        raise ValueError(f"strata (labels) must have one entry per image ({n}), got {strata.shape[0]}")
    return strata


def bootstrap_counts(idx: Tensor, n: int) -> Tensor:
    """(B, n) float64 multiplicities of each image in each replicate (rows sum to n)."""
    counts = torch.zeros(idx.shape[0], n, dtype=torch.float64)
    counts.scatter_add_(1, idx, torch.ones_like(idx, dtype=torch.float64))
    return counts


def jackknife_weights(n: int) -> Tensor:
    """(n, n) float64 image weights of the n leave-one-out samples: row j is 1 except 0 at image j."""
    return 1.0 - torch.eye(n, dtype=torch.float64)


@dataclass(frozen=True)
class Resamples:
    """The B bootstrap resamples (counts (B, N)) and the N leave-one-out samples of one analysis.

    ``weights`` (B + N, N) stacks both: evaluate every statistic at its rows (a ratio row by
    row, so it is resampled jointly), then :meth:`estimate` splits them into the bootstrap
    replicates and the jackknife values. ``strata`` (N,) are the class labels the counts were
    drawn within (None: unstratified).
    """

    counts: Tensor
    strata: Tensor | None = None
    weights: Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        counts = torch.as_tensor(self.counts, dtype=torch.float64)
        if counts.ndim != 2 or counts.shape[0] < 1 or counts.shape[1] < 1:
            raise ValueError(f"bootstrap counts must have shape (B, N) with B, N >= 1, got {tuple(counts.shape)}")
        n = counts.shape[1]
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "strata", None if self.strata is None else _strata(self.strata, n))
        object.__setattr__(self, "weights", torch.cat([counts, jackknife_weights(n)]))

    @property
    def n_boot(self) -> int:
        return int(self.counts.shape[0])

    def estimate(self, value: float, replicates: Tensor, level: float = 0.95, levels: tuple[float, ...] = ()) -> dict:
        """:func:`estimate` of ``value`` from a statistic's values at the rows of ``weights`` (intervals also at
        ``levels``, in ``ci_at``)."""
        r = torch.as_tensor(replicates).reshape(-1)
        if r.shape[0] != self.weights.shape[0]:
            raise ValueError(f"replicates must be the statistic at every row of Resamples.weights "
                             f"({self.weights.shape[0]} = {self.n_boot} bootstrap + {self.counts.shape[1]} "
                             f"leave-one-out), got {r.shape[0]}")
        return estimate(value, r[:self.n_boot], level, jackknife=r[self.n_boot:], strata=self.strata, levels=levels)


def _level(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}; e.g. 0.95")
    return float(level)


def _finite(samples: Tensor) -> Tensor:
    s = torch.as_tensor(samples).detach().to(torch.float64).reshape(-1)
    return s[torch.isfinite(s)]


def percentile_ci(samples: Tensor, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the finite replicate values; (nan, nan) when none is finite."""
    alpha = 1.0 - _level(level)
    s = _finite(samples)
    if s.numel() == 0:
        return float("nan"), float("nan")
    q = torch.quantile(s, torch.tensor([alpha / 2, 1 - alpha / 2], dtype=torch.float64))
    return float(q[0]), float(q[1])


def acceleration(jackknife: Tensor, strata: Tensor | None = None) -> float:
    """The BCa acceleration a from leave-one-out values (N,) (module docstring); NaN when a value
    in a stratum of two or more images is not finite, 0 when every value is equal."""
    t = torch.as_tensor(jackknife).detach().to(torch.float64).reshape(-1)
    groups = [torch.arange(t.shape[0])] if strata is None else \
        [torch.nonzero(_strata(strata, t.shape[0]) == s).reshape(-1) for s in torch.unique(strata)]
    skew = var = 0.0
    for members in groups:
        n_h = members.numel()
        if n_h < 2:  # a single image: nothing to resample within its stratum
            continue
        v = t[members]
        if not bool(torch.isfinite(v).all()):
            return math.nan
        lh = (n_h - 1) * (v.mean() - v)
        skew += float(lh.pow(3).sum()) / n_h**3
        var += float(lh.pow(2).sum()) / n_h**2
    return skew / (6.0 * var**1.5) if var > 0 else 0.0


def _share_below(s: Tensor, value: float) -> float:
    """Share of replicates below ``value``, those within ``TIE`` (relative) of it counted ½: a
    resample that redraws every image once reproduces the estimate up to rounding."""
    tol = TIE * abs(value)
    below = int((s < value - tol).sum())
    ties = int(((s - value).abs() <= tol).sum())
    return (below + 0.5 * ties) / s.numel()


def bca_interval(value: float, samples: Tensor, jackknife: Tensor, strata: Tensor | None = None,
                 level: float = 0.95) -> dict:
    """{"ci": [lo, hi], "method", "z0", "acceleration"} and, when no interval is honest,
    "ci_undefined" (the reason; ci NaN). The module docstring gives the formulas."""
    alpha = 1.0 - _level(level)
    s = _finite(samples)
    out: dict = {"ci": [math.nan, math.nan], "method": METHOD, "z0": None, "acceleration": None}
    value = float(value)
    if s.numel() == 0:
        return {**out, "ci_undefined": "no bootstrap replicate is finite"}
    if not math.isfinite(value):
        return {**out, "ci_undefined": f"the estimate is {value}"}
    p = _share_below(s, value)
    if not alpha / 2 <= p <= 1 - alpha / 2:
        return {**out, "ci_undefined": _biased(p, alpha)}
    z0 = _NORMAL.inv_cdf(p)  # 0 < α/2 <= p <= 1 − α/2 < 1
    a = acceleration(jackknife, strata)
    out.update(z0=z0, acceleration=None if math.isnan(a) else a)
    if math.isnan(a):
        a = 0.0
        out["method"] = "BC (acceleration undefined: a leave-one-out value is not finite)"
    levels = []
    for z in (_NORMAL.inv_cdf(alpha / 2), _NORMAL.inv_cdf(1 - alpha / 2)):
        den = 1.0 - a * (z0 + z)
        if den <= 0:
            return {**out, "ci_undefined": f"acceleration a = {a:.3g} too large for the BCa levels "
                                           f"(1 - a(z0 + z) = {den:.3g} <= 0)"}
        levels.append(_NORMAL.cdf(z0 + (z0 + z) / den))
    lo, hi = (float(q) for q in torch.quantile(s, torch.tensor(levels, dtype=torch.float64)))
    if not lo <= value <= hi:  # interpolation between replicates at |z0| near z_{1-α/2}
        return {**out, "ci_undefined": _biased(p, alpha)}
    out["ci"] = [lo, hi]
    return out


def _biased(p: float, alpha: float) -> str:
    return (f"bias-dominated: {p:.2%} of the bootstrap replicates lie below the estimate, outside "
            f"[{alpha / 2:.1%}, {1 - alpha / 2:.1%}]; the resampled statistic's bias exceeds its "
            "spread (e.g. D_inter with few images per class), so no interval is read from it")


def estimate(value: float, samples: Tensor, level: float = 0.95, *, jackknife: Tensor,
             strata: Tensor | None = None, levels: tuple[float, ...] = ()) -> dict:
    """JSON-able {value, ci: [lo, hi], level, n_boot, n_boot_undefined, method, z0, acceleration}
    (and ci_undefined when the interval is NaN): the BCa interval of :func:`bca_interval` from
    the B bootstrap replicates ``samples`` and the N leave-one-out values ``jackknife``. With
    ``levels``, also ``ci_at``: {"0.9": [lo, hi], ...}, the same interval at each of those levels
    (key: the level as ``f"{level:g}"``; NaN bounds where it is undefined), so a verdict can be
    re-read at another level (headgeom.claims.single_run)."""
    s = torch.as_tensor(samples).reshape(-1)
    bca = bca_interval(value, s, jackknife, strata, level)
    out = {"value": float(value), "ci": bca.pop("ci"), "level": level, "n_boot": int(s.numel()),
           "n_boot_undefined": int((~torch.isfinite(s)).sum()), **bca}
    if levels:
        out["ci_at"] = {f"{float(lv):g}": bca_interval(value, s, jackknife, strata, lv)["ci"] for lv in levels}
    return out


def replicate_means(values: Tensor, counts: Tensor) -> Tensor:
    """Bootstrap replicates of the mean of per-image values (N,) under counts (B, N) -> (B,).

    Images whose value is NaN (an undefined metric) are left out of each replicate's mean; any
    non-negative weights work (the leave-one-out rows of :class:`Resamples` too).
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


def ci_mean(values: Tensor, idx: Tensor, level: float = 0.95, strata: Tensor | None = None) -> dict:
    """Mean over images of per-image values (N,) (NaN images ignored) with its bootstrap CI.

    ``strata``: the labels ``idx`` was drawn within (the acceleration's jackknife is stratified).
    """
    v = _per_image(values, idx.shape[1], "values")
    rs = Resamples(bootstrap_counts(idx, v.shape[0]), strata)
    return rs.estimate(float(torch.nanmean(v)), replicate_means(v, rs.weights), level)


def ci_ratio(num: Tensor, den: Tensor, idx: Tensor, level: float = 0.95,
             strata: Tensor | None = None) -> dict:
    """mean(num) / mean(den) over images, both resampled with the same indices, with its CI."""
    n = idx.shape[1]
    num, den = _per_image(num, n, "numerator"), _per_image(den, n, "denominator")
    rs = Resamples(bootstrap_counts(idx, n), strata)
    value = float(torch.nanmean(num) / torch.nanmean(den))
    return rs.estimate(value, replicate_means(num, rs.weights) / replicate_means(den, rs.weights), level)


def ci_statistic(stat: Callable[[Tensor], Tensor], n: int, idx: Tensor, level: float = 0.95,
                 strata: Tensor | None = None) -> dict:
    """A statistic of weighted images: ``stat(weights)`` maps (R, n) multiplicities to (R,).

    The estimate is ``stat`` at unit weights; the replicates are ``stat`` at the bootstrap counts
    and at the leave-one-out weights (:class:`Resamples`).
    """
    rs = Resamples(bootstrap_counts(idx, n), strata)
    value = stat(torch.ones(1, n, dtype=torch.float64)).reshape(-1)[0]
    return rs.estimate(float(value), stat(rs.weights).reshape(-1), level)

"""C11's rule, "a quantity increases with head depth" (docs/paper.md §2 C11), written once for
headgeom's own runs (headgeom.experiments.c11_depth) and the authors' released depth ablation
(headgeom.experiments.released_results): a paired difference over seeds between the deepest and the
shallowest head, with a Student-t interval, a margin and monotone depth means; for accuracies,
"protects the backbone better" is judged only when some depth's backbone has learned the classes
(mean accuracy above chance + a floor). Pure functions of the per-seed values.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["ACCURACY_MARGIN", "COMPRESSION_MARGIN", "LEARNED_FLOOR", "RULE", "increase_test", "learned_floor_check"]

COMPRESSION_MARGIN = 1.1  # ratio of compressions (depth max / depth min) counted as an increase
ACCURACY_MARGIN = 0.01  # accuracy difference (fraction) counted as an increase
LEARNED_FLOOR = 0.05  # backbone accuracy above chance needed before "protection" is judged


def increase_test(by_depth: dict[int, dict[int, float]], *, log: bool, margin: float,
                  level: float = 0.95) -> dict[str, Any]:
    """Does a per-seed quantity increase with depth? ``by_depth``: depth -> {seed: value}.

    Seeds present (finite, and > 0 when ``log``) at every depth are paired; diff = g(v at the
    largest depth) − g(v at the smallest), g = log or identity; ``margin`` is on the same scale as
    diff (pass log(ratio) for ratios). Returns the verdict (module docstring rule), the reason, and
    the numbers: n, mean_diff, ci, means per depth, monotone, spearman (pooled over every point),
    per-seed monotone fraction."""
    import numpy as np
    from scipy import stats

    depths = sorted(by_depth)

    def ok(v: Any) -> bool:
        return isinstance(v, (int, float)) and math.isfinite(v) and (v > 0 or not log)

    seeds = sorted(set.intersection(*[{s for s, v in by_depth[d].items() if ok(v)} for d in depths])) if depths else []
    g = (lambda v: math.log(v)) if log else (lambda v: float(v))
    out: dict[str, Any] = {"depths": depths, "paired_seeds": seeds, "n": len(seeds), "log": log, "margin": margin,
                           "level": level}
    if len(depths) < 2 or len(seeds) < 2:
        out.update(verdict="inconclusive", reason=f"{len(seeds)} seed(s) measured at every depth {depths}; "
                                                  "the rule needs >= 2 paired seeds")
        return out
    table = np.array([[g(by_depth[d][s]) for d in depths] for s in seeds])  # (seeds, depths)
    diff = table[:, -1] - table[:, 0]
    n, mean = len(diff), float(diff.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * diff.std(ddof=1) / math.sqrt(n))
    means = table.mean(axis=0)
    monotone = bool(np.all(np.diff(means) > 0))
    pooled = (stats.spearmanr(np.repeat([depths], n, axis=0).ravel(), table.ravel()).statistic
              if np.ptp(table) > 0 else math.nan)  # undefined for constant values
    out.update(mean_diff=mean, ci=[mean - half, mean + half], diffs=diff.tolist(),
               means={d: float(m) for d, m in zip(depths, means)}, monotone=monotone,
               spearman=None if not math.isfinite(pooled) else float(pooled),
               seeds_monotone=float(np.mean(np.all(np.diff(table, axis=1) > 0, axis=1))))
    lo, hi = out["ci"]
    if lo > 0 and mean > margin and monotone:
        verdict = "supported"
    elif hi < margin:
        verdict = "not supported"
    else:
        verdict = "inconclusive"
    out.update(verdict=verdict, reason=(f"paired difference depth {depths[-1]} - depth {depths[0]} = {mean:.3g}, "
                                        f"{level:.0%} t-CI [{lo:.3g}, {hi:.3g}] over {n} seeds, margin {margin:.3g}, "
                                        f"depth means {'' if monotone else 'not '}monotone increasing"))
    return out


RULE = ("per seed, diff = {g}(value at depth {dmax}) - {g}(value at depth {dmin}); {level:.0%} Student-t CI of the "
        "mean diff over the seeds measured at every depth; supported if the CI's lower end > 0, the mean diff > "
        "{margin} and the per-depth means increase monotonically; not supported if the CI's upper end < {margin} "
        "(an increase of at least the margin is excluded); inconclusive otherwise (the seed spread covers the "
        "difference) or with < 2 paired seeds")


def learned_floor_check(test: dict[str, Any], by_depth: dict[int, dict[int, float]], chance: float,
                        floor: float) -> str:
    """The accuracy claims' premise: the best depth's mean backbone accuracy must exceed ``chance`` +
    ``floor`` (a backbone that has not learned the classes has nothing to protect); otherwise ``test``'s
    verdict becomes inconclusive. Returns the sentence the criterion quotes."""
    means = []
    for d in by_depth:
        xs = [float(v) for v in by_depth[d].values() if isinstance(v, (int, float)) and math.isfinite(v)]
        means.append(sum(xs) / len(xs) if xs else math.nan)
    best = max((v for v in means if math.isfinite(v)), default=math.nan)
    text = f"; chance accuracy {chance:.3g}, best depth mean {best:.3g}, needed > chance + {floor:g} before the rule applies"
    if not best > chance + floor:  # NaN (nothing measured) counts as not met
        test["verdict"] = "inconclusive"
        text += " (not met: the backbone has not learned the classes, nothing to protect)"
    return text

"""The single-run standard: what one trained model can show, and how (docs/experiments.md, "The single-run
standard"; docs/paper.md §3.8).

One run is one trained model: a seed of headgeom's own runs, or the authors' one released model per setting.
Every claim judged from runs (C9, C11, C12, ours and the authors') reads each run by the same three steps,
then takes the same majority over runs:

1. **Within-run uncertainty over the test images.** Orbit measures carry a BCa bootstrap interval over the
   orbit images (stratified by class; headgeom.orbits.bootstrap). Probe accuracies carry the normal interval
   of a difference of two accuracies on n test examples (:func:`gap_interval`) with the largest standard error
   any pairing of the two probes' per-example outcomes allows, (sqrt(a(1-a)) + sqrt(b(1-b))) / sqrt(n): the
   accuracies are stored, the per-example outcomes are not (neither in the authors' files nor in headgeom's
   probe results), so no paired bootstrap can be formed and this bound holds whatever the pairing.
2. **A null the measurement could fall on.** Where the claim's null is a number (a gap of 0 between two
   accuracies; a selectivity of 1, orbits shrinking as much as the whole cloud), the interval is read against
   it. Where the architecture alone produces the effect (a head that learned nothing already changes
   selectivity), the null is the distribution of random heads of the same architecture on the same stored z
   (headgeom.orbits.random_heads): the trained value must exceed the controls' ``percentile`` and its interval,
   resampled jointly with the controls, must exclude the controls' median.
3. **A margin.** A run supports when the interval lies above the null and the estimate exceeds the null by
   the margin (the smallest effect that counts); it refutes when the interval lies below null + margin (an
   effect as large as the margin is excluded); else it is undecided (:func:`run_outcome`).

Over runs (:func:`runs_verdict`): supported / not supported when at least ``majority`` of the runs support /
refute, else inconclusive. With one run (the authors') the verdict is that run's outcome: it speaks for that
trained model; the spread between seeds, which no single run shows, would need more seeds.

The conventions every row names (and sweeps, headgeom.claims.robustness) are the CI level, the margin, the
control percentile and the control's BatchNorm statistics, the majority and, for accuracy claims, the learned
floor. Pure functions; nothing here resamples (the intervals come in with the measures).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from statistics import NormalDist
from typing import Any

from headgeom.claims.robustness import Robustness, sweep
from headgeom.claims.verdict import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Verdict

__all__ = ["CONTROL_BN", "CONTROL_BNS", "CONTROL_DRAWS", "CONTROL_PERCENTILE", "LEVEL", "LEVELS", "MAJORITIES",
           "MAJORITY", "NOT_SWEPT", "PERCENTILES", "REFUTES", "STANDARD", "SUPPORTS", "UNDECIDED", "DECIDERS", "above_controls",
           "gap_interval", "interval_at", "level_key", "over_runs", "quantile", "robustness", "run_outcome",
           "runs_verdict", "side", "what_would_decide"]

SUPPORTS, REFUTES, UNDECIDED = "supports", "refutes", "undecided"
LEVEL = 0.95  # the CI level a row is judged at
LEVELS = (0.9, 0.95, 0.99)  # the levels every interval is also given at, so the verdict can be swept
CONTROL_DRAWS = 20  # random heads per control
CONTROL_PERCENTILE = 0.95  # the trained value must exceed this quantile of the controls
PERCENTILES = (0.5, 0.9, 0.95, 1.0)  # swept; 1.0 = above every control draw
CONTROL_BN = "stored"  # the controls' BatchNorm statistics: estimated on the stored features (or "init")
CONTROL_BNS = ("stored", "init")
MAJORITY = 0.8  # share of runs that must agree
MAJORITIES = (0.5, 0.8, 1.0)

STANDARD = ("single-run standard (headgeom.claims.single_run): each run (one trained model) is read by its "
            "within-run interval over test images, against the claim's null (a fixed value, or random heads of the "
            "same architecture on the same stored z where the architecture alone produces the effect) and a margin; "
            "a run supports when the interval lies above the null and the estimate clears the margin, refutes when "
            "the interval excludes an effect as large as the margin, else is undecided; over runs the majority "
            "decides, and one run speaks for that trained model only (seed-to-seed spread needs more seeds)")


NOT_SWEPT = ("Not swept, as they need recomputation: the number of random heads per control and of bootstrap "
             "replicates over images (the control's BatchNorm statistics, which also need it, are computed both ways "
             "and swept)")


def level_key(level: float) -> str:
    """The JSON key of an interval at ``level`` in an estimate's ``ci_at`` ("0.9", "0.95", "0.99")."""
    return f"{float(level):g}"


def interval_at(est: Mapping[str, Any] | None, level: float = LEVEL) -> tuple[float, float] | None:
    """(lo, hi) of an estimate at ``level``: its ``ci_at[level]`` or, at its own level, its ``ci``; None when
    the estimate has no interval there (or a bound is missing or NaN)."""
    if not isinstance(est, Mapping):
        return None
    ci = (est.get("ci_at") or {}).get(level_key(level))
    if ci is None and est.get("level") is not None and math.isclose(float(est["level"]), float(level)):
        ci = est.get("ci")
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return None
    lo, hi = float(ci[0]), float(ci[1])
    return None if math.isnan(lo) or math.isnan(hi) else (lo, hi)


def side(interval: tuple[float, float] | None, threshold: float) -> str:
    """"above" (lo > t), "below" (hi < t), "straddles", or "undefined" (no interval)."""
    if interval is None:
        return "undefined"
    lo, hi = interval
    return "above" if lo > threshold else "below" if hi < threshold else "straddles"


def run_outcome(value: float, interval: tuple[float, float] | None, *, null: float, margin: float = 0.0) -> str:
    """One run's outcome for an effect measured as ``value`` with ``interval`` (module docstring, step 3):
    "supports" when the interval lies above ``null`` and value > null + margin, "refutes" when the interval
    lies below null + margin, else "undecided" (so is a missing interval). ``margin`` >= 0, on the value's
    scale (pass log ratios for ratios)."""
    if margin < 0:
        raise ValueError(f"a margin is the smallest effect that counts, >= 0; got {margin!r}")
    if interval is None or not math.isfinite(float(value)):
        return UNDECIDED
    lo, hi = interval
    if lo > null and value > null + margin:
        return SUPPORTS
    if hi < null + margin:
        return REFUTES
    return UNDECIDED


def quantile(values: Sequence[float], p: float) -> float:
    """The ``p`` quantile of ``values`` (linear interpolation between order statistics, numpy's default);
    p = 1 is the largest value. NaN for no finite value."""
    xs = sorted(float(v) for v in values if v is not None and math.isfinite(float(v)))
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a quantile level is in [0, 1]; got {p!r}")
    if not xs:
        return math.nan
    pos = p * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def above_controls(value: float, controls: Sequence[float], percentile: float = CONTROL_PERCENTILE) -> bool:
    """Does ``value`` exceed the ``percentile`` quantile of the control draws (False with no control)?"""
    q = quantile(controls, percentile)
    return math.isfinite(q) and float(value) > q


def gap_interval(acc_a: float, acc_b: float, n: int | None, level: float = LEVEL) -> tuple[float, float] | None:
    """Interval of acc_a − acc_b, two accuracies (fractions) on the same ``n`` test examples, at ``level``:
    gap ± z · (sqrt(a(1−a)) + sqrt(b(1−b))) / sqrt(n), the largest standard error any pairing of the two
    per-example outcomes allows (correlation −1); an unpaired or positively correlated pair has a smaller one.
    None when n is unknown."""
    if n is None:
        return None
    if isinstance(n, bool) or int(n) < 1:
        raise ValueError(f"a test-set size is a count >= 1; got {n!r}")
    for a in (acc_a, acc_b):
        if not 0.0 <= a <= 1.0:
            raise ValueError(f"an accuracy is a fraction in [0, 1]; got {a!r}")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    se = (math.sqrt(acc_a * (1 - acc_a)) + math.sqrt(acc_b * (1 - acc_b))) / math.sqrt(int(n))
    gap = acc_a - acc_b
    return gap - z * se, gap + z * se


def runs_verdict(outcomes: Sequence[str], majority: float = MAJORITY) -> tuple[str, float, float]:
    """(verdict, share of runs supporting, share refuting): supported / not supported when at least
    ``majority`` of the runs support / refute, else (or with no run) inconclusive."""
    n = len(outcomes)
    sup = sum(o == SUPPORTS for o in outcomes) / n if n else 0.0
    ref = sum(o == REFUTES for o in outcomes) / n if n else 0.0
    verdict = (INCONCLUSIVE if not n else SUPPORTED if sup >= majority
               else NOT_SUPPORTED if ref >= majority else INCONCLUSIVE)
    return verdict, sup, ref


DECIDERS = {
    "interval": "a narrower interval (more test images: orbit images per class, or probe test examples)",
    "seeds": "more seeds (the runs disagree)",
    "budget": "a training budget at which the backbone learns the task (the small or paper preset)",
    "head": "the trained head's weights, which the released files do not hold",
    "monotone": "more runs per depth (a step between depths lies within the noise)",
    "control": "a trained head further from random heads of its architecture (more training)",
}
"""What would decide an undecided run, by cause; :func:`what_would_decide` words a set of them."""


def what_would_decide(causes: Sequence[str]) -> str:
    """"; what would decide it: ..." for the causes (keys of :data:`DECIDERS`), "" for none."""
    known = [DECIDERS[c] for c in dict.fromkeys(causes)]
    return "; what would decide it: " + "; or ".join(known) if known else ""


def over_runs(outs: Sequence[tuple[str, str, Sequence[str]]], headline: str, majority: float) -> Verdict:
    """The verdict over runs from each run's (outcome, why, causes of an undecided outcome), with the reason:
    the shares, every run's outcome and, when inconclusive, what would decide it (runs that disagree: more
    seeds)."""
    verdict, sup, ref = runs_verdict([o for o, _, _ in outs], majority)
    reason = (f"{sup:.0%} of {len(outs)} run(s) support, {ref:.0%} refute; per run: "
              + "; ".join(f"{o} ({why})" for o, why, _ in outs))
    if verdict == INCONCLUSIVE:
        causes = [c for o, _, cs in outs if o == UNDECIDED for c in cs]
        if sup and ref or (len(outs) > 1 and (sup or ref)):
            causes.append("seeds")
        reason += what_would_decide(causes)
    return Verdict(verdict, headline, reason)


def robustness(rule: Callable[..., Verdict], at: Mapping[str, Any],
               ranges: Mapping[str, Sequence[Any]]) -> dict[str, Robustness]:
    """The verdict of ``rule(**at)`` over each convention's range, the others held at ``at``: one
    :class:`~headgeom.claims.robustness.Robustness` per convention of ``ranges`` (the row's own value added
    to the range when missing)."""
    out = {}
    for name, values in ranges.items():
        own = at[name]
        values = tuple(values) if own in values else tuple(sorted({*values, own}, key=_order))
        out[name] = sweep(lambda v, name=name: rule(**{**at, name: v}), own, values)
    return out


def _order(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))

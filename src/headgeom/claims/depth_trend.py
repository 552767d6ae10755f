"""C11's rules (docs/paper.md §2 C11), written once for headgeom's own runs (headgeom.experiments.c11_depth)
and the authors' released depth ablation (headgeom.experiments.released_results), under the single-run
standard (headgeom.claims.single_run). The paper's "deeper heads compress more and protect the backbone
better" is two claims, each with its own rule.

A run is one set of heads of every depth trained alike: one seed of headgeom's runs (depths paired by seed),
the authors' one model per depth.

- **Deeper heads compress more** (:func:`compression_outcome`). The effect is the learned selectivity x_d =
  selectivity of the trained head of depth d / the median selectivity of random heads of the same
  architecture on the same stored z (headgeom.orbits.random_heads); per run, diff = log x(depth max) −
  log x(depth min), with a BCa interval over the orbit images resampled jointly at every depth
  (headgeom.orbits.random_heads.excess_increase). The run supports when the interval lies above 0, diff >
  log(margin), the trained heads' increase log s(max) − log s(min) exceeds the ``percentile`` of the random
  heads' increases, and (when ``monotone``) x_d increases with every step of depth; it refutes when the
  interval lies below log(margin); else undecided.
- **Deeper heads protect the backbone better** (:func:`accuracy_outcome`). diff = backbone probe accuracy
  at depth max − at depth min, with :func:`~headgeom.claims.single_run.gap_interval` on the n test
  examples; supports / refutes as above (margin in accuracy), with the monotone condition on the accuracies;
  undecided, whatever the numbers, when no depth's backbone accuracy exceeds chance + ``learned_floor`` (a
  backbone that learned nothing has nothing to protect: the claim's premise).

Over runs: :func:`~headgeom.claims.single_run.runs_verdict`. Pure functions of the per-run measures.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from headgeom.claims.estimates import measured
from headgeom.claims.single_run import (CONTROL_BN, CONTROL_BNS, CONTROL_PERCENTILE, LEVEL, LEVELS, MAJORITIES,
                                        MAJORITY, PERCENTILES, SUPPORTS, UNDECIDED, gap_interval, interval_at,
                                        over_runs, quantile, robustness, run_outcome)
from headgeom.claims.verdict import Verdict

__all__ = ["ACCURACY_MARGIN", "ACCURACY_MARGINS", "COMPRESSION_MARGIN", "COMPRESSION_MARGINS", "LEARNED_FLOOR",
           "LEARNED_FLOORS", "accuracy_judgement", "accuracy_outcome", "accuracy_verdict", "compression_judgement",
           "compression_outcome", "compression_verdict", "increase_measures", "increasing", "learned"]

COMPRESSION_MARGIN = 1.1  # ratio of learned selectivities (depth max / depth min) counted as an increase
COMPRESSION_MARGINS = (1.0, 1.1, 1.25, 1.5)  # swept
ACCURACY_MARGIN = 0.01  # accuracy difference (fraction) counted as an increase
ACCURACY_MARGINS = (0.0, 0.01, 0.02, 0.05)  # swept (C12's margin too)
LEARNED_FLOOR = 0.05  # backbone accuracy above chance needed before "protection" is judged
LEARNED_FLOORS = (0.02, 0.05, 0.1)  # swept (C12's floor too)
MONOTONE = (True, False)  # swept: must every step of depth increase, or only the deepest against the shallowest?


def increasing(values_by_depth: Mapping[int, float]) -> bool:
    """Do the values increase with every step of depth (strictly, in depth order)?"""
    vs = [float(values_by_depth[d]) for d in sorted(values_by_depth)]
    return all(math.isfinite(v) for v in vs) and all(b > a for a, b in zip(vs, vs[1:]))


def compression_outcome(run: Mapping[str, Any], *, level: float = LEVEL, margin: float = COMPRESSION_MARGIN,
                        percentile: float = CONTROL_PERCENTILE, control_bn: str = CONTROL_BN,
                        monotone: bool = True) -> tuple[str, str, list[str]]:
    """(outcome, why, causes of an undecided outcome: keys of headgeom.claims.single_run.DECIDERS) of one
    run for "deeper heads compress more" (module docstring). ``run[control_bn]``:
    {"delta": estimate of log x(max) − log x(min) with ci_at, "excess": {depth: x_d}, "trained_delta":
    log s(max) − log s(min), "control_deltas": [per draw]} (headgeom.orbits.random_heads.excess_increase);
    ``margin`` a ratio (> 0)."""
    if control_bn not in run:
        raise KeyError(f"C11 run lacks the random-head control {control_bn!r} (measured by an older headgeom); "
                       "rerun C11 into a fresh --out folder")
    r = run[control_bn]
    delta = r["delta"]
    ci = interval_at(delta, level)
    out = run_outcome(delta["value"], ci, null=0.0, margin=math.log(margin))
    q = quantile(r["control_deltas"], percentile)
    beyond = math.isfinite(q) and r["trained_delta"] > q
    mono = increasing({int(d): x for d, x in r["excess"].items()})
    why = (f"log learned-selectivity ratio {delta['value']:.3g}, {level:.0%} CI "
           + (f"[{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "undefined")
           + f", margin log({margin:g}) = {math.log(margin):.3g}; trained increase {r['trained_delta']:.3g} vs the "
           f"random heads' {percentile:.0%} quantile {q:.3g}; learned selectivity per depth "
           + ", ".join(f"{d}: {x:.3g}" for d, x in sorted(r["excess"].items(), key=lambda kv: int(kv[0])))
           + (" (increasing)" if mono else " (not increasing)"))
    causes = [] if out != UNDECIDED else ["interval"]
    if out == SUPPORTS and (not beyond or (monotone and not mono)):
        out = UNDECIDED
        causes = ["control"] if not beyond else ["monotone"]
    return out, why, causes


def compression_verdict(runs: Sequence[Mapping[str, Any]], headline: str, *, level: float = LEVEL,
                        margin: float = COMPRESSION_MARGIN, percentile: float = CONTROL_PERCENTILE,
                        control_bn: str = CONTROL_BN, monotone: bool = True, majority: float = MAJORITY) -> Verdict:
    """The verdict of "deeper heads compress more" over runs, with every run's outcome in the reason."""
    outs = [compression_outcome(r, level=level, margin=margin, percentile=percentile, control_bn=control_bn,
                                monotone=monotone) for r in runs]
    return over_runs(outs, headline, majority)


def learned(acc_by_depth: Mapping[int, float], chance: float, floor: float = LEARNED_FLOOR) -> bool:
    """The accuracy claims' premise: some depth's backbone accuracy exceeds chance + ``floor``."""
    return any(math.isfinite(float(a)) and float(a) > chance + floor for a in acc_by_depth.values())


def accuracy_outcome(acc_by_depth: Mapping[int, float], n: int | None, chance: float, *, level: float = LEVEL,
                     margin: float = ACCURACY_MARGIN, learned_floor: float = LEARNED_FLOOR,
                     monotone: bool = True) -> tuple[str, str, list[str]]:
    """(outcome, why, causes of an undecided outcome) of one run for "deeper heads protect the backbone
    better" (module docstring):
    backbone accuracies per depth (fractions) on ``n`` test examples, chance accuracy ``chance``."""
    depths = sorted(acc_by_depth)
    lo_d, hi_d = depths[0], depths[-1]
    a_hi, a_lo = float(acc_by_depth[hi_d]), float(acc_by_depth[lo_d])
    diff = a_hi - a_lo
    ci = gap_interval(a_hi, a_lo, n, level) if math.isfinite(diff) else None
    out = run_outcome(diff, ci, null=0.0, margin=margin)
    mono = increasing(acc_by_depth)
    why = (f"backbone accuracy depth {hi_d} - depth {lo_d} = {diff:.3g}, {level:.0%} interval "
           + (f"[{ci[0]:.3g}, {ci[1]:.3g}] on {n} test examples" if ci else "undefined (no test-set size)")
           + f", margin {margin:g}; per depth " + ", ".join(f"{d}: {acc_by_depth[d]:.3g}" for d in depths)
           + (" (increasing)" if mono else " (not increasing)"))
    causes = [] if out != UNDECIDED else ["interval"]
    if out == SUPPORTS and monotone and not mono:
        out, causes = UNDECIDED, ["monotone"]
    if not learned(acc_by_depth, chance, learned_floor):
        out, causes = UNDECIDED, ["budget"]
        why += f"; premise not met: no depth exceeds chance {chance:.3g} + {learned_floor:g} (nothing to protect)"
    return out, why, causes


def accuracy_verdict(runs: Sequence[Mapping[str, Any]], headline: str, chance: float, *, level: float = LEVEL,
                     margin: float = ACCURACY_MARGIN, learned_floor: float = LEARNED_FLOOR, monotone: bool = True,
                     majority: float = MAJORITY) -> Verdict:
    """The verdict of "deeper heads protect the backbone better" over runs ({"acc": {depth: a}, "n": n})."""
    outs = [accuracy_outcome(r["acc"], r["n"], chance, level=level, margin=margin, learned_floor=learned_floor,
                             monotone=monotone) for r in runs]
    return over_runs(outs, headline, majority)


def compression_judgement(runs: Sequence[Mapping[str, Any]], headline: str, *, level: float = LEVEL,
                          margin: float = COMPRESSION_MARGIN, percentile: float = CONTROL_PERCENTILE,
                          control_bn: str = CONTROL_BN, monotone: bool = True,
                          majority: float = MAJORITY) -> dict[str, Any]:
    """{"verdict", "conventions", "robustness"} of "deeper heads compress more" over ``runs``, each
    convention swept over its stated range with the others held."""
    def rule(level: float, compression_margin: float, control_percentile: float, control_bn: str, monotone: bool,
             majority: float) -> Verdict:
        return compression_verdict(runs, headline, level=level, margin=compression_margin,
                                   percentile=control_percentile, control_bn=control_bn, monotone=monotone,
                                   majority=majority)
    at = {"level": level, "compression_margin": margin, "control_percentile": percentile, "control_bn": control_bn,
          "monotone": monotone, "majority": majority}
    ranges: dict[str, Sequence[Any]] = {"level": LEVELS, "compression_margin": COMPRESSION_MARGINS,
                                        "control_percentile": PERCENTILES, "control_bn": CONTROL_BNS,
                                        "monotone": MONOTONE}
    if len(runs) > 1:
        ranges["majority"] = MAJORITIES
    return {"verdict": rule(**at), "conventions": tuple(ranges), "robustness": robustness(rule, at, ranges)}


def accuracy_judgement(runs: Sequence[Mapping[str, Any]], headline: str, chance: float, *, level: float = LEVEL,
                       margin: float = ACCURACY_MARGIN, learned_floor: float = LEARNED_FLOOR, monotone: bool = True,
                       majority: float = MAJORITY) -> dict[str, Any]:
    """{"verdict", "conventions", "robustness"} of "deeper heads protect the backbone better" over ``runs``."""
    def rule(level: float, accuracy_margin: float, learned_floor: float, monotone: bool, majority: float) -> Verdict:
        return accuracy_verdict(runs, headline, chance, level=level, margin=accuracy_margin,
                                learned_floor=learned_floor, monotone=monotone, majority=majority)
    at = {"level": level, "accuracy_margin": margin, "learned_floor": learned_floor, "monotone": monotone,
          "majority": majority}
    ranges: dict[str, Sequence[Any]] = {"level": LEVELS, "accuracy_margin": ACCURACY_MARGINS,
                                        "learned_floor": LEARNED_FLOORS, "monotone": MONOTONE}
    if len(runs) > 1:
        ranges["majority"] = MAJORITIES
    return {"verdict": rule(**at), "conventions": tuple(ranges), "robustness": robustness(rule, at, ranges)}


def _quantiles(rs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """q05 and q95 of the random heads' ratio per run (a number for a single run, whose spread is None)."""
    q = {name: [math.exp(quantile(r["control_deltas"], p)) for r in rs] for name, p in (("q05", 0.05), ("q95", 0.95))}
    return {"q05": q["q05"][0], "q95": q["q95"][0], "spread": None} if len(rs) == 1 else q


def increase_measures(runs: Sequence[Mapping[str, Any]], control_bn: str, lo_d: int, hi_d: int,
                      level: float = LEVEL) -> dict[str, Any]:
    """The measured entries of a compression row from its runs (mean ± std over runs, each run's interval):
    the headline "learned_selectivity depth max / depth min" (exp of the decided log ratio), the learned
    selectivity per depth, the trained heads' ratio and the random heads' ratios (median, 5% and 95%)."""
    rs = [r[control_bn] for r in runs]
    one = {"spread": None} if len(rs) == 1 else {}  # a single run: its value, no spread over runs
    cis = [interval_at(r["delta"], level) for r in rs]
    exp_cis = [[math.exp(c[0]), math.exp(c[1])] if c else None for c in cis]
    values = [math.exp(r["delta"]["value"]) for r in rs]
    what = "(trained / random heads' median selectivity) at the deepest over the shallowest depth"
    out: dict[str, Any] = {
        f"learned_selectivity depth {hi_d} / depth {lo_d}": (
            measured(values[0], ci=exp_cis[0], level=level, what=what, **one) if len(rs) == 1 else
            measured(values, per_seed_ci=exp_cis, level=level, what=what)),
        f"selectivity depth {hi_d} / depth {lo_d}": measured([math.exp(r["trained_delta"]) for r in rs],
                                                             what="trained heads only", **one),
        f"random_heads_selectivity depth {hi_d} / depth {lo_d}": measured(
            [math.exp(quantile(r["control_deltas"], 0.5)) for r in rs], **_quantiles(rs),
            what="median over the random-head draws (q05 and q95 beside), per run")}
    excess = [{int(d): x for d, x in r["excess"].items()} for r in rs]  # JSON keys are text
    for d in sorted({d for e in excess for d in e}):
        out[f"learned_selectivity[depth {d}]"] = measured([e[d] for e in excess if d in e], **one)
    return out

"""C9's rule for orbit compression (docs/paper.md §2 C9), written once for headgeom's own runs
(headgeom.experiments.c9_orbit_compression) and the authors' released orbits
(headgeom.experiments.released_results), under the single-run standard (headgeom.claims.single_run).

The effect is selectivity = compression / global ratio (how much more the head shrinks orbits than the
whole cloud they live in); the paper's compression stays beside it. Per run (one trained model), each
measure of a rule is read by where its bootstrap interval over images lies against 1 (:func:`interval_side`):
"above" needs the interval above 1 and refutes below it; "not below" refutes below 1 and holds otherwise. The
main rule's control is random heads of the same architecture on the same stored z
(headgeom.orbits.random_heads): ``vs_random_heads_selectivity`` = selectivity / the controls' median,
resampled jointly, must lie above 1, and the trained selectivity must exceed the controls' ``percentile``.
A run supports when every condition holds, refutes when any interval lies on the wrong side, and is
undecided otherwise. A measure the source cannot form (the released files hold z and h but not the head,
so random-direction orbits cannot be pushed through it) is undecided, never assumed to hold. Over runs:
:func:`headgeom.claims.single_run.runs_verdict`. Pure functions of estimates ``{"value", "ci", "ci_at", ...}``.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from headgeom.claims.estimates import measured
from headgeom.claims.single_run import (CONTROL_BN, CONTROL_BNS, CONTROL_PERCENTILE, LEVEL, LEVELS, MAJORITIES,
                                        MAJORITY, PERCENTILES, REFUTES, SUPPORTS, UNDECIDED, above_controls,
                                        interval_at, over_runs, quantile, robustness, side)
from headgeom.claims.verdict import Verdict

__all__ = ["CONTROL", "MAIN_RULE", "NOT_FORMED", "SELECTIVE_RULE", "control_of", "control_summary", "interval_side",
           "orbit_judgement", "orbit_outcome", "orbit_verdict", "rule_text"]

CONTROL = "vs_random_heads_selectivity"  # selectivity / median selectivity of random heads (joint bootstrap)
MAIN_RULE = {"selectivity": "above", "class_orbit_change": "not below", CONTROL: "above"}
SELECTIVE_RULE = {"selectivity": "above", "vs_random_directions_selectivity": "above"}
NOT_FORMED = "not formed"  # the side of a measure the source cannot form
PERCENTILE_SIDE = "selectivity above the controls' percentile"


def interval_side(est: Mapping, threshold: float = 1.0) -> str:
    """Where an estimate's own interval (``ci``) lies against ``threshold``: "above" (lo > t), "below"
    (hi < t), "straddles", or "undefined" (a bound missing or NaN). Infinite bounds count (a head output
    with zero spread in every resample has compression +inf, above any threshold)."""
    ci = est.get("ci") if isinstance(est, Mapping) else None
    if not ci or ci[0] is None or ci[1] is None:
        return "undefined"
    lo, hi = float(ci[0]), float(ci[1])
    return side(None if lo != lo or hi != hi else (lo, hi), threshold)


def control_of(measures: Mapping[str, Any], control_bn: str = CONTROL_BN) -> Mapping[str, Any]:
    """The random-head control of a run's measures under the BatchNorm setting ``control_bn``:
    {"selectivity": [per draw], "compression": [per draw], "vs_selectivity": estimate, ...}."""
    heads = measures.get("random_heads")
    if not isinstance(heads, Mapping) or control_bn not in heads:
        raise KeyError(f"C9 measures lack the random-head control {control_bn!r} (measured by an older headgeom, "
                       "before the single-run standard); rerun C9 into a fresh --out folder, or delete its cells")
    return heads[control_bn]


def _est(measures: Mapping[str, Any], name: str, control_bn: str) -> Mapping[str, Any]:
    return control_of(measures, control_bn)["vs_selectivity"] if name == CONTROL else measures[name]


def orbit_outcome(measures: Mapping[str, Any], rule: Mapping[str, str], not_formed: Iterable[str] = (), *,
                  level: float = LEVEL, percentile: float = CONTROL_PERCENTILE,
                  control_bn: str = CONTROL_BN) -> tuple[str, dict[str, str]]:
    """("supports" | "refutes" | "undecided", side of each condition) for one run under ``rule`` (measure ->
    "above": interval at ``level`` above 1 holds, below 1 refutes; "not below": below 1 refutes, else holds).
    With the random-head control in the rule the trained selectivity must also exceed the controls'
    ``percentile``. ``not_formed``: measures of the rule the source cannot form (side :data:`NOT_FORMED`,
    undecided). Any other measure missing is an error (results of an older headgeom)."""
    skip = set(not_formed)
    absent = [m for m in rule if m not in skip and m != CONTROL and m not in measures]
    if absent:
        raise KeyError(f"C9 cell results lack {absent} (measured by an older headgeom, before the verdicts read "
                       "selectivity); rerun C9 into a fresh --out folder, or delete its runs/C9 cells")
    sides = {m: NOT_FORMED if m in skip else side(interval_at(_est(measures, m, control_bn), level), 1.0)
             for m in rule}
    holds = all(sides[m] == "above" if need == "above" else sides[m] in ("above", "straddles")
                for m, need in rule.items())
    if CONTROL in rule and CONTROL not in skip:
        beyond = above_controls(measures["selectivity"]["value"], control_of(measures, control_bn)["selectivity"],
                                percentile)
        sides[PERCENTILE_SIDE] = "above" if beyond else "not above"
        holds = holds and beyond
    fails = any(s == "below" for s in sides.values())
    return (REFUTES if fails else SUPPORTS if holds else UNDECIDED), sides


def orbit_verdict(runs: Sequence[Mapping[str, Any]], rule: Mapping[str, str], not_formed: Iterable[str] = (), *,
                  level: float = LEVEL, percentile: float = CONTROL_PERCENTILE, control_bn: str = CONTROL_BN,
                  majority: float = MAJORITY) -> Verdict:
    """The verdict over runs (each a run's measures) with its reason: the share of runs supporting and
    refuting and each run's outcome; headline "selectivity"."""
    outs = []
    for ms in runs:
        out, sides = orbit_outcome(ms, rule, not_formed, level=level, percentile=percentile, control_bn=control_bn)
        causes = ["head" if s == NOT_FORMED else "control" if s == "not above" else "interval"
                  for m, s in sides.items() if s in (NOT_FORMED, "undefined", "not above")
                  or (s == "straddles" and rule.get(m) == "above")]
        outs.append((out, str(sides), causes))
    return over_runs(outs, "selectivity", majority)


def control_summary(measures: Mapping[str, Any], control_bn: str = CONTROL_BN) -> dict[str, float]:
    """Median and 5% / 95% quantiles of the controls' selectivity and compression."""
    c = control_of(measures, control_bn)
    return {f"{what}_{name}": quantile(c[what], p) for what in ("selectivity", "compression")
            for name, p in (("q05", 0.05), ("median", 0.5), ("q95", 0.95))}


def rule_text(rule: Mapping[str, str], percentile: float = CONTROL_PERCENTILE) -> str:
    """E.g. "selectivity CI above 1 and class_orbit_change CI not below 1 and ..." in words."""
    parts = [f"{m} CI {'above 1' if need == 'above' else 'not below 1'}" for m, need in rule.items()]
    if CONTROL in rule:
        parts.append(f"selectivity above the {percentile:.0%} quantile of the random heads' selectivities")
    return " and ".join(parts)


def _run_measure(ests: Sequence[Mapping[str, Any]], **extra: Any) -> Any:
    """The measured entry of one estimate per run: a single run's value with its interval (spread None), or
    the mean ± std over runs with each run's interval."""
    if len(ests) == 1:
        e = ests[0]
        return measured(e["value"], ci=e.get("ci"), level=e.get("level"), spread=None, **extra)
    return measured([e["value"] for e in ests], per_seed_ci=[e.get("ci") for e in ests], **extra)


def orbit_judgement(runs: Sequence[Mapping[str, Any]], kind: str, keys: Sequence[str], *,
                    not_formed: Iterable[str] = (), level: float = LEVEL, percentile: float = CONTROL_PERCENTILE,
                    control_bn: str = CONTROL_BN, majority: float = MAJORITY) -> dict[str, Any]:
    """Everything a C9 row holds beside its setting, for the runs' measures (one dict per run): {"verdict"
    (:class:`Verdict`), "measured" (``keys`` present in every run, the control's entries, the headline),
    "conventions", "robustness", "rule" (in words)} for ``kind`` "main" or "selective"."""

    rule = MAIN_RULE if kind == "main" else SELECTIVE_RULE
    skip = tuple(not_formed)
    with_control = CONTROL in rule and CONTROL not in skip

    def rule_at(level: float, control_percentile: float, control_bn: str, majority: float) -> Verdict:
        return orbit_verdict(runs, rule, skip, level=level, percentile=control_percentile, control_bn=control_bn,
                             majority=majority)

    at = {"level": level, "control_percentile": percentile, "control_bn": control_bn, "majority": majority}
    ranges: dict[str, Sequence[Any]] = {"level": LEVELS}
    if with_control:
        ranges.update(control_percentile=PERCENTILES, control_bn=CONTROL_BNS)
    if len(runs) > 1:
        ranges["majority"] = MAJORITIES
    verdict = rule_at(**at)
    meas: dict[str, Any] = {}
    for k in dict.fromkeys(["selectivity", *keys]):
        if runs and k != CONTROL and all(k in ms for ms in runs):
            meas[k] = _run_measure([ms[k] for ms in runs])
    if with_control and runs:
        controls = [control_of(ms, control_bn) for ms in runs]
        meas[CONTROL] = _run_measure([c["vs_selectivity"] for c in controls],
                                     what="selectivity / median selectivity of the random heads (joint bootstrap)")
        summ = [control_summary(ms, control_bn) for ms in runs]
        for what in ("selectivity", "compression"):
            one = len(runs) == 1  # a single run: its quantiles as numbers, else one per run
            meas[f"random_heads_{what}"] = measured(
                [s[f"{what}_median"] for s in summ], q05=[s[f"{what}_q05"] for s in summ][0] if one else
                [s[f"{what}_q05"] for s in summ], q95=[s[f"{what}_q95"] for s in summ][0] if one else
                [s[f"{what}_q95"] for s in summ], draws=controls[0]["draws"], bn=controls[0]["bn"],
                **({"spread": None} if one else {}),
                what=f"median {what} of the random heads of the same architecture, per run (q05 and q95 beside)")
    if "selectivity" not in meas:  # no run measured it (none ran, or results of an older headgeom): say so, n = 0
        meas["selectivity"] = measured(float("nan"), n=0, what="no run measured it")
    return {"verdict": verdict, "measured": meas, "conventions": tuple(ranges),
            "robustness": robustness(rule_at, at, ranges), "rule": rule_text(rule, percentile)}

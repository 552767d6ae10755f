"""C9's rule for orbit compression (docs/paper.md §2 C9), written once for headgeom's own runs
(headgeom.experiments.c9_orbit_compression) and the authors' released orbits
(headgeom.experiments.released_results).

Per seed (one trained model), each measure of a rule is read by where its bootstrap interval lies
against 1 (:func:`interval_side`): "above" needs the interval above 1 and refutes below it; "not
below" refutes below 1 and holds otherwise. A seed supports when every measure holds, refutes when
any lies on the wrong side, and is undecided otherwise. A measure the source cannot form (the
released files hold z and h but not the head, so no control can be built) is undecided, never
assumed to hold. Over seeds: supported / not supported when >= ``majority`` of them support /
refute, else inconclusive. Pure functions of estimates ``{"value", "ci", ...}``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MAIN_RULE", "NOT_FORMED", "SELECTIVE_RULE", "interval_side", "rule_text", "seed_outcome",
           "seeds_verdict"]

# every rule decides on selectivities (compression / global ratio), see c9_orbit_compression's docstring
MAIN_RULE = {"selectivity": "above", "class_orbit_change": "not below", "vs_fresh_head_selectivity": "above"}
SELECTIVE_RULE = {"selectivity": "above", "vs_random_directions_selectivity": "above"}
NOT_FORMED = "not formed"  # the side of a measure the source cannot form


def interval_side(est: Mapping, threshold: float = 1.0) -> str:
    """Where an estimate's interval lies against ``threshold``: "above" (lo > t), "below"
    (hi < t), "straddles", or "undefined" (a bound missing or NaN). Infinite bounds count (a
    head output with zero spread in every resample has compression +inf, above any threshold)."""
    ci = est.get("ci") if isinstance(est, Mapping) else None
    if not ci or ci[0] is None or ci[1] is None:
        return "undefined"
    lo, hi = float(ci[0]), float(ci[1])
    if math.isnan(lo) or math.isnan(hi):
        return "undefined"
    return "above" if lo > threshold else "below" if hi < threshold else "straddles"


def seed_outcome(measures: Mapping[str, Any], rule: Mapping[str, str],
                 not_formed: Iterable[str] = ()) -> tuple[str, dict[str, str]]:
    """("supports" | "refutes" | "undecided", side of each measure's CI) for one seed under ``rule``
    (measure -> "above": CI above 1 holds, below 1 refutes; "not below": CI below 1 refutes, else holds).
    ``not_formed``: measures of the rule the source cannot form; their side is :data:`NOT_FORMED`
    (undecided). Any other measure missing from ``measures`` is an error (results of an older headgeom)."""
    skip = set(not_formed)
    absent = [m for m in rule if m not in measures and m not in skip]
    if absent:
        raise KeyError(f"C9 cell results lack {absent} (measured by an older headgeom, before the verdicts read "
                       "selectivity); rerun C9 into a fresh --out folder, or delete its runs/C9 cells")
    sides = {m: NOT_FORMED if m in skip else interval_side(measures[m]) for m in rule}
    fails = any(s == "below" for s in sides.values())
    holds = all(sides[m] == "above" if need == "above" else sides[m] in ("above", "straddles")
                for m, need in rule.items())
    return ("refutes" if fails else "supports" if holds else "undecided"), sides


def seeds_verdict(outcomes: list[str], majority: float) -> tuple[str, float, float]:
    """(verdict, fraction of seeds supporting, fraction refuting) over the seeds' outcomes."""
    n = len(outcomes)
    sup = sum(o == "supports" for o in outcomes) / n if n else 0.0
    ref = sum(o == "refutes" for o in outcomes) / n if n else 0.0
    verdict = ("inconclusive" if not n else "supported" if sup >= majority
               else "not supported" if ref >= majority else "inconclusive")
    return verdict, sup, ref


def rule_text(rule: Mapping[str, str]) -> str:
    """E.g. "selectivity CI above 1 and class_orbit_change CI not below 1"."""
    return " and ".join(f"{m} CI {'above 1' if need == 'above' else 'not below 1'}" for m, need in rule.items())

"""C12's rule, "the backbone output beats the head on downstream probes" (docs/paper.md §2 C12), written
once for headgeom's own runs (headgeom.experiments.c12_guillotine) and the authors' released probe
accuracies (headgeom.experiments.released_results), under the single-run standard
(headgeom.claims.single_run).

Per run: gap = acc(z) − acc(h(z)) on the probe's n test examples, with the interval of
:func:`~headgeom.claims.single_run.gap_interval` (the largest standard error any pairing of the two probes'
outcomes allows); the run supports when the interval lies above 0 and gap > ``margin``, refutes when the
interval lies below ``margin`` (a gap of at least the margin is excluded), else is undecided
(:func:`~headgeom.claims.single_run.run_outcome`); undecided, whatever the numbers, when the backbone's
accuracy does not exceed chance + ``learned_floor`` (a backbone that learned nothing: the claim's premise,
as for C11's accuracy claim). Over runs: :func:`~headgeom.claims.single_run.runs_verdict`. Pure functions
of accuracies.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from headgeom.claims.depth_trend import ACCURACY_MARGINS, LEARNED_FLOOR, LEARNED_FLOORS
from headgeom.claims.single_run import (LEVEL, LEVELS, MAJORITIES, MAJORITY, UNDECIDED, gap_interval, over_runs,
                                        robustness, run_outcome)
from headgeom.claims.verdict import Verdict

__all__ = ["MARGIN", "gap_judgement", "gap_outcome", "gap_verdict", "smallest_deciding_n"]

MARGIN = 0.01  # accuracy difference (fraction) below which z and h(z) count as tied


def smallest_deciding_n(acc_a: float, acc_b: float, level: float = LEVEL) -> int | None:
    """The smallest test-set size n from which the interval of :func:`gap_interval` at ``level`` excludes
    0: with fewer test examples the gap would be within noise; None for equal accuracies."""
    gap = abs(acc_a - acc_b)
    if gap == 0:
        return None
    lo, _ = gap_interval(max(acc_a, acc_b), min(acc_a, acc_b), 1, level)
    half = gap - lo  # the half-width at n = 1; it falls as 1/sqrt(n)
    return math.floor((half / gap) ** 2) + 1


def gap_outcome(acc_z: float, acc_h: float, n: int | None, chance: float, *, level: float = LEVEL,
                margin: float = MARGIN, learned_floor: float = LEARNED_FLOOR) -> tuple[str, str, list[str]]:
    """(outcome, why, causes of an undecided outcome: keys of headgeom.claims.single_run.DECIDERS) of one
    run (module docstring)."""
    gap = acc_z - acc_h
    ci = gap_interval(acc_z, acc_h, n, level)
    out = run_outcome(gap, ci, null=0.0, margin=margin)
    why = (f"gap {gap:+.4g}, {level:.0%} interval "
           + (f"[{ci[0]:+.4g}, {ci[1]:+.4g}] on {n} test examples" if ci else "undefined (no test-set size)")
           + f", margin {margin:g}")
    causes = [] if out != UNDECIDED else ["interval"]
    if not acc_z > chance + learned_floor:
        out, causes = UNDECIDED, ["budget"]
        why += (f"; premise not met: backbone accuracy {acc_z:.3g} does not exceed chance {chance:.3g} + "
                f"{learned_floor:g}")
    return out, why, causes


def gap_verdict(runs: Sequence[Mapping[str, Any]], chance: float, *, level: float = LEVEL, margin: float = MARGIN,
                learned_floor: float = LEARNED_FLOOR, majority: float = MAJORITY) -> Verdict:
    """The verdict over runs ({"z": acc(z), "h": acc(h), "n": test examples}), headline
    "gap_z_minus_head_output", every run's outcome in the reason."""
    outs = [gap_outcome(r["z"], r["h"], r["n"], chance, level=level, margin=margin, learned_floor=learned_floor)
            for r in runs]
    return over_runs(outs, "gap_z_minus_head_output", majority)


def gap_judgement(runs: Sequence[Mapping[str, Any]], chance: float, *, level: float = LEVEL, margin: float = MARGIN,
                  learned_floor: float = LEARNED_FLOOR, majority: float = MAJORITY) -> dict[str, Any]:
    """{"verdict", "conventions", "robustness"} of C12 over ``runs``, each convention swept over its stated
    range (the CI level, the margin, the learned floor, and the majority where there is more than one run)."""
    def rule(level: float, margin: float, learned_floor: float, majority: float) -> Verdict:
        return gap_verdict(runs, chance, level=level, margin=margin, learned_floor=learned_floor, majority=majority)
    at = {"level": level, "margin": margin, "learned_floor": learned_floor, "majority": majority}
    ranges: dict[str, Sequence[Any]] = {"level": LEVELS, "margin": ACCURACY_MARGINS, "learned_floor": LEARNED_FLOORS}
    if len(runs) > 1:
        ranges["majority"] = MAJORITIES
    return {"verdict": rule(**at), "conventions": tuple(ranges), "robustness": robustness(rule, at, ranges)}

"""C8's curvature question asked of a λ_min series that holds only estimates (docs/paper.md §2 C8,
§3.4, §4 pitfalls 1-2): the authors' released Hessian tracks (headgeom.released.hessian).

C8's rule (:mod:`headgeom.claims.curvature_verdict`) counts a tracking point negative only when
λ_min < −floor, floor = rel_floor · max(max|λ|, S), and a run as showing negative curvature when at least
``negative_points`` of its points are; smooth runs against ReLU/linear runs by the contrast rule
(:func:`~headgeom.claims.training_verdicts.contrast_verdict`). A series that stores neither max|λ| nor the
operand scale S, nor exact eigenvalues, cannot form that floor: :func:`estimated_curvature` then returns
``inconclusive`` and reports what the series does say, the fraction of epochs whose estimate is below zero
(the paper's reading, floor 0) and what the contrast rule would give if those signs were taken at face
value. Where a source does give the floor (per point), the same rule decides. Pure functions of the series.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

from headgeom.claims.curvature_verdict import NEGATIVE_POINTS_SWEPT, NON_SMOOTH
from headgeom.claims.estimates import measured
from headgeom.claims.robustness import Robustness, sweep_grid
from headgeom.claims.training_verdicts import MAJORITIES, contrast_rule, contrast_verdict, negative_fraction
from headgeom.claims.verdict import Verdict

__all__ = ["NEGATIVE_POINTS", "NO_FLOOR", "estimated_curvature", "estimated_curvature_robustness"]

NEGATIVE_POINTS = 0.5  # a run "shows negative curvature" when >= this fraction of its points has λ_min < -floor
NO_FLOOR = ("the series stores only the λ_min estimates: no max|λ|, no operand scale S and no exact eigenvalue, so "
            "C8's sign floor cannot be formed, and the estimator's sign is not resolved at these magnitudes")


def estimated_curvature(runs: dict[str, dict[str, Any]], *, negative_points: float, majority: float,
                        estimator: str) -> tuple[str, dict[str, Any], str, str]:
    """(verdict, measured, criterion, face-value verdict) of C8's curvature contrast on estimated λ_min series.

    ``runs``: run name -> {"activation", "lambda_min": [per point], "floor": [per point] or None}. A run whose
    floor is None cannot be judged (:data:`NO_FLOOR`); the verdict is then inconclusive whatever the estimates
    say. ``estimator``: how the estimates were made (quoted in the criterion)."""
    meas: dict[str, Any] = {}
    judged: dict[str, tuple[dict[str, list[bool]], dict[str, list[bool]]]] = {"face": ({}, {}), "floor": ({}, {})}
    unfloored = []
    for run, r in runs.items():
        lam = [float(x) for x in r["lambda_min"]]
        finite = [x for x in lam if math.isfinite(x)]
        face = negative_fraction(lam, [0.0] * len(lam))
        meas[f"frac_epochs_estimate_below_0[{run}]"] = measured(
            float("nan") if face is None else face, n=len(lam),
            what="fraction of tracked points whose lambda_min estimate is < 0 (the paper's reading: floor 0)")
        meas[f"min_estimate[{run}]"] = measured(min(finite) if finite else float("nan"), n=len(finite))
        meas[f"median_abs_estimate[{run}]"] = measured(statistics.median(abs(x) for x in finite) if finite
                                                       else float("nan"), n=len(finite))
        meas[f"frac_epochs_estimate_exactly_0[{run}]"] = measured(
            sum(x == 0.0 for x in finite) / len(finite) if finite else float("nan"), n=len(finite))
        side = 1 if r["activation"] in NON_SMOOTH else 0
        if face is not None:
            judged["face"][side][run] = [face >= negative_points]
        if r.get("floor") is None:
            unfloored.append(run)
        else:
            frac = negative_fraction(lam, r["floor"])
            judged["floor"][side][run] = [] if frac is None else [frac >= negative_points]
    face_verdict, face_reason = contrast_verdict(*judged["face"], majority)
    rule = (f"a point is negative when lambda_min < -floor (floor = rel_floor * max(max|lambda|, S), C8's rule); a run "
            f"shows negative curvature at >= {negative_points:.0%} of its points; expected: smooth runs; not expected: "
            f"ReLU/linear runs; {contrast_rule(majority)}")
    if unfloored:
        verdict = "inconclusive"
        outcome = (f"inconclusive: {NO_FLOOR} ({', '.join(unfloored)}). Taken at face value (floor 0) the contrast "
                   f"rule would read {face_verdict!r} ({face_reason})")
    else:
        verdict, reason = contrast_verdict(*judged["floor"], majority)
        outcome = f"{verdict} ({reason})"
    return verdict, meas, f"{rule}. Estimates: {estimator}. Outcome: {outcome}", face_verdict


def estimated_curvature_robustness(runs: dict[str, dict[str, Any]], headline: str, *, negative_points: float,
                                   majority: float, estimator: str) -> tuple[tuple[str, ...], dict[str, Robustness], str]:
    """(conventions, robustness, in words) of :func:`estimated_curvature`'s verdict: re-judged over the shares of
    negative points and the majorities of seeds C8's rows sweep. The sign floor is not swept: the series has none
    to scale (:data:`NO_FLOOR`)."""
    def rule(np_: float = negative_points, maj: float = majority) -> Verdict:
        return Verdict(estimated_curvature(runs, negative_points=np_, majority=maj, estimator=estimator)[0], headline)
    robustness = {"negative_points": sweep_grid(lambda v: rule(np_=v), negative_points, NEGATIVE_POINTS_SWEPT),
                  "majority": sweep_grid(lambda v: rule(maj=v), majority, MAJORITIES)}
    words = (f"Robustness: re-judged at negative_points {list(NEGATIVE_POINTS_SWEPT)} and majority {list(MAJORITIES)}; "
             "the sign floor is not swept (the series stores none)")
    return ("negative_points", "majority"), robustness, words

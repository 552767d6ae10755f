"""C8's curvature verdict, shared by C8 (Fig. 3's runs) and the activation ablation (the same claim at an
equal budget across activations): smooth runs show λ_min(H_eff) < −floor at enough tracking points,
ReLU/linear runs do not, decided under the tangential reading when it was tracked (docs/paper.md §3, §4
pitfall 2). A pure function of the cells' per-run summaries; each experiment passes its own statement
and paper budget.
"""
from __future__ import annotations

from typing import Any

from headgeom.claims.budget import PaperBudget, budget_of_cells
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import TEST
from headgeom.claims.training_verdicts import DEAD_DEFINITION, contrast_rule, contrast_verdict
from headgeom.theory.pseudo_collapse import INERT_REL_TOL

__all__ = ["DECIDING_READING", "NON_SMOOTH", "curvature_claim", "deciding_reading", "why_reading"]

NON_SMOOTH = ("relu", "linear")  # activations with M = 0: negative curvature not expected
# the reading that decides the curvature row (scale-invariant: a cosine loss's own geometry)
DECIDING_READING = "tangential"


def deciding_reading(readings: tuple[str, ...]) -> str:
    """The reading that decides the curvature row: tangential when tracked, else the first one."""
    return DECIDING_READING if DECIDING_READING in readings else readings[0]


def why_reading(reading: str) -> str:
    """Why the curvature row is decided under ``reading`` (quoted in the criterion and the notes)."""
    if reading == DECIDING_READING:
        return ("decided under the tangential reading (the Riemannian Hessian of the cosine loss on the sphere: "
                "unchanged by the scale of the head output, so it measures the head and not |u|; under the ambient "
                "reading the cosine's own curvature is indefinite and a linear head shows negative eigenvalues "
                "through G alone)")
    return f"decided under the {reading} reading (the tangential reading was not tracked)"


def curvature_claim(config: Any, groups: dict[str, list[dict]], reading: str, setting: dict[str, Any],
                    activation_of: dict[str, str], *, statement: str, paper: PaperBudget,
                    beside: tuple[str, ...] = ()) -> dict[str, Any]:
    """C8's curvature half, decided under ``reading``: smooth runs show λ_min < −floor at >=
    negative_points of the tracking points, ReLU/linear runs do not; dead seeds are left out (and
    counted). The readings in ``beside`` are reported in ``measured`` (keys ``...[run, reading]``),
    not judged."""
    key = f"frac_points_negative[{reading}]"
    pos: dict[str, list[bool]] = {}
    neg: dict[str, list[bool]] = {}
    meas: dict[str, Any] = {}
    for run, ms in groups.items():
        usable = [m for m in ms if m.get(key) is not None and not m.get("dead_head")]
        flags = [m[key] >= config.negative_points for m in usable]
        (neg if activation_of[run] in NON_SMOOTH else pos)[run] = flags
        meas[f"frac_points_negative[{run}]"] = measured([m[key] for m in ms if m.get(key) is not None])
        meas[f"lambda_min_min[{run}]"] = measured([m[f"lambda_min_min[{reading}]"] for m in ms
                                                  if m.get(f"lambda_min_min[{reading}]") is not None])
        meas[f"dead_seeds[{run}]"] = measured(float(sum(bool(m.get("dead_head")) for m in ms)), n=len(ms))
        for other in beside:
            k = f"frac_points_negative[{other}]"
            meas[f"frac_points_negative[{run}, {other}]"] = measured(
                [m[k] for m in ms if m.get(k) is not None], what=f"{other} reading, reported beside, not judged")
        counts = [m[f"power_disagreement[{reading}]"] for m in ms if m.get(f"power_disagreement[{reading}]")]
        counts = [c for c in counts if c["points"]]
        if counts:
            meas[f"power_estimator_disagrees[{run}]"] = measured(
                [c["either"] / c["points"] for c in counts],
                what="fraction of tracking points where the paper's power-iteration lambda_min disagrees with the "
                     "exact one (sign, or beyond power_rel_tol * max|lambda|); reported, not judged")
        if any("inert_pseudo_collapse" in m for m in ms):
            meas[f"inert_pseudo_collapse[{run}]"] = measured(
                [float(bool(m.get("inert_pseudo_collapse"))) for m in ms],
                what=f"fraction of seeds whose pseudo-collapse leaves H_eff unchanged (relative gap <= {INERT_REL_TOL:g})")
    verdict, reason = contrast_verdict(pos, neg, config.majority)
    criterion = (f"a run shows negative curvature when lambda_min(H_eff) < -floor (floor = {config.rel_floor:g} * "
                 f"max(max|lambda|, S), S = 1.1 * max_i |A_i|_2 |J_i|_2^2 the scale of the terms G is summed from, so "
                 f"that round-off left by their cancellation is zero) at >= {config.negative_points:.0%} of its "
                 f"tracking points; expected: smooth runs; "
                 f"not expected: ReLU/linear runs; " + contrast_rule(config.majority)
                 + f"; dead seeds are left out ({DEAD_DEFINITION}); {why_reading(reading)}. Outcome: {reason}")
    return {"id": "C8", "statement": statement, "setting": {**setting, "reading": reading}, "measured": meas,
            "budget": budget_of_cells([m for ms in groups.values() for m in ms], paper),
            "verdict": verdict, "evidence": TEST, "criterion": criterion}

"""C8's curvature verdict, shared by C8 (Fig. 3's runs) and the activation ablation (the same claim at an
equal budget across activations): smooth runs show λ_min(H_eff) < −floor at enough tracking points,
ReLU/linear runs do not (docs/paper.md §2 C8, §3, §4 pitfall 2). One row per reading, each the
Hessian of a stated loss, with equal prominence; they differ for a reason the rows state:

- ``ambient``: the exact Hessian of the cosine loss. It is indefinite whenever u is not parallel to its
  target, for any head, so a linear head shows negative eigenvalues through G alone. The contrast
  smooth vs ReLU/linear is judged as stated, and it can fail for that reason.
- ``tangential``: the Riemannian Hessian on the sphere. A bias-free ReLU or linear head has h(z) = J z,
  so z is an exact null vector of P J; its M ≡ 0 and G = Jᵀ(cos θ P / (N‖u‖²))J ⪰ 0 wherever cos θ > 0:
  "ReLU/linear runs show no negative curvature" holds by construction there, an ``identity`` (checked
  as M ≡ 0; its negative points, where cos θ ≤ 0 for some probe sample, are counted apart). Only the
  smooth half is a ``test``.

Pure functions of the cells' per-run summaries; each experiment passes its own statement and paper budget.
"""
from __future__ import annotations

from typing import Any

from headgeom.claims.budget import Budget, PaperBudget, budget_of_cells
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import IDENTITY, TEST
from headgeom.claims.row import Row
from headgeom.claims.training_verdicts import DEAD_DEFINITION, contrast_rule, contrast_verdict, fraction

__all__ = ["AMBIENT_WHY", "INERT_REL_TOL", "NON_SMOOTH", "TANGENTIAL", "curvature_claims", "why_reading"]

NON_SMOOTH = ("relu", "linear")  # activations with M = 0: negative curvature not expected
TANGENTIAL = "tangential"  # the reading under which the ReLU/linear half is an identity
M_ZERO_TOL = 1e-12  # |M|_F / |H_eff|_F at or below this is M = 0 up to round-off
# a pseudo-collapse is inert when its relative H_eff gap (headgeom.theory.pseudo_collapse) is within
# float64 round-off: a larger gap means the scaling changed the geometry
INERT_REL_TOL = 1e-9

AMBIENT_WHY = ("the ambient Hessian of a cosine loss is indefinite whenever u is not parallel to its target, for any "
               "head (its scale is 1/|u|^2), so a linear head shows negative eigenvalues through G alone")


def why_reading(reading: str) -> str:
    """What the curvature row under ``reading`` can show (quoted in its criterion)."""
    if reading == TANGENTIAL:
        return ("tangential reading (the Riemannian Hessian of the cosine loss on the sphere, unchanged by the scale of "
                "u): the smooth half is the test; the ReLU/linear half is an identity (h(z) = Jz for a bias-free ReLU or "
                "linear head, so M = 0 and G = J^T (cos theta P/(N|u|^2)) J is PSD wherever cos theta > 0)")
    if reading == "ambient":
        return f"ambient reading (the exact Hessian of the cosine loss): {AMBIENT_WHY}, and the contrast can fail for that reason"
    return f"{reading} reading"


def _common(config: Any, groups: dict[str, list[dict]], reading: str, meas: dict[str, Any]) -> None:
    key = f"frac_points_negative[{reading}]"
    for run, ms in groups.items():
        meas[f"frac_points_negative[{run}]"] = measured([m[key] for m in ms if m.get(key) is not None] or float("nan"))
        meas[f"lambda_min_min[{run}]"] = measured([m[f"lambda_min_min[{reading}]"] for m in ms
                                                  if m.get(f"lambda_min_min[{reading}]") is not None] or float("nan"))
        meas[f"dead_seeds[{run}]"] = measured(float(sum(bool(m.get("dead_head")) for m in ms)), n=len(ms))
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


def _flags(config: Any, ms: list[dict], reading: str) -> list[bool]:
    key = f"frac_points_negative[{reading}]"
    return [m[key] >= config.negative_points for m in ms if m.get(key) is not None and not m.get("dead_head")]


def _criterion(config: Any) -> str:
    return (f"a run shows negative curvature when lambda_min(H_eff) < -floor (floor = {config.rel_floor:g} * "
            "max(max|lambda|, S), S = 1.1 * max_i |A_i|_2 |J_i|_2^2 the scale of the terms G is summed from, so that "
            f"round-off left by their cancellation is zero) at >= {config.negative_points:.0%} of its tracking points")


def curvature_claims(config: Any, groups: dict[str, list[dict]], reading: str, setting: dict[str, Any],
                     activation_of: dict[str, str], *, statement: str, paper: PaperBudget) -> list[Row]:
    """C8's curvature rows under ``reading`` (module docstring): under the tangential reading a ``test`` of the
    smooth runs and an ``identity`` of the ReLU/linear runs; under any other reading one ``test`` of the
    contrast smooth vs ReLU/linear. Dead seeds are left out (and counted)."""
    pos = {run: _flags(config, ms, reading) for run, ms in groups.items() if activation_of[run] not in NON_SMOOTH}
    neg = {run: _flags(config, ms, reading) for run, ms in groups.items() if activation_of[run] in NON_SMOOTH}
    meas: dict[str, Any] = {}
    _common(config, groups, reading, meas)
    budget = budget_of_cells([m for ms in groups.values() for m in ms], paper)
    smooth_runs = [r for r in groups if activation_of[r] not in NON_SMOOTH]
    headline = f"frac_points_negative[{smooth_runs[0]}]" if smooth_runs else next(iter(meas), None)
    rows = []
    if reading == TANGENTIAL:
        verdict, reason = _smooth_verdict(pos, config.majority)
        rule = (f"supported if every smooth run shows it in >= {config.majority:.0%} of its usable seeds; not supported "
                "if a smooth run with usable seeds never shows it; inconclusive otherwise or when a smooth run has no "
                "usable seed")
    else:
        verdict, reason = contrast_verdict(pos, neg, config.majority)
        rule = "expected: smooth runs; not expected: ReLU/linear runs; " + contrast_rule(config.majority)
    rows.append(Row(id="C8", statement=statement, setting={**setting, "reading": reading, "part": "curvature"},
                    measured=meas, budget=budget, verdict=verdict, evidence=TEST, headline=headline,
                    criterion=(f"{_criterion(config)}; {rule}; dead seeds are left out ({DEAD_DEFINITION}); "
                               f"{why_reading(reading)}. Outcome: {reason}")))
    if reading == TANGENTIAL and neg:
        rows.append(_identity_row(config, groups, reading, setting, activation_of, budget))
    return rows


def _smooth_verdict(pos: dict[str, list[bool]], majority: float) -> tuple[str, str]:
    fr = {g: fraction(f) for g, f in pos.items() if f}
    seen = f"effect fractions of the smooth runs: {fr}"
    if any(v == 0 for v in fr.values()):
        return "not supported", seen
    if pos and len(fr) == len(pos) and all(v >= majority for v in fr.values()):
        return "supported", seen
    return "inconclusive", seen + ("" if pos else "; no smooth run")


def _identity_row(config: Any, groups: dict[str, list[dict]], reading: str, setting: dict[str, Any],
                  activation_of: dict[str, str], budget: Budget | None) -> Row:
    """The ReLU/linear half under the tangential reading: M ≡ 0 at every tracking point (so any negative
    curvature is G's, at points where cos theta <= 0 for some probe sample, counted apart)."""
    meas: dict[str, Any] = {}
    broken, unchecked = [], []
    for run, ms in groups.items():
        if activation_of[run] not in NON_SMOOTH:
            continue
        worst = [max((v for v in m.get(f"M_ratio_fro[{reading}]") or [] if v is not None), default=None) for m in ms]
        worst = [w for w in worst if w is not None]
        meas[f"max_M_ratio_fro[{run}]"] = measured(worst or float("nan"), what="max over tracking points of |M|_F/|H_eff|_F")
        meas[f"frac_points_G_negative[{run}]"] = measured(
            [m[f"frac_points_negative[{reading}]"] for m in ms if m.get(f"frac_points_negative[{reading}]") is not None]
            or float("nan"), what="points with lambda_min(H_eff = G) < -floor: some probe sample has cos theta <= 0 "
                                  "(counted apart, not evidence)")
        if any(w > M_ZERO_TOL for w in worst):
            broken.append(f"{run}: |M|/|H| up to {max(worst):.3g}")
        if not worst:
            unchecked.append(run)
    first = next(iter(meas))
    # an identity checked on no data is "not checked", never "holds" (headline: the first run without data)
    verdict = "not supported" if broken else "inconclusive" if unchecked else "supported"
    if unchecked and not broken:
        first = f"max_M_ratio_fro[{unchecked[0]}]"
    return Row(id="C8", statement="ReLU/linear heads inject no negative curvature: M = 0 (tangential reading)",
               setting={**setting, "reading": reading, "part": "curvature, ReLU/linear half"}, measured=meas,
               budget=budget, headline=first, evidence=IDENTITY,
               verdict=verdict,
               criterion=(f"holds by construction (bias-free ReLU/linear heads: h(z) = Jz, M = 0, G = J^T (cos theta P/"
                          f"(N|u|^2)) J PSD wherever cos theta > 0); checked as |M|_F/|H_eff|_F <= {M_ZERO_TOL:g} at every "
                          "tracking point; points where H_eff = G has lambda_min < -floor are points with cos theta <= 0 "
                          "for some probe sample, counted apart; never counted as support; a failure is a bug"
                          + (f": {'; '.join(broken)}" if broken else "")
                          + (f"; not checked: no |M|/|H| recorded for {unchecked}" if unchecked else "")))

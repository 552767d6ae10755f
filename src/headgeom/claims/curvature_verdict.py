"""C8's curvature verdict, shared by C8 (Fig. 3's runs) and the activation ablation (the same claim at an
equal budget across activations): smooth runs show λ_min(H_eff) < −floor at enough tracking points,
ReLU/linear runs do not (docs/paper.md §2 C8, §3, §4 pitfall 2). One row per reading, each the
Hessian of a stated loss, with equal prominence; they differ for a reason the rows state:

- ``ambient``: the exact Hessian of the cosine loss. It is indefinite whenever u is not parallel to its
  target, for any head, so a linear head shows negative eigenvalues through G alone: the contrast smooth vs
  ReLU/linear cannot come out supported (every head, linear included, is negative at almost every point), so
  the row is a ``diagnostic``, shown with that reason and never counted.
- ``tangential``: the Riemannian Hessian on the sphere. A bias-free ReLU or linear head has h(z) = J z,
  so z is an exact null vector of P J; its M ≡ 0 and G = Jᵀ(cos θ P / (N‖u‖²))J ⪰ 0 wherever cos θ > 0:
  "ReLU/linear runs show no negative curvature" holds by construction there, an ``identity`` (checked
  as M ≡ 0; its negative points, where cos θ ≤ 0 for some probe sample, are counted apart). Only the
  smooth half is a ``test``: it names its conventions (the share of negative points, the sign floor, the
  majority of seeds) and carries its verdict over a stated range of each, re-judged from the stored
  λ_min and floor series (:func:`headgeom.claims.robustness.sweep_grid`).

Pure functions of the cells' per-run summaries; each experiment passes its own statement and paper budget.
"""
from __future__ import annotations

from typing import Any

from headgeom.claims.budget import Budget, PaperBudget, budget_of_cells
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import DIAGNOSTIC, IDENTITY, TEST
from headgeom.claims.robustness import sweep_grid
from headgeom.claims.row import Row
from headgeom.claims.training_verdicts import (DEAD_DEFINITION, MAJORITIES, contrast_rule, contrast_verdict, fraction,
                                               negative_fraction)
from headgeom.claims.verdict import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Verdict

__all__ = ["AMBIENT_WHY", "CONVENTIONS", "INERT_REL_TOL", "NON_SMOOTH", "TANGENTIAL", "curvature_claims", "smooth_verdict",
           "why_reading"]

NON_SMOOTH = ("relu", "linear")  # activations with M = 0: negative curvature not expected
TANGENTIAL = "tangential"  # the reading under which the ReLU/linear half is an identity
M_ZERO_TOL = 1e-12  # |M|_F / |H_eff|_F at or below this is M = 0 up to round-off
NEGATIVE_POINTS_SWEPT = (0.25, 0.5, 0.75, 0.9)  # shares of negative tracking points swept
REL_FLOORS_SWEPT = (1e-12, 1e-10, 1e-8, 1e-6)  # sign floors swept (relative, as rel_floor)
CONVENTIONS = ("negative_points", "rel_floor", "majority")
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


def _negative_fraction(m: dict, reading: str, floor_scale: float) -> float | None:
    """The run's share of tracking points with λ_min < −floor under ``reading``, the floor scaled by ``floor_scale``
    (a sign floor rel_floor' = floor_scale · rel_floor); the stored share where the series is not stored."""
    lmin, floor = m.get(f"lambda_min[{reading}]"), m.get(f"floor[{reading}]")
    if lmin is None or floor is None:
        return m.get(f"frac_points_negative[{reading}]")
    return negative_fraction(lmin, [None if f is None else f * floor_scale for f in floor])


def _flags(ms: list[dict], reading: str, negative_points: float, floor_scale: float = 1.0) -> list[bool]:
    fracs = [_negative_fraction(m, reading, floor_scale) for m in ms if not m.get("dead_head")]
    return [f >= negative_points for f in fracs if f is not None]


def _criterion(config: Any) -> str:
    return (f"a run shows negative curvature when lambda_min(H_eff) < -floor (floor = {config.rel_floor:g} * "
            "max(max|lambda|, S), S = 1.1 * max_i |A_i|_2 |J_i|_2^2 the scale of the terms G is summed from, so that "
            f"round-off left by their cancellation is zero) at >= {config.negative_points:.0%} of its tracking points")


def curvature_claims(config: Any, groups: dict[str, list[dict]], reading: str, setting: dict[str, Any],
                     activation_of: dict[str, str], *, statement: str, paper: PaperBudget) -> list[Row]:
    """C8's curvature rows under ``reading`` (module docstring): under the tangential reading a ``test`` of the
    smooth runs (with its conventions and their robustness) and an ``identity`` of the ReLU/linear runs; under
    any other reading one ``diagnostic`` of the contrast smooth vs ReLU/linear. Dead seeds are left out (and
    counted)."""
    smooth = [run for run in groups if activation_of[run] not in NON_SMOOTH]
    rough = [run for run in groups if activation_of[run] in NON_SMOOTH]
    meas: dict[str, Any] = {}
    _common(config, groups, reading, meas)
    budget = budget_of_cells([m for ms in groups.values() for m in ms], paper)
    headline = f"frac_points_negative[{smooth[0]}]" if smooth else next(iter(meas), None)
    row_setting = {**setting, "reading": reading, "part": "curvature"}
    rows = []
    if reading == TANGENTIAL:
        def rule(negative_points: float = config.negative_points, rel_floor: float = config.rel_floor,
                 majority: float = config.majority) -> Verdict:
            pos = {run: _flags(groups[run], reading, negative_points, rel_floor / config.rel_floor) for run in smooth}
            return smooth_verdict(pos, majority, headline)
        verdict = rule()
        robustness = {"negative_points": sweep_grid(lambda v: rule(negative_points=v), config.negative_points,
                                                    NEGATIVE_POINTS_SWEPT),
                      "rel_floor": sweep_grid(lambda v: rule(rel_floor=v), config.rel_floor, REL_FLOORS_SWEPT),
                      "majority": sweep_grid(lambda v: rule(majority=v), config.majority, MAJORITIES)}
        rule_text = (f"supported if every smooth run shows it in >= {config.majority:.0%} of its usable seeds; not "
                     "supported if a smooth run with usable seeds never shows it; inconclusive otherwise or when a smooth "
                     "run has no usable seed. Robustness: re-judged from the stored lambda_min and floor series at "
                     f"negative_points {list(NEGATIVE_POINTS_SWEPT)}, rel_floor {list(REL_FLOORS_SWEPT)} (the floor "
                     f"scaled with it), majority {list(MAJORITIES)}")
        rows.append(Row(id="C8", statement=statement, setting=row_setting, measured=meas, budget=budget,
                        verdict=verdict.outcome, evidence=TEST, headline=headline, reason=verdict.reason,
                        headline_text=f"share of tracking points of {smooth[0]} with negative curvature" if smooth else None,
                        conventions=CONVENTIONS, robustness=robustness,
                        criterion=(f"{_criterion(config)}; {rule_text}; dead seeds are left out ({DEAD_DEFINITION}); "
                                   f"{why_reading(reading)}. Outcome: {verdict.reason}")))
        if rough:
            rows.append(_identity_row(config, groups, reading, setting, activation_of, budget))
        return rows
    pos = {run: _flags(groups[run], reading, config.negative_points) for run in smooth}
    neg = {run: _flags(groups[run], reading, config.negative_points) for run in rough}
    outcome, reason = contrast_verdict(pos, neg, config.majority)
    rule_text = "expected: smooth runs; not expected: ReLU/linear runs; " + contrast_rule(config.majority)
    return [Row(id="C8", statement=statement, setting=row_setting, measured=meas, budget=budget, verdict=outcome,
                evidence=DIAGNOSTIC, headline=headline, reason=reason,
                headline_text=f"share of tracking points of {smooth[0]} with negative curvature" if smooth else None,
                criterion=(f"diagnostic, not counted: the outcome is fixed by the reading, not by the heads: {AMBIENT_WHY}, "
                           "so the ReLU/linear side shows negative curvature at almost every point and the contrast "
                           f"cannot come out supported (docs/paper.md §C8). Shown as judged: {_criterion(config)}; "
                           f"{rule_text}; dead seeds are left out ({DEAD_DEFINITION}). Outcome: {reason}"))]


def smooth_verdict(pos: dict[str, list[bool]], majority: float, headline: str) -> Verdict:
    """The smooth half's verdict: ``pos`` maps each smooth run to one flag per usable seed (negative curvature at
    enough points); supported when every smooth run shows it in >= ``majority`` of its seeds, not supported when
    one with usable seeds never does, inconclusive otherwise or when a smooth run has none."""
    fr = {g: fraction(f) for g, f in pos.items() if f}
    seen = f"effect fractions of the smooth runs: {fr}"
    if any(v == 0 for v in fr.values()):
        return Verdict(NOT_SUPPORTED, headline, seen)
    if pos and len(fr) == len(pos) and all(v >= majority for v in fr.values()):
        return Verdict(SUPPORTED, headline, seen)
    return Verdict(INCONCLUSIVE, headline, seen + ("" if pos else "; no smooth run"))


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

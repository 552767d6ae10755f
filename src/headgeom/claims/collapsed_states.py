"""C4 judged at the states training reaches (docs/paper.md §2 C4): at the tracking points where a training
run is collapsed (projector spread under the calibrated collapse level,
:data:`headgeom.claims.training_verdicts.ESCAPE_DEFINITION`), is a smooth head past its own threshold?

At each such point the tracker records λ_min(H_eff), λ_min(G), the threshold ratio
r = max_i λ_max(−G_i^{-1/2} M_i G_i^{-1/2}) (:mod:`headgeom.geometry.linalg.threshold`) and the view gap (the angle
between the projector's outputs on the probe batch's two views, which sets the residual): the state sits at r
times the threshold of its own ray G + t·M, past it when r > 1, which with G ⪰ 0 is λ_min(H_eff) < −floor. Only
points where G is PSD can attribute negative curvature to M; the others are counted apart. Magnitudes are
compared within one state.

Evidence: a ``test`` under a reading whose G is PSD where cos θ > 0 (tangential); under the ambient reading a
``diagnostic``: there G is indefinite by the reading (:data:`~headgeom.claims.collapse_instability.AMBIENT_G`),
shown with how often it was. The verdict is a pure function of the cells' series and of its conventions
(:func:`collapsed_verdict`), so each is re-read over a stated range (:mod:`headgeom.claims.robustness`): the
collapse fraction and the sign floor rescale the stored level and floors, the fraction of points and the
majority re-count. The view gap is reported, not swept: another gap at a training state would need the loss's
target, which the method's geometry problem keeps inside its loss (C4's own gap sweep at the init stands for it).
"""
from __future__ import annotations

import statistics
from typing import Any

from headgeom.claims.budget import PaperBudget, budget_of_cells
from headgeom.claims.collapse_instability import AMBIENT_G, FLOORS, MAJORITIES
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import DIAGNOSTIC, TEST, has_data
from headgeom.claims.robustness import sweep
from headgeom.claims.row import Row
from headgeom.claims.verdict import Verdict

__all__ = ["COLLAPSE_FRACTIONS", "NEGATIVE_POINTS", "STATEMENT", "collapsed_points",
           "collapsed_state_claim", "collapsed_verdict"]

STATEMENT = ("Thm 4.1 at the collapsed states training reaches: a smooth head's collapsed state is past its own "
             "threshold (negative curvature that M injects into a PSD G)")
HEADLINE = "min_frac_past_threshold"
NEGATIVE_POINTS = (0.25, 0.5, 0.75)  # the fraction of a seed's usable collapsed points that must be past
COLLAPSE_FRACTIONS = (0.3, 0.5, 0.7, 0.9)  # the collapse level's fraction of the reference spread


def collapsed_points(m: dict[str, Any], reading: str, *, level_scale: float = 1.0,
                     floor_scale: float = 1.0) -> dict[str, list[float]]:
    """The collapsed tracking points of one run (spread under its ``collapse_level`` × ``level_scale``) whose G is
    PSD (λ_min(G) ≥ −floor × ``floor_scale``): their ``past`` flags (λ_min(H_eff) < −floor × floor_scale) and
    threshold ratios, and at every collapsed point a 1 in ``collapsed`` (and in ``g_indefinite`` when G is not
    PSD) and its view gap (degrees) in ``gap`` where recorded. The scales re-read a stored run at another
    collapse fraction or sign floor (both enter linearly)."""
    level = m.get("collapse_level")
    spread = m.get("spread_projector") or []
    lmin, floor, lmin_g = (m.get(f"{k}[{reading}]") or [] for k in ("lambda_min", "floor", "lambda_min_G"))
    ratio = m.get(f"threshold_ratio[{reading}]") or []
    gaps = m.get("view_gap_deg") or []
    out: dict[str, list[float]] = {"past": [], "ratio": [], "collapsed": [], "g_indefinite": [], "gap": []}
    if level is None:
        return out
    for i, s in enumerate(spread):
        if s is None or s >= level * level_scale or i >= min(len(lmin), len(floor)) or None in (lmin[i], floor[i]):
            continue
        out["collapsed"].append(1.0)
        if i < len(gaps) and gaps[i] is not None:
            out["gap"].append(float(gaps[i]))
        g = lmin_g[i] if i < len(lmin_g) else None
        f = floor[i] * floor_scale
        if g is None or g < -f:
            out["g_indefinite"].append(1.0)
            continue
        out["past"].append(float(lmin[i] < -f))
        if i < len(ratio) and ratio[i] is not None:
            out["ratio"].append(float(ratio[i]))
    return out


def _seed_flags(ms: list[dict], reading: str, negative_points: float, **scales: float) -> list[bool]:
    """Per seed with usable collapsed points: past when >= ``negative_points`` of them are."""
    pts = [collapsed_points(m, reading, **scales) for m in ms]
    return [sum(p["past"]) / len(p["past"]) >= negative_points for p in pts if p["past"]]


def collapsed_verdict(groups: dict[str, list[dict]], reading: str, smooth: dict[str, bool], *, negative_points: float,
                      majority: float, level_scale: float = 1.0, floor_scale: float = 1.0) -> Verdict:
    """Supported if every smooth run with usable seeds is past in >= ``majority`` of them (runs that never reached
    a usable collapsed point are not judged), not supported if one is past in none, inconclusive otherwise or when
    no smooth run reached a usable collapsed point."""
    fractions = []
    for run, ms in groups.items():
        flags = _seed_flags(ms, reading, negative_points, level_scale=level_scale, floor_scale=floor_scale)
        if smooth[run] and flags:
            fractions.append(sum(flags) / len(flags))
    if any(f == 0 for f in fractions):
        return Verdict("not supported", HEADLINE)
    if fractions and all(f >= majority for f in fractions):
        return Verdict("supported", HEADLINE)
    return Verdict("inconclusive", HEADLINE)


def _gap(points: list[dict[str, list[float]]]) -> Any:
    gaps = [g for p in points for g in p["gap"]]
    return measured(gaps or float("nan"), n=len(gaps), unit="degrees", spread_kind="std over collapsed points (ddof=1)",
                    definition="mean over the probe samples of the angle between projector(z1) and projector(z2) of "
                               "their two views, at each collapsed tracking point")


def collapsed_state_claim(config: Any, groups: dict[str, list[dict]], reading: str, setting: dict[str, Any],
                          smooth: dict[str, bool], *, paper: PaperBudget) -> Row:
    """The C4 row at the collapsed points of training runs under ``reading`` (module docstring;
    ``config.negative_points``, ``config.majority``, ``config.collapse_fraction``, ``config.rel_floor``)."""
    meas: dict[str, Any] = {}
    fractions: dict[str, float] = {}
    all_points: dict[str, list[dict[str, list[float]]]] = {}
    for run, ms in groups.items():
        pts = all_points[run] = [collapsed_points(m, reading) for m in ms]
        flags = _seed_flags(ms, reading, config.negative_points)
        ratios = [r for p in pts for r in p["ratio"]]
        meas[f"frac_seeds_past_threshold[{run}]"] = measured(
            [float(f) for f in flags] or float("nan"), n=len(flags),
            what="seeds past their threshold at their usable collapsed points (judged for smooth runs only)",
            collapsed_points=sum(len(p["collapsed"]) for p in pts),
            points_G_indefinite=sum(len(p["g_indefinite"]) for p in pts))
        meas[f"median_threshold_ratio[{run}]"] = measured(statistics.median(ratios) if ratios else float("nan"),
                                                          n=len(ratios), what="median over collapsed points with G PD")
        meas[f"view_gap_deg[{run}]"] = _gap(pts)
        if smooth[run] and flags:
            fractions[run] = sum(flags) / len(flags)
    smooth_runs = [r for r in groups if smooth[r]]
    meas[HEADLINE] = measured(min(fractions.values()) if fractions else float("nan"), n=len(fractions),
                              what="smallest over the smooth runs with usable seeds")
    maj, q, frac = config.majority, config.negative_points, config.collapse_fraction

    def rule(negative_points: float = q, majority: float = maj, level_scale: float = 1.0,
             floor_scale: float = 1.0) -> Verdict:
        return collapsed_verdict(groups, reading, smooth, negative_points=negative_points, majority=majority,
                                 level_scale=level_scale, floor_scale=floor_scale)

    verdict = rule()
    gap = _gap([p for r in smooth_runs for p in all_points[r]])
    gap_text = (f"{gap['value']:.3g} ± {gap['spread']:.2g} degrees over {gap['n']} collapsed points of the smooth runs"
                if has_data(gap) else
                "not recorded (cells tracked before the tracker measured it: rerun them)")
    def total(key: str, kind: str) -> int:
        return sum(len(p[key]) for r in groups for p in all_points[r] if smooth[r] == (kind == "smooth"))

    points = {kind: total("collapsed", kind) for kind in ("smooth", "linear/ReLU")}
    indefinite = {kind: total("g_indefinite", kind) for kind in ("smooth", "linear/ReLU")}
    rule_text = ("collapsed points: tracking points whose projector spread is under the run's calibrated collapse level "
                 f"(collapse_fraction {frac:g} of the reference spread); usable: those whose G has no eigenvalue below "
                 "-floor (the others cannot attribute negative curvature to M and are counted apart); a point is past "
                 "its own threshold when lambda_min(H_eff) < -floor (equivalently lambda_max(-G^-1/2 M G^-1/2) > 1); "
                 f"a seed is past when >= {q:.0%} of its usable collapsed points are; supported if every smooth run "
                 f"({', '.join(smooth_runs) or 'none'}) that reached a usable collapsed point is past in >= {maj:.0%} "
                 "of its seeds with usable points (a run that never collapsed has no such state and is not judged), not "
                 "supported if one is past in none, inconclusive otherwise or when no smooth run reached a usable "
                 "collapsed point. ReLU/linear runs (M = 0) are reported, not judged")
    counts = ", ".join(f"{indefinite[k]} of {points[k]} collapsed points of the {k} runs" for k in points if points[k])
    if reading == "ambient":
        kind, conventions, robustness = DIAGNOSTIC, (), {}
        criterion = (f"diagnostic, not counted: {AMBIENT_G}; measured: G indefinite at {counts or 'no collapsed point'}. "
                     f"Rule, as under the tangential reading: {rule_text}. View gap {gap_text}")
    else:
        kind = TEST
        conventions = ("view_gap", "rel_floor", "negative_points", "majority", "collapse_fraction")
        floors = sorted({*FLOORS, config.rel_floor})
        robustness = {
            "rel_floor": sweep(lambda f: rule(floor_scale=f / config.rel_floor), config.rel_floor, floors),
            "negative_points": sweep(lambda x: rule(negative_points=x), q, sorted({*NEGATIVE_POINTS, q})),
            "majority": sweep(lambda x: rule(majority=x), maj, sorted({*MAJORITIES, maj})),
            "collapse_fraction": sweep(lambda x: rule(level_scale=x / frac), frac, sorted({*COLLAPSE_FRACTIONS, frac})),
        }
        criterion = (f"{rule_text}. G indefinite at {counts or 'no collapsed point'}. Conventions, re-read from the "
                     f"stored series (robustness): the sign floor over {FLOORS[0]:g}-{FLOORS[-1]:g}, the fraction of "
                     f"points over {NEGATIVE_POINTS[0]:g}-{NEGATIVE_POINTS[-1]:g}, the majority over "
                     f"{MAJORITIES[0]:g}-{MAJORITIES[-1]:g}, the collapse fraction over {COLLAPSE_FRACTIONS[0]:g}-"
                     f"{COLLAPSE_FRACTIONS[-1]:g}. The view gap the states carry is measured, {gap_text}; it is not "
                     "swept here (another gap at a training state needs the loss's target, which the method's geometry "
                     "problem keeps inside its loss): C4's gap sweep at the measured init stands for it")
    return Row(id="C4", statement=STATEMENT, setting={**setting, "reading": reading, "part": "collapsed states"},
               measured=meas, headline=HEADLINE, evidence=kind, verdict=verdict.outcome,
               budget=budget_of_cells([m for ms in groups.values() for m in ms], paper),
               conventions=conventions, robustness=robustness, view_gap=gap if has_data(gap) else None,
               headline_text=("share of seeds whose smooth head, at the collapsed points of training, sits past its own "
                              "collapse threshold (worst smooth run)"),
               criterion=criterion)

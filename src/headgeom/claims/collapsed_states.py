"""C4 judged at the states training reaches (docs/paper.md §2 C4): at the tracking points where a training
run is collapsed (projector spread under the calibrated collapse level,
:data:`headgeom.claims.training_verdicts.ESCAPE_DEFINITION`), is a smooth head past its own threshold?

At each such point the tracker records λ_min(H_eff), λ_min(G) and the threshold ratio
r = max_i λ_max(−G_i^{-1/2} M_i G_i^{-1/2}) (:mod:`headgeom.geometry.linalg.threshold`): the state sits at r times
the threshold of its own ray G + t·M, past it when r > 1, which with G ⪰ 0 is λ_min(H_eff) < −floor. Only
points where G is PSD can attribute negative curvature to M; the others are counted apart. Magnitudes are
compared within one state. A pure function of the cells' series.
"""
from __future__ import annotations

import statistics
from typing import Any

from headgeom.claims.budget import PaperBudget, budget_of_cells
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import TEST
from headgeom.claims.row import Row

__all__ = ["STATEMENT", "collapsed_points", "collapsed_state_claim"]

STATEMENT = ("Thm 4.1 at the collapsed states training reaches: a smooth head's collapsed state is past its own "
             "threshold (negative curvature that M injects into a PSD G)")


def collapsed_points(m: dict[str, Any], reading: str) -> dict[str, list[float]]:
    """The collapsed tracking points of one run (spread under its ``collapse_level``) whose G is PSD:
    their ``past`` flags (λ_min(H_eff) < −floor) and threshold ratios, and how many points were collapsed."""
    level = m.get("collapse_level")
    spread = m.get("spread_projector") or []
    lmin, floor, lmin_g = (m.get(f"{k}[{reading}]") or [] for k in ("lambda_min", "floor", "lambda_min_G"))
    ratio = m.get(f"threshold_ratio[{reading}]") or []
    out: dict[str, list[float]] = {"past": [], "ratio": [], "collapsed": [], "g_indefinite": []}
    if level is None:
        return out
    for i, s in enumerate(spread):
        if s is None or s >= level or i >= min(len(lmin), len(floor)) or None in (lmin[i], floor[i]):
            continue
        out["collapsed"].append(1.0)
        g = lmin_g[i] if i < len(lmin_g) else None
        if g is None or g < -floor[i]:
            out["g_indefinite"].append(1.0)
            continue
        out["past"].append(float(lmin[i] < -floor[i]))
        if i < len(ratio) and ratio[i] is not None:
            out["ratio"].append(float(ratio[i]))
    return out


def collapsed_state_claim(config: Any, groups: dict[str, list[dict]], reading: str, setting: dict[str, Any],
                          smooth: dict[str, bool], *, paper: PaperBudget) -> Row:
    """The C4 row at the collapsed points of training runs under ``reading``: per smooth run, a seed is past its
    threshold when >= ``config.negative_points`` of its usable collapsed points are; supported if every smooth run
    with usable seeds is in >= ``config.majority`` of them (runs that never collapsed are not judged), not supported if one is in none, inconclusive otherwise
    or when no smooth run reached a usable collapsed point."""
    meas: dict[str, Any] = {}
    fractions: dict[str, float] = {}
    for run, ms in groups.items():
        pts = [collapsed_points(m, reading) for m in ms]
        seeds = [p for p in pts if p["past"]]
        flags = [sum(p["past"]) / len(p["past"]) >= config.negative_points for p in seeds]
        ratios = [r for p in pts for r in p["ratio"]]
        meas[f"frac_seeds_past_threshold[{run}]"] = measured(
            [float(f) for f in flags] or float("nan"), n=len(flags),
            what="seeds past their threshold at their usable collapsed points (judged for smooth runs only)",
            collapsed_points=sum(len(p["collapsed"]) for p in pts),
            points_G_indefinite=sum(len(p["g_indefinite"]) for p in pts))
        meas[f"median_threshold_ratio[{run}]"] = measured(statistics.median(ratios) if ratios else float("nan"),
                                                          n=len(ratios), what="median over collapsed points with G PD")
        if smooth[run] and flags:
            fractions[run] = sum(flags) / len(flags)
    smooth_runs = [r for r in groups if smooth[r]]
    meas["min_frac_past_threshold"] = measured(min(fractions.values()) if fractions else float("nan"),
                                               n=len(fractions), what="smallest over the smooth runs with usable seeds")
    maj = config.majority
    if any(f == 0 for f in fractions.values()):
        verdict = "not supported"
    elif fractions and all(f >= maj for f in fractions.values()):
        verdict = "supported"
    else:
        verdict = "inconclusive"
    return Row(id="C4", statement=STATEMENT, setting={**setting, "reading": reading, "part": "collapsed states"},
               measured=meas, headline="min_frac_past_threshold", evidence=TEST, verdict=verdict,
               budget=budget_of_cells([m for ms in groups.values() for m in ms], paper),
               criterion=("collapsed points: tracking points whose projector spread is under the run's calibrated "
                          "collapse level; usable: those whose G has no eigenvalue below -floor (the others cannot "
                          "attribute negative curvature to M and are counted apart); a point is past its own threshold "
                          "when lambda_min(H_eff) < -floor (equivalently lambda_max(-G^-1/2 M G^-1/2) > 1); a seed is "
                          f"past when >= {config.negative_points:.0%} of its usable collapsed points are; supported if "
                          f"every smooth run ({', '.join(smooth_runs) or 'none'}) that reached a usable collapsed point is "
                          f"past in >= {maj:.0%} of its seeds with usable points (a run that never collapsed has no such "
                          "state and is not judged), not supported if one is past in none, inconclusive otherwise or when no "
                          "smooth run reached a usable collapsed point. ReLU/linear runs (M = 0) are reported, not judged"))

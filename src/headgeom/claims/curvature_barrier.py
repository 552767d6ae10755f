"""C2's rule (Prop 3.3, the curvature barrier; docs/paper.md §2 C2), a pure function of the per-cell
measurements of headgeom.experiments.c2_curvature: on slices of the loss metric g_L = ∇²_u L, the exact and
finite-difference Riemann curvatures agree, the curvature is beyond round-off, and the isotropy error of the
constant W = g(0)^(-1/2) grows away from the origin, while a flat control (mse) stays at round-off.

Each gate that can end the judgement names the measured key that decided it (the row's headline).
"""
from __future__ import annotations

from typing import Any

from headgeom.claims.verdict import Verdict

__all__ = ["barrier_verdict", "iso_key"]


def iso_key(config: Any) -> str:
    """The measured key of the isotropy error at the largest radius (the quantity supported / not supported reads)."""
    return f"iso_error_at_r={config.radii[-1]:g}l"


def barrier_verdict(config: Any, rows: list[dict[str, Any]], flat_r: float | None, flat_iso: float | None) -> Verdict:
    """(verdict, the measured key of the claim row that decided it, the reason in words) of one curved setting.

    ``config``: the thresholds (flat_tol, route_tol, curved_min, origin_tol, growth_min) and radii; ``rows``: the
    setting's cells ({"slice_found", "route_rel_diff", "cancellation", "iso_error_max": [per radius]}); ``flat_r``,
    ``flat_iso``: the flat control's largest |R| and isotropy error (None when no control ran)."""
    found = [r for r in rows if r["slice_found"]]
    if not found:
        return Verdict("inconclusive", "slice_found_fraction", "no slice with a positive-definite g(0) was found")
    if flat_r is None:
        return Verdict("inconclusive", "flat_control_max_abs_R", "no flat control (mse) was run")
    if flat_r >= config.flat_tol or flat_iso >= config.flat_tol:
        return Verdict("inconclusive",
                       "flat_control_max_abs_R" if flat_r >= config.flat_tol else "flat_control_iso_error",
                       f"the flat control fails: max|R| = {flat_r:.2g}, isotropy error = {flat_iso:.2g}")
    bad = [r for r in found if r["route_rel_diff"] is None or r["route_rel_diff"] >= config.route_tol]
    if bad:
        worst = max(bad, key=lambda r: r["route_rel_diff"] or 0.0)
        rel = "undefined (R = 0)" if worst["route_rel_diff"] is None else f"{worst['route_rel_diff']:.2g}"
        return Verdict("inconclusive", "route_rel_diff", (
            f"routes disagree in {len(bad)} of {len(found)} cells (worst rel diff {rel} where max|R|/terms = "
            f"{worst['cancellation']:.2g})"))
    flat = [r for r in found if r["cancellation"] <= config.curved_min]
    if flat:
        return Verdict("inconclusive", "curvature_over_terms", (f"curvature at round-off in {len(flat)} of "
                                                                f"{len(found)} cells (premise not met)"))
    stuck = [r for r in found if not (r["iso_error_max"][0] < config.origin_tol
                                      and r["iso_error_max"][-1] > config.growth_min)]
    if stuck:
        return Verdict("not supported", iso_key(config), (f"curved, but the isotropy error did not grow past "
                                                          f"{config.growth_min:g} in {len(stuck)} of {len(found)} cells"))
    return Verdict("supported", iso_key(config), (f"all {len(found)} cells curved, routes agree, isotropy error grows; "
                                                  "flat control at round-off"))

"""C5's empirical rule (docs/paper.md §2 C5, §3.3): does a pseudo-collapsed head escape, judged as a
contrast of groups of runs, written once for headgeom's collapse grid (headgeom.experiments.collapse_grid)
and the authors' released collapse grids (headgeom.experiments.released_results).

Each run of a group is a seed's escape outcome (:func:`headgeom.claims.training_verdicts.escape`, the
calibrated rule ESCAPE_DEFINITION); only runs that pass the one inclusion rule
(:func:`~headgeom.claims.training_verdicts.usable_escape`: collapsed at step 0 against the calibrated level,
escape decided, not a dead head) give a flag. The groups where escape is expected are contrasted with
those where it is not (:func:`~headgeom.claims.training_verdicts.contrast_verdict`). A run without a
calibrated reference has no level, hence no flag: its group reads "no usable seed" and the row is
inconclusive, whatever its spread did. Pure functions of the runs' escape outcomes.
"""
from __future__ import annotations

from typing import Any

from headgeom.claims.estimates import measured
from headgeom.claims.training_verdicts import (DEAD_DEFINITION, ESCAPE_DEFINITION, contrast_rule, contrast_verdict,
                                               usable_escape)

__all__ = ["COLLAPSE_FRACTION", "MAJORITY", "c5_parts", "escape_flags", "escape_row", "run_name"]

COLLAPSE_FRACTION = 0.5  # collapse level = this x the spread of the same head at normal init
MAJORITY = 0.8


def run_name(act: str, bn: bool, lr: float) -> str:
    """The name of a grid run, e.g. "relu/nobn/lr=0.005" (a group of the contrast)."""
    return f"{act}/{'bn' if bn else 'nobn'}/lr={lr:g}"


def c5_parts(lrs: list[float]) -> list[tuple[str, list[str], list[str]]]:
    """C5's two contrasts as (part, groups where escape is expected, groups where it is not), from the
    grid's learning rates: without BN at the smallest step size (the gradient-flow proxy) a smooth (SiLU)
    head escapes and a ReLU head does not; ReLU escapes through BN (at every step size) or the largest
    step size, not without BN at the smallest."""
    lrs = sorted(set(lrs))
    lo, hi = lrs[0], lrs[-1]
    return [(f"smallest step size without BN (lr {lo:g}, the gradient-flow proxy)",
             [run_name("silu", False, lo)], [run_name("relu", False, lo)]),
            ("ReLU escapes through BN or a large step size",
             [run_name("relu", True, lr) for lr in lrs] + [run_name("relu", False, hi)], [run_name("relu", False, lo)])]


def escape_flags(runs: list[dict[str, Any]]) -> list[bool]:
    """One escape flag per run that passes the inclusion rule (usable_escape)."""
    return [bool(m["escaped"]) for m in runs if usable_escape(m)]


def escape_row(groups: dict[str, list[dict[str, Any]]], positive: list[str], negative: list[str], *,
               collapse_fraction: float, majority: float) -> tuple[str, dict[str, Any], str]:
    """(verdict, measured, criterion) of "escape in every ``positive`` group and in no ``negative`` one".

    ``groups``: group name -> one escape outcome per seed (the dict of ``escape`` plus ``dead_head``)."""
    verdict, reason = contrast_verdict({g: escape_flags(groups.get(g, [])) for g in positive},
                                       {g: escape_flags(groups.get(g, [])) for g in negative}, majority)
    meas: dict[str, Any] = {}
    for g in positive + negative:
        ms = groups.get(g, [])
        flags = escape_flags(ms)
        meas[f"escaped[{g}]"] = measured([float(f) for f in flags] or float("nan"), n=len(flags),
                                         what="fraction of the seeds collapsed at step 0 that end escaped")
        meas[f"never_collapsed_seeds[{g}]"] = measured(float(sum(m.get("collapsed_initially") is False for m in ms)),
                                                       n=len(ms), what="seeds left out: not collapsed at step 0")
        meas[f"init_over_reference[{g}]"] = measured(
            [m["spread_initial"] / m["spread_reference"] for m in ms if m.get("spread_reference")] or float("nan"),
            what="spread at step 0 over the same head's spread at normal init (collapsed below collapse_fraction)")
        meas[f"spread_ratio[{g}]"] = measured([m["spread_ratio"] for m in ms if m.get("spread_ratio") is not None])
        meas[f"dead_seeds[{g}]"] = measured(float(sum(bool(m.get("dead_head")) for m in ms)), n=len(ms))
    criterion = (f"{ESCAPE_DEFINITION}; collapse_fraction = {collapse_fraction:g}; "
                 f"escape expected in {positive}, not expected in {negative}; " + contrast_rule(majority)
                 + f"; dead seeds left out ({DEAD_DEFINITION}). Outcome: {reason}")
    return verdict, meas, criterion

"""The rules the training experiments' verdicts apply to a cell's trajectories, written once so every
experiment states the same criterion: the negative-curvature fraction, collapse escape
(ESCAPE_DEFINITION), the dead head (DEAD_DEFINITION), and the contrast of groups where an effect is
expected against groups where it is not (CONTRAST_RULE). Pure functions of the series a training cell
(:mod:`headgeom.train.cells`) read back.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from headgeom.claims.estimates import measured

ESCAPE_DEFINITION = ("collapse level = collapse_fraction * spread_reference, spread_reference = the spread of the same "
                     "head and backbone at normal initialisation (the pseudo-collapse undone) on the same probe batch, "
                     "measured at step 0; collapsed_initially = spread_initial < level, escaped = spread_final >= level; "
                     "spread = mean per-dimension std (ddof=1) of the L2-normalised projector outputs on the fixed probe "
                     "batch (docs/paper.md §3), initial = step 0, final = last tracking point; spread_ratio = final / "
                     "initial is reported beside it. Inclusion, the same for every activation and BatchNorm setting: "
                     "only runs collapsed at step 0 can escape or stay collapsed; a run never collapsed is left out of "
                     "the escape rows and counted")
DEAD_DEFINITION = ("dead head (docs/paper.md §4 pitfall 8): H_eff = 0 exactly (max|lambda| = 0) at the last tracking "
                   "point and the projector spread frozen (relative change <= 1e-9) over the second half of the "
                   "tracking points; a dead head has no curvature at all, which is not 'no negative curvature'")


def negative_fraction(lambda_min: Sequence[float | None], floor: Sequence[float | None]) -> float | None:
    """Fraction of tracking points with λ_min < −floor (the tracker's floor at that point, rel_floor · max(max|λ|, S)),
    over the points where both are defined; None when there is none."""
    pairs = [(l, f) for l, f in zip(lambda_min, floor) if l is not None and f is not None]
    if not pairs:
        return None
    return sum(l < -f for l, f in pairs) / len(pairs)


def escape(spread: Sequence[float | None], reference: float | None, collapse_fraction: float) -> dict[str, Any]:
    """Initial/final projector spread, their ratio, the calibrated level and the collapse flags of
    ESCAPE_DEFINITION (flags None when the reference or the series is missing)."""
    if not 0 < collapse_fraction <= 1:
        raise ValueError(f"collapse_fraction must lie in (0, 1] (a fraction of the normal-init spread); got {collapse_fraction!r}")
    vals = [s for s in spread if s is not None]
    if not vals or reference is None or not reference > 0:
        return {"spread_initial": vals[0] if vals else None, "spread_final": vals[-1] if vals else None,
                "spread_ratio": None, "spread_reference": reference, "collapse_level": None, "escaped": None,
                "collapsed_initially": None}
    first, last = vals[0], vals[-1]
    level = collapse_fraction * reference
    ratio = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    return {"spread_initial": first, "spread_final": last, "spread_ratio": ratio, "spread_reference": reference,
            "collapse_level": level, "escaped": bool(last >= level), "collapsed_initially": bool(first < level)}


def dead_head(lambda_min: Sequence[float | None], lambda_max: Sequence[float | None],
              spread: Sequence[float | None]) -> bool:
    """DEAD_DEFINITION: zero H_eff at the last point and the spread frozen over the second half."""
    if not lambda_min or lambda_min[-1] is None or lambda_max[-1] is None:
        return False
    if max(abs(lambda_min[-1]), abs(lambda_max[-1])) != 0.0:
        return False
    tail = [s for s in spread[len(spread) // 2:] if s is not None]
    if len(tail) < 2:
        return False
    ref = max(abs(tail[0]), 1e-300)
    return all(abs(s - tail[0]) <= 1e-9 * ref for s in tail)


def collapse_outcome(out: dict[str, Any], config: Any, done: dict[str, Any],
                     lambda_min: Sequence[float | None], lambda_max: Sequence[float | None],
                     reference: float | None) -> None:
    """Write a run's escape flags (ESCAPE_DEFINITION, against ``reference``, the run's normal-init spread),
    dead-head flag and divergence into ``out``; a run stopped by a non-finite loss leaves escape undecided."""
    out.update(escape(out["spread_projector"], reference, config.collapse_fraction))
    out["dead_head"] = dead_head(lambda_min, lambda_max, out["spread_projector"])
    out["diverged"] = done.get("diverged")
    if out["diverged"]:
        out["escaped"] = None


def usable_escape(m: dict[str, Any]) -> bool:
    """The one inclusion rule of every escape row (ESCAPE_DEFINITION): collapsed at step 0 against the calibrated
    level, escape decided (not diverged), not a dead head."""
    return bool(m.get("collapsed_initially")) and m.get("escaped") is not None and not m.get("dead_head")


def fraction(flags: Sequence[bool]) -> float | None:
    return sum(bool(f) for f in flags) / len(flags) if flags else None


def contrast_verdict(positive: dict[str, list[bool]], negative: dict[str, list[bool]],
                     majority: float) -> tuple[str, str]:
    """Verdict of "every ``positive`` group shows the effect and no ``negative`` group does".

    Each group maps to one flag per seed (effect seen or not; dead or undefined seeds already
    removed). Returns (verdict, reason)."""
    pos = {g: fraction(f) for g, f in positive.items() if f}
    neg = {g: fraction(f) for g, f in negative.items() if f}
    seen = f"effect fractions: expected {pos}, not expected {neg}"
    # what failed is decided on the groups that have usable seeds, before asking whether every group has some
    if any(v == 0 for v in pos.values()) or any(v >= majority for v in neg.values()):
        return "not supported", seen
    empty = [g for g, flags in {**positive, **negative}.items() if not flags]
    if not pos or not neg or empty:
        return "inconclusive", f"{seen}; groups without usable seeds: {empty or 'a side has no group'}"
    if all(v >= majority for v in pos.values()) and all(v <= 1 - majority for v in neg.values()):
        return "supported", seen
    return "inconclusive", seen


CONTRAST_RULE = ("not supported if an expected group with usable seeds never shows the effect or a not-expected group "
                 "shows it in >= {maj:.0%} of its seeds (decided first, whatever the other groups hold); supported if "
                 "every group where the effect is expected shows it in >= {maj:.0%} of its seeds and every group where "
                 "it is not expected shows it in <= {rest:.0%} of its seeds; inconclusive otherwise or when a group "
                 "has no usable seed")


def contrast_rule(majority: float) -> str:
    return CONTRAST_RULE.format(maj=majority, rest=1 - majority)


def pm(values: Sequence[float | None], fmt: str = ".3g") -> str:
    """'mean ± std (n)' of the defined values, '-' when none."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return "-"
    m = measured(xs)
    return f"{m['value']:{fmt}} ± {m['spread']:.2g} ({m['n']})"

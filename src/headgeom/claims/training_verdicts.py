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

ESCAPE_DEFINITION = ("escaped = spread_final >= escape_level / sqrt(k) and collapsed_initially = spread_initial < "
                     "escape_level / sqrt(k), spread = mean per-dimension std (ddof=1) of the L2-normalised projector "
                     "outputs (width k) on the fixed probe batch (docs/paper.md §3; isotropic outputs give about 1/sqrt(k), "
                     "a collapsed head 0), initial = step 0, final = last tracking point; spread_ratio = final / initial "
                     "is reported beside it")
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


def escape(spread: Sequence[float | None], k: int, escape_level: float) -> dict[str, Any]:
    """Initial/final projector spread, their ratio, and the collapse flags of ESCAPE_DEFINITION."""
    vals = [s for s in spread if s is not None]
    if not vals:
        return {"spread_initial": None, "spread_final": None, "spread_ratio": None, "escaped": None,
                "collapsed_initially": None}
    first, last = vals[0], vals[-1]
    level = escape_level / math.sqrt(k)
    ratio = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    return {"spread_initial": first, "spread_final": last, "spread_ratio": ratio, "escaped": bool(last >= level),
            "collapsed_initially": bool(first < level)}


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
                     lambda_min: Sequence[float | None], lambda_max: Sequence[float | None]) -> None:
    """Write a run's escape flags (ESCAPE_DEFINITION), dead-head flag and divergence into ``out``;
    a run stopped by a non-finite loss leaves escape undecided."""
    out.update(escape(out["spread_projector"], config.out_dim, config.escape_level))
    out["dead_head"] = dead_head(lambda_min, lambda_max, out["spread_projector"])
    out["diverged"] = done.get("diverged")
    if out["diverged"]:
        out["escaped"] = None


def fraction(flags: Sequence[bool]) -> float | None:
    return sum(bool(f) for f in flags) / len(flags) if flags else None


def contrast_verdict(positive: dict[str, list[bool]], negative: dict[str, list[bool]],
                     majority: float) -> tuple[str, str]:
    """Verdict of "every ``positive`` group shows the effect and no ``negative`` group does".

    Each group maps to one flag per seed (effect seen or not; dead or undefined seeds already
    removed). Returns (verdict, reason)."""
    empty = [g for g, flags in {**positive, **negative}.items() if not flags]
    if not positive or not negative or empty:
        return "inconclusive", f"groups without usable seeds: {empty or 'a side has no group'}"
    pos = {g: fraction(f) for g, f in positive.items()}
    neg = {g: fraction(f) for g, f in negative.items()}
    if any(v == 0 for v in pos.values()) or any(v >= majority for v in neg.values()):
        return "not supported", f"effect fractions: expected {pos}, not expected {neg}"
    if all(v >= majority for v in pos.values()) and all(v <= 1 - majority for v in neg.values()):
        return "supported", f"effect fractions: expected {pos}, not expected {neg}"
    return "inconclusive", f"effect fractions: expected {pos}, not expected {neg}"


CONTRAST_RULE = ("supported if every group where the effect is expected shows it in >= {maj:.0%} of its seeds and "
                 "every group where it is not expected shows it in <= {rest:.0%} of its seeds; not supported if an "
                 "expected group never shows it or a not-expected group shows it in >= {maj:.0%} of its seeds; "
                 "inconclusive otherwise or when a group has no usable seed")


def contrast_rule(majority: float) -> str:
    return CONTRAST_RULE.format(maj=majority, rest=1 - majority)


def pm(values: Sequence[float | None], fmt: str = ".3g") -> str:
    """'mean ± std (n)' of the defined values, '-' when none."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return "-"
    m = measured(xs)
    return f"{m['value']:{fmt}} ± {m['spread']:.2g} ({m['n']})"

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
from headgeom.eval.rankme import uniform_spread

COLLAPSE_FRACTION = 0.5  # collapse level = this x 1/sqrt(k), pre-registered, the same for every head and run
GROWTH = 2.0  # a run grew when its final spread is >= this x its initial spread
MAJORITIES = (0.6, 0.8, 1.0)  # the majorities of seeds every contrast's robustness sweeps
ESCAPE_DEFINITION = ("spread = mean per-dimension std (ddof=1) of the L2-normalised projector outputs on the fixed probe "
                     "batch (docs/paper.md §3.3), initial = step 0 (for the authors' files: the first stored epoch), "
                     "final = the last tracking point; collapse level = collapse_fraction / sqrt(k), k the projector's "
                     "output width (1/sqrt(k) is the per-dimension std of directions uniform on the sphere in R^k: one "
                     "reference, independent of the head and of the run); collapsed at the start = initial < level. "
                     "Escape is judged two ways, one rule for every activation and BatchNorm setting: reached = final >= "
                     "level (the level reached), grew = final / initial >= growth (growth from the start). Inclusion, "
                     "the same for every run: only runs collapsed at the start, not diverged and not dead enter the "
                     "escape rows; the others are left out and counted")
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


def escape(spread: Sequence[float | None], k: int | None, collapse_fraction: float,
           growth: float = GROWTH) -> dict[str, Any]:
    """ESCAPE_DEFINITION on one run's spread series: initial and final spread, their ratio, the level
    ``collapse_fraction / sqrt(k)`` and the flags ``collapsed_initially``, ``escaped`` (the level reached) and
    ``grew`` (final / initial >= ``growth``); flags None when the series or k is missing."""
    if not 0 < collapse_fraction <= 1:
        raise ValueError(f"collapse_fraction must lie in (0, 1] (a fraction of 1/sqrt(k)); got {collapse_fraction!r}")
    if not growth > 1:
        raise ValueError(f"growth must be a factor > 1 (final / initial spread); got {growth!r}")
    vals = [s for s in spread if s is not None]
    first, last = (vals[0], vals[-1]) if vals else (None, None)
    out = {"spread_initial": first, "spread_final": last, "spread_ratio": None, "collapse_level": None,
           "collapsed_initially": None, "escaped": None, "grew": None}
    if not vals or k is None:
        return out
    ratio = last / first if first > 0 else (math.inf if last > 0 else 1.0)
    level = collapse_fraction * uniform_spread(int(k))
    out.update(spread_ratio=ratio, collapse_level=level, collapsed_initially=bool(first < level),
               escaped=bool(last >= level), grew=bool(ratio >= growth))
    return out


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


def collapse_outcome(out: dict[str, Any], config: Any, done: dict[str, Any], k: int,
                     lambda_min: Sequence[float | None], lambda_max: Sequence[float | None],
                     reference: float | None) -> None:
    """Write a run's escape outcome at the config's conventions (ESCAPE_DEFINITION: ``config.collapse_fraction``,
    ``config.growth``; ``k`` the projector's output width), its dead-head flag and divergence into ``out``, with
    ``spread_reference`` (the same head's spread at normal init, context only); a run stopped by a non-finite loss
    leaves escape undecided. The verdicts re-judge the stored series (:func:`run_escape`)."""
    out["out_dim"] = int(k)
    out["spread_reference"] = reference
    out["dead_head"] = dead_head(lambda_min, lambda_max, out["spread_projector"])
    out["diverged"] = done.get("diverged")
    out.update(run_escape(out, config.collapse_fraction, config.growth))


def run_escape(m: dict[str, Any], collapse_fraction: float, growth: float) -> dict[str, Any]:
    """:func:`escape` of a run's stored series (``spread_projector``, ``out_dim``) at the given conventions; a
    diverged run's flags are None (undecided)."""
    out = escape(m.get("spread_projector") or [], m.get("out_dim"), collapse_fraction, growth)
    if m.get("diverged"):
        out["escaped"] = out["grew"] = None
    return out


def usable_escape(m: dict[str, Any]) -> bool:
    """The one inclusion rule of every escape row (ESCAPE_DEFINITION): collapsed at the start against the level,
    escape decided (not diverged), not a dead head; ``m`` holds the flags of :func:`run_escape` and ``dead_head``."""
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

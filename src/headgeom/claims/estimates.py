"""Estimates over seeds: the measured entry of a claim and its one text form, "mean ± std".

Every reported number carries n and a spread. :func:`measured`
builds the entry a claim's ``measured`` dict holds (a :class:`~headgeom.claims.measured.Measured`:
{"value", "n", "spread", ...}); every table
cell, note and label that shows such an estimate as text goes through :func:`format_estimate`
(or :func:`mean_std_text`, which builds the estimate from raw values first), so the form
"mean ± std" is written in one place.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from headgeom.claims.measured import Measured

NumberFormat = str | Callable[[Any], str]  # a format spec (".3g") or a function of the number

SPREAD_KIND = "std over n (ddof=1)"

__all__ = ["SPREAD_KIND", "format_estimate", "mean_std_text", "measured"]


def measured(values: list[float] | float, **extra: Any) -> Measured:
    """A measured value with n and spread: mean, std (ddof=1 when n > 1), min, max; ``extra`` keys are added
    (or replace those, e.g. ``n=`` or ``spread=None``).

    Non-finite values are left out of mean, std, min and max but counted in n."""
    xs = [float(values)] if isinstance(values, (int, float)) else [float(v) for v in values]
    n = len(xs)
    finite = [x for x in xs if math.isfinite(x)]
    mean = sum(finite) / len(finite) if finite else float("nan")
    std = (math.sqrt(sum((x - mean) ** 2 for x in finite) / (len(finite) - 1)) if len(finite) > 1 else 0.0)
    out = {"value": mean, "n": n, "spread": std, "spread_kind": SPREAD_KIND,
           "min": min(finite) if finite else None, "max": max(finite) if finite else None}
    out.update(extra)
    return Measured.from_json(out)


def _number(x: Any, fmt: NumberFormat) -> str:
    return fmt(x) if callable(fmt) else format(x, fmt)


def format_estimate(estimate: Measured | dict[str, Any], value_fmt: NumberFormat = ".3g", spread_fmt: NumberFormat = ".2g", *,
                    with_n: bool = False, spread_of_one: bool = True) -> str:
    """``"mean ± std"`` of a :func:`measured` entry, e.g. ``"0.123 ± 0.045"``.

    value_fmt, spread_fmt: format specs or functions of the number; with_n: append ``" (n)"``;
    spread_of_one: with n = 1 still show the (zero) spread, False shows the value alone (as does
    a spread of None)."""
    text = _number(estimate["value"], value_fmt)
    if estimate.get("spread") is not None and (spread_of_one or estimate.get("n", 0) > 1):
        text += f" ± {_number(estimate['spread'], spread_fmt)}"
    if with_n:
        text += f" ({estimate['n']})"
    return text


def mean_std_text(values: Iterable[float | None], value_fmt: str = ".3g", spread_fmt: str = ".2g", *,
                  with_n: bool = False, spread_of_one: bool = True, empty: str = "-") -> str:
    """:func:`format_estimate` of the finite values among ``values`` (None and NaN/inf left out);
    ``empty`` when none is."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return empty
    return format_estimate(measured(xs), value_fmt, spread_fmt, with_n=with_n, spread_of_one=spread_of_one)

"""Figures of a run's tracked metrics against training steps; :func:`headgeom.tracking.plot_run`
reads the series from the run's metrics.jsonl and writes these into ``RUN/figures/tracking/``.

A series is ``(steps, values)``, finite values only (a metric missing at a step is a gap, not a
zero), as :func:`headgeom.tracking.read_metrics` gives. An eigenvalue series may come with the
round-off floor the tracker recorded beside it (``..._floor``, same form): |λ| ≤ floor is drawn
at 0 inside a shaded band (docs/paper.md §4 pitfall 2). Figures are built on
:func:`headgeom.report.style.blank_figure` (no display, the user's backend is left alone).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from headgeom.report.style import blank_figure, floor_band, series_style, signed_log_axis, zero_within_floor

__all__ = ["draw_metric", "metric_figure", "metrics_grid"]

Series = tuple[Sequence[int], Sequence[float]]


def draw_metric(ax: Any, key: str, steps: Sequence[int], values: Sequence[float],
                floor: Series | None = None) -> None:
    """One metric against step on ``ax``; with its floor series, |λ| ≤ floor drawn as 0 in the band.

    A positive metric spanning three decades or more gets a log axis, a signed one a symlog axis."""
    known: list[tuple[int, float]] = []
    if floor is not None:
        at = dict(zip(*floor))
        floors = [at.get(s) for s in steps]
        values = zero_within_floor(values, floors)
        known = [(s, f) for s, f in zip(steps, floors) if f is not None and f > 0]
        if known:
            floor_band(ax, [s for s, _ in known], [f for _, f in known])
    style = series_style(0)
    ax.plot(steps, values, color=style["color"], marker=style["marker"] if len(values) <= 30 else None,
            markersize=3, linewidth=1.2)
    ax.set_title(key, fontsize=9)
    ax.set_xlabel("step")
    ax.grid(True, alpha=0.3)
    nonzero = [abs(v) for v in values if v != 0.0]
    if known:  # an eigenvalue with the engine's floor: the symlog's linear band is the zero band
        ax.axhline(0.0, color="k", linewidth=0.6)
        signed_log_axis(ax, values, floor=min(f for _, f in known))
        return
    if not nonzero or max(nonzero) / min(nonzero) < 1e3:
        return
    if min(values) > 0:
        ax.set_yscale("log")
    else:  # signed curvature (λ_min ~ −1e-6 beside −0.3): symlog, labels thinned near 0
        signed_log_axis(ax, values)
        ax.axhline(0.0, color="k", linewidth=0.6)


def metric_figure(key: str, steps: Sequence[int], values: Sequence[float], floor: Series | None = None) -> Any:
    """A Figure of one metric (:func:`draw_metric`)."""
    fig = blank_figure(figsize=(5, 3.2))
    draw_metric(fig.add_subplot(1, 1, 1), key, steps, values, floor=floor)
    return fig


def metrics_grid(series: Mapping[str, Series], floors: Mapping[str, Series] | None = None) -> Any:
    """A Figure with a panel per metric of ``series`` (in its order), four to a row; ``floors``
    maps a metric to its floor series (:func:`draw_metric`)."""
    if not series:
        raise ValueError("metrics_grid needs at least one series; got none")
    floors = floors or {}
    cols = min(4, len(series))
    rows = math.ceil(len(series) / cols)
    fig = blank_figure(figsize=(4 * cols, 2.8 * rows))
    for i, (key, (steps, values)) in enumerate(series.items()):
        draw_metric(fig.add_subplot(rows, cols, i + 1), key, steps, values, floor=floors.get(key))
    return fig

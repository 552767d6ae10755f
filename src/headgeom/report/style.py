"""The shared look of headgeom's figures: one place for series styles, legends, symlog axes,
chance lines and the round-off band of signed eigenvalues.

- :func:`series_style`: series ``i`` gets a colour, a line style and a marker; the (colour, line
  style) pair is distinct for the first ``len(COLOURS) * len(LINESTYLES)`` = 40 series, so a
  14-run grid never draws two runs alike.
- :func:`legend_outside`, :func:`shared_legend`: the legend right of (or below) the axes, never
  over the data; one legend for panels that share their series.
- :func:`signed_log_axis`: a symlog y axis whose linear band is the round-off band (or the
  smallest non-zero |value|), with at most a handful of labelled decades so labels never collide.
- :func:`roundoff_floor`, :func:`zero_within_floor`, :func:`floor_band`: an eigenvalue with
  |λ| ≤ floor is zero, not negative. The floor is the engine's (``headgeom.geometry.spectrum``:
  floor = rel_floor · max|λ|, λ counts as negative only below −floor; the tracker records it per
  point as ``..._floor``); these helpers draw such values at 0 inside a shaded band instead of at
  −1e-14 on a log axis, where they would read as negative curvature (docs/paper.md §4 pitfall 2).
- :func:`chance_line`: the accuracy of guessing, 1/C, on probe plots.
- :func:`new_figure` (:func:`blank_figure`: the same without axes): ``plt.subplots`` without
  pyplot: the figure belongs to no backend, so a builder never switches the user's backend (a
  notebook keeps its own), opens no window and leaves nothing in pyplot's registry; PNGs are
  written through Agg (headgeom.report.figures.save_figure). The figure is a
  :class:`headgeom.report.layout.LaidOutFigure`: matplotlib's constrained layout, redone at every
  draw, gives titles, suptitle, axis and tick labels and the legends outside the axes room, and
  the suptitle wraps to the canvas, so no text runs into another or off the canvas (the figure
  tests check every builder: tests/report/conftest.py). Builders do not call ``tight_layout``,
  which would replace the layout.
- :func:`shared_ylabel`: one y label for panels that share it (``fig.supylabel``), instead of
  the same label per row, each as tall as its row allows.

matplotlib (and :mod:`headgeom.report.layout`) is imported inside the functions that draw, on the
first figure: ``import headgeom.tracking`` and the experiment modules import this module,
and training processes and cluster cells should not pay matplotlib's import (1-2 s) for figures
they never draw. Only headgeom.report imports matplotlib (tests/test_layering.py checks it).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# matplotlib's default cycle (tab10); the line style and the marker tell apart what colour alone does not.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "v", "D", "P", "X")
FLOOR_GID = "roundoff_floor"
CHANCE_GID = "chance"
LEGEND_FONTSIZE = 7


def blank_figure(figsize: tuple[float, float] | None = None) -> Any:
    """A Figure outside pyplot with no axes yet (add them with ``fig.add_subplot``), as
    :func:`new_figure` for layouts that leave grid cells empty."""
    from headgeom.report.layout import LaidOutFigure  # heavy: imported on the first figure (module docstring)

    return LaidOutFigure(figsize=figsize)


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None,
               **subplots_kw: Any) -> tuple[Any, Any]:
    """(figure, axes) like ``plt.subplots(nrows, ncols, figsize=..., **subplots_kw)``, on a Figure
    outside pyplot (``squeeze``, ``sharex``, ``sharey`` pass through to ``Figure.subplots``)."""
    from headgeom.report.layout import LaidOutFigure  # heavy: imported on the first figure (module docstring)

    fig = LaidOutFigure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **subplots_kw)


def shared_ylabel(fig: Any, text: str, fontsize: float | str = "medium") -> Any:
    """One y label at the left edge of ``fig`` for all its panels (``fig.supylabel``); the
    constrained layout keeps it clear of the tick labels. Use it where every row would carry the
    same label: drawn per row, a label taller than its row runs into the next one."""
    return fig.supylabel(text, fontsize=fontsize)


def series_style(i: int, variant: int = 0) -> dict[str, Any]:
    """``color``, ``linestyle`` and ``marker`` of series ``i`` (0-based), as plot() keywords.

    Colours cycle fastest, the line style changes after each full round of colours, the marker
    cycles on its own period (7, coprime to 10), so series 0 and 10 differ in line style and marker.
    ``variant`` (0 or 1) marks a second grouping of the same series (e.g. with BatchNorm) by the
    line style alone: variant 1 takes the two line styles variant 0 does not use for i < 20."""
    if i < 0 or variant not in (0, 1):
        raise ValueError(f"series index must be >= 0 and variant 0 or 1; got i={i}, variant={variant}")
    return {"color": COLOURS[i % len(COLOURS)],
            "linestyle": LINESTYLES[(i // len(COLOURS) + 2 * variant) % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)]}


def series_styles(n: int) -> list[dict[str, Any]]:
    """:func:`series_style` of series 0 .. n-1."""
    return [series_style(i) for i in range(n)]


def legend_outside(ax: Any, where: str = "right", handles: Sequence[Any] | None = None,
                   labels: Sequence[str] | None = None, title: str | None = None,
                   fontsize: float = LEGEND_FONTSIZE) -> Any:
    """A legend right of ``ax`` (``where="right"``) or below it (``"below"``), outside the data area.

    Duplicate labels are merged (a series drawn in several calls shows once); None when nothing is
    labelled. The constrained layout of :func:`new_figure` makes room for it. Below the axes it
    hangs under the x axis's tick labels and label wherever they end at draw time (a fixed offset
    in axes fraction would run into the label of a short axes). Many entries are split into
    columns (right: a column per 20; below: two beyond 4 entries, so panels side by side keep their
    legends apart)."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    elif labels is None:
        labels = [h.get_label() for h in handles]
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels):
        if lab and not lab.startswith("_") and lab not in seen:
            seen[lab] = h
    if not seen:
        return None
    n = len(seen)
    if where == "right":
        kw = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "ncol": max(1, math.ceil(n / 20))}
    elif where == "below":
        from matplotlib.transforms import IdentityTransform  # heavy: see the module docstring

        kw = {"loc": "upper center", "bbox_to_anchor": _under_x_axis(ax), "bbox_transform": IdentityTransform(),
              "ncol": 1 if n <= 4 else 2}
    else:
        raise ValueError(f"legend position must be 'right' or 'below'; got {where!r}")
    return ax.legend(list(seen.values()), list(seen), borderaxespad=0.0, fontsize=fontsize, title=title,
                     title_fontsize=fontsize, frameon=False, **kw)


def _under_x_axis(ax: Any, gap_pt: float = 4.0) -> Any:
    """A zero-height box in display coordinates under ``ax``'s x axis (its tick labels and label),
    ``gap_pt`` points below them and as wide as the axes: a legend anchored there (with an identity
    transform) follows the axis wherever the layout moves the axes. It is recomputed on every read;
    as a child of ``ax.bbox`` it marks what was derived from it stale whenever the axes moves."""
    import numpy as np  # heavy: see the module docstring
    from matplotlib.transforms import BboxBase

    class UnderXAxis(BboxBase):
        def __init__(self) -> None:
            super().__init__(shorthand_name="under_x_axis")
            self.set_children(ax.bbox)

        def get_points(self) -> Any:
            area = ax.bbox
            axis = ax.xaxis.get_tightbbox()  # with the figure's renderer; None when the axis is hidden
            bottom = min(area.y0, axis.y0) if axis is not None else area.y0
            y = bottom - gap_pt * ax.get_figure(root=True).dpi / 72.0
            self._invalid = 0  # valid again: the next move of the axes invalidates what derives from it
            return np.array([[area.x0, y], [area.x1, y]])

    return UnderXAxis()


def shared_legend(axes: Sequence[Any], title: str | None = None, fontsize: float = LEGEND_FONTSIZE) -> Any:
    """One legend for panels that share their series (a row, or a whole grid), right of the top
    right panel of ``axes``, gathering every panel's labels once."""
    handles, labels = [], []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    anchor = max(axes, key=lambda a: (round(a.get_position().y1, 3), a.get_position().x1))
    return legend_outside(anchor, "right", handles, labels, title=title, fontsize=fontsize)


def chance_line(ax: Any, num_classes: int, label: str | None = None) -> Any:
    """A dotted horizontal line at the accuracy of guessing, 1/num_classes, labelled for the legend."""
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2 for a chance line; got {num_classes!r}")
    level = 1.0 / num_classes
    return ax.axhline(level, color="0.35", linestyle=":", linewidth=1.0, zorder=1.5, gid=CHANCE_GID,
                      label=label or f"chance 1/{num_classes} = {level:.3g}")


# ---------------------------------------------------------------- signed eigenvalues near zero
def roundoff_floor(lambda_min: Sequence[float | None], lambda_max: Sequence[float | None],
                   rel_floor: float) -> list[float | None]:
    """The engine's floor per point, rel_floor · max(|λ_min|, |λ_max|) (= rel_floor · max|λ| of
    headgeom.geometry.spectrum), for results that recorded λ_min and λ_max but not the floor."""
    return [None if lo is None or hi is None else rel_floor * max(abs(lo), abs(hi))
            for lo, hi in zip(lambda_min, lambda_max)]


def zero_within_floor(values: Sequence[float | None], floors: Sequence[float | None]) -> list[float | None]:
    """``values`` with every |v| ≤ its floor set to 0.0: the engine counts those as zero, so a
    figure must not draw them as negative (or positive) curvature. Points without a floor stay."""
    if len(floors) != len(values):
        raise ValueError(f"need one floor per value; got {len(floors)} floors for {len(values)} values")
    return [v if v is None or f is None or abs(v) > f else 0.0 for v, f in zip(values, floors)]


def floor_band(ax: Any, xs: Sequence[float], floors: Sequence[float], label: str | None = None) -> Any:
    """Shade |λ| ≤ floor around 0 at each x (a step band when the floor varies), behind the data.

    Pass, per x, the smallest floor among the series drawn there: then every value inside the
    band is zero for its own series and every value a series counts as non-zero lies outside."""
    if len(xs) != len(floors) or not xs:
        raise ValueError(f"floor_band needs one floor per x (got {len(floors)} floors, {len(xs)} x values)")
    label = label or "|λ| ≤ floor = rel_floor·max|λ|: zero (round-off)"
    if len(xs) == 1:
        return ax.axhspan(-floors[0], floors[0], color="0.85", zorder=0.5, gid=FLOOR_GID, label=label)
    return ax.fill_between(xs, [-f for f in floors], floors, step="mid", color="0.85", linewidth=0, zorder=0.5,
                           gid=FLOOR_GID, label=label)


def _label(v: float) -> str:
    if v == 0:
        return "0"
    k = round(math.log10(abs(v)))
    if not math.isclose(abs(v), 10.0 ** k, rel_tol=1e-9):
        return f"{v:.2g}"
    return f"${'-' if v < 0 else ''}10^{{{k}}}$"


def signed_log_axis(ax: Any, values: Sequence[float | None], floor: float = 0.0, max_labels: int = 7) -> float:
    """A symlog y axis for signed values spanning decades (λ_min ~ −1e-6 beside −0.3); returns linthresh.

    The linear band around 0 is the round-off band ``floor`` when one is given (|λ| ≤ floor is zero),
    else it ends at the smallest non-zero |value|. Major ticks sit on 0 and on powers of ten, at most
    ``max_labels`` of them, evenly thinned (every second, third... decade) and none closer to 0 than
    that spacing, so labels near 0 never collide; minor ticks are off."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # heavy: see the module docstring

    if floor < 0 or not math.isfinite(floor):
        raise ValueError(f"floor must be a finite number >= 0; got {floor!r}")
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    nonzero = [abs(v) for v in finite if v != 0.0]
    linthresh = floor if floor > 0 else (min(nonzero) if nonzero else 1.0)
    ax.set_yscale("symlog", linthresh=linthresh, linscale=1.0)
    tops = {s: max([abs(v) for v in finite if v * s > 0], default=0.0) for s in (-1.0, 1.0)}
    sides = [s for s in (-1.0, 1.0) if tops[s] > 0] or [-1.0, 1.0]
    lowest = math.floor(math.log10(linthresh)) + 1
    decades = {s: list(range(lowest, math.floor(math.log10(max(tops[s], linthresh))) + 1)) for s in sides}
    stride = max(1, math.ceil(max(len(d) for d in decades.values()) / max(1, (max_labels - 1) // len(sides))))
    ticks = {0.0}
    def distance(k: int) -> float:  # display distance of 10^k from 0, in decades (linear half: 1/0.9)
        return k - math.log10(linthresh) + 1.0 / 0.9

    for s in sides:  # each side labelled up to its own largest value, one spacing for both
        kept = [k for k in decades[s][::-1][::stride] if distance(k) >= 0.9 * stride]
        if not kept:  # a side of small values beside a wide one: its largest decade clear of the 0 label
            kept = [k for k in decades[s][::-1] if distance(k) >= 2.0][:1]
        ticks |= {s * 10.0 ** k for k in kept}
    if ticks == {0.0}:  # no power of ten far enough from 0: label the extremes
        ticks |= {s * max(tops[s], linthresh) for s in sides}
    ticks = sorted(ticks)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _label(v)))
    ax.yaxis.set_minor_locator(NullLocator())
    if not nonzero:  # every value is 0: show the band and one decade beyond it, not a sliver around 0
        ax.set_ylim(-10.0 * linthresh, 10.0 * linthresh)
    return linthresh

"""Trajectories of the training experiments (C8, the collapse grid, the activation ablation):
one panel per metric, every seed of every run against the training step.

Each run keeps one :func:`~headgeom.report.style.series_style` (its seeds share it, the first
carries the legend label) and the legend sits right of the panels. λ_min / λ_max panels use the
engine's round-off floor: a value with |λ| ≤ floor is zero (``headgeom.geometry.spectrum``), so it
is drawn at 0 inside the shaded floor band on a symlog axis whose linear band is that floor.
With ``log_y`` the other panels (non-negative metrics spanning decades, e.g. gradient norms) get a
log axis, or a symlog one when a value is 0 (a dead head's zero gradient stays visible at 0).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from headgeom.report.style import (floor_band, new_figure, roundoff_floor, series_style, shared_legend,
                                   signed_log_axis, zero_within_floor)


def _suffix(key: str) -> str | None:
    """``"[mse]"`` of ``"lambda_min[mse]"``, ``""`` of ``"lambda_min"``; None for other metrics."""
    for name in ("lambda_min", "lambda_max"):
        if key == name or key.startswith(name + "["):
            return key[len(name):]
    return None


def floors_of(m: dict[str, Any], key: str, rel_floor: float | None) -> list[float | None] | None:
    """The floor at every tracking point of the eigenvalue series ``key`` of one cell's metrics:
    the recorded ``floor<suffix>`` when present, else rel_floor · max(|λ_min|, |λ_max|) from the
    recorded extremes (the engine's definition); None when neither is available."""
    suffix = _suffix(key)
    if suffix is None:
        return None
    recorded = list(m.get("floor" + suffix) or [])
    if any(f is not None for f in recorded):
        return recorded
    lo, hi = m.get("lambda_min" + suffix), m.get("lambda_max" + suffix)
    if rel_floor is None or not lo or not hi:
        return None
    return roundoff_floor(lo, hi, rel_floor)


def _panel(ax: Any, groups: dict[str, list[dict]], key: str, label: str, rel_floor: float | None,
           log_y: bool = False) -> None:
    values: list[float] = []
    band: dict[float, float] = {}  # step -> smallest floor among the series there
    for i, (run, ms) in enumerate(groups.items()):
        style = series_style(i)
        for j, m in enumerate(ms):
            ys = list(m.get(key) or [])
            floors = floors_of(m, key, rel_floor)
            if floors is not None and len(floors) == len(ys):
                ys = zero_within_floor(ys, floors)
                for s, f in zip(m["steps"], floors):
                    if f is not None and math.isfinite(f):
                        band[s] = min(band.get(s, math.inf), f)
            pts = [(s, v) for s, v in zip(m["steps"], ys) if v is not None]
            if pts:
                xs, vs = zip(*pts)
                values += vs
                ax.plot(xs, vs, ms=3, lw=1.2, label=run if j == 0 else None, **style)
    if _suffix(key) is not None:
        ax.axhline(0.0, color="0.5", lw=0.8, zorder=1)
        positive = sorted((s, f) for s, f in band.items() if f > 0)
        if positive:
            floor_band(ax, [s for s, _ in positive], [f for _, f in positive])
        signed_log_axis(ax, values, floor=min((f for _, f in positive), default=0.0))
    elif log_y and values:
        if min(values) > 0:
            ax.set_yscale("log")
        else:
            signed_log_axis(ax, values)
    ax.set_xlabel("step")
    ax.set_ylabel(label)


def trajectory_figure(groups: dict[str, list[dict]], keys: Sequence[tuple[str, str]], title: str,
                      rel_floor: float | None = None, *, log_y: bool = False, share_y: bool = False):
    """One panel per (metric key, label): every seed's trajectory against step, one style per run
    (``groups``: run name -> metrics of its seeds, each with "steps" and the keyed series).

    ``rel_floor``: the engine's relative floor of the run (its config's ``rel_floor``), used for
    λ panels whose metrics recorded λ_min and λ_max but no ``floor`` series. ``log_y``: log axes for
    the non-λ panels (module docstring); ``share_y``: one y range for all panels (e.g. head beside
    backbone)."""
    fig, axes = new_figure(1, len(keys), figsize=(4.6 * len(keys) + 1.8, 3.6), squeeze=False, sharey=share_y)
    axes = axes[0]
    for ax, (key, label) in zip(axes, keys):
        _panel(ax, groups, key, label, rel_floor, log_y)
    shared_legend(axes)  # the runs and the floor band, once, right of the last panel
    fig.suptitle(title)
    return fig

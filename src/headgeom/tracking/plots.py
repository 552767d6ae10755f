"""Figures of every tracked metric against training steps, from a run's metrics.jsonl.

    paths = plot_metrics("runs/x/metrics.jsonl", "runs/x/figures/tracking")   # one PNG per metric
    paths = plot_metrics(..., grid=True)                                      # plus one grid PNG

Each JSON line must carry an integer-valued "step"; every other key with a finite numeric value
on at least one line is a metric (null, strings and lists are skipped; a metric missing on a
line, e.g. a tracked quantity between tracking steps, leaves a gap). Figures are built on
:func:`headgeom.report.style.blank_figure` (no display, the user's backend is left alone) and
written atomically by :func:`headgeom.report.figures.save_figure`.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Iterable

from headgeom.report.figures import save_figure
from headgeom.report.style import blank_figure, floor_band, series_style, signed_log_axis, zero_within_floor
from headgeom.runs.metrics import read_metrics as read_run_metrics


def read_metrics(path: str | os.PathLike) -> dict[str, tuple[list[int], list[float]]]:
    """{metric: (steps, values)} from a metrics.jsonl, in file order (finite numbers only), read
    strictly by :func:`headgeom.runs.metrics.read_metrics` (a bad line is an error naming it)."""
    path = Path(path)
    series: dict[str, tuple[list[int], list[float]]] = {}
    for rec in read_run_metrics(path, strict=True):
        for key, value in rec.values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                steps, values = series.setdefault(key, ([], []))
                steps.append(rec.step)
                values.append(float(value))
    if not series:
        raise ValueError(f"{path} holds no numeric metric besides 'step'; nothing to plot")
    return series


def _file_name(key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.+-]+", "_", key).strip("_.")
    return f"{stem or 'metric'}.png"


def floor_key(key: str) -> str | None:
    """The tracker's round-off floor recorded beside an eigenvalue metric
    (``heff_tangential_mean_lambda_min`` -> ``heff_tangential_mean_floor``; the operator estimate's
    ``..._op_lambda_min`` -> ``..._op_floor``)."""
    for name in ("lambda_min", "lambda_max"):
        if key.endswith(name):
            return key[: -len(name)] + "floor"
    return None


def _draw(ax, key: str, steps: list[int], values: list[float],
          floor: tuple[list[int], list[float]] | None = None) -> None:
    """One metric against step; an eigenvalue with its floor series: |λ| ≤ floor drawn as 0 in the band."""
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


def plot_metrics(
    metrics_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    keys: Iterable[str] | None = None,
    grid: bool = False,
) -> list[Path]:
    """Write ``out_dir/<metric>.png`` for each metric (or each of ``keys``), and
    ``out_dir/tracking_grid.png`` with all of them when ``grid``; returns the written paths."""
    series = read_metrics(metrics_path)
    if keys is None:
        chosen = sorted(series)
    else:
        chosen = list(keys)
        missing = [k for k in chosen if k not in series]
        if missing:
            raise KeyError(f"metrics {missing} are not in {metrics_path}; available: {sorted(series)}")
    out_dir = Path(out_dir)
    written: list[Path] = []
    for key in chosen:
        fig = blank_figure(figsize=(5, 3.2))
        _draw(fig.add_subplot(1, 1, 1), key, *series[key], floor=series.get(floor_key(key) or ""))
        written.append(save_figure(fig, out_dir / _file_name(key)))
    if grid:
        cols = min(4, len(chosen))
        rows = math.ceil(len(chosen) / cols)
        fig = blank_figure(figsize=(4 * cols, 2.8 * rows))
        for i, key in enumerate(chosen):
            _draw(fig.add_subplot(rows, cols, i + 1), key, *series[key], floor=series.get(floor_key(key) or ""))
        fig.tight_layout()
        written.append(save_figure(fig, out_dir / "tracking_grid.png"))
    return written


def plot_run(run_dir: str | os.PathLike, grid: bool = True) -> list[Path]:
    """Figures of RUN_DIR/metrics.jsonl into RUN_DIR/figures/tracking/."""
    run_dir = Path(run_dir)
    return plot_metrics(run_dir / "metrics.jsonl", run_dir / "figures" / "tracking", grid=grid)

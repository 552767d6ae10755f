"""A run's tracking figures: every tracked metric against training steps, from its metrics.jsonl.

    paths = plot_metrics("runs/x/metrics.jsonl", "runs/x/figures/tracking")   # one PNG per metric
    paths = plot_metrics(..., grid=True)                                      # plus one grid PNG
    paths = plot_run("runs/x")                                                # both, into runs/x/figures/tracking/

The series are read by :func:`headgeom.tracking.trajectory.read_metrics`, an eigenvalue's
round-off floor is found by :func:`headgeom.tracking.record.floor_key`, the figures are drawn by
:mod:`headgeom.report.plots.tracking` and written atomically by
:func:`headgeom.report.figures.save_figure`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

from headgeom.report.figures import save_figure
from headgeom.report.plots.tracking import metric_figure, metrics_grid
from headgeom.tracking.record import floor_key
from headgeom.tracking.trajectory import read_metrics

__all__ = ["plot_metrics", "plot_run"]


def _file_name(key: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.+-]+", "_", key).strip("_.")
    return f"{stem or 'metric'}.png"


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
    floors = {k: series[f] for k in chosen if (f := floor_key(k)) in series}
    out_dir = Path(out_dir)
    written = [save_figure(metric_figure(k, *series[k], floor=floors.get(k)), out_dir / _file_name(k))
               for k in chosen]
    if grid:
        written.append(save_figure(metrics_grid({k: series[k] for k in chosen}, floors),
                                   out_dir / "tracking_grid.png"))
    return written


def plot_run(run_dir: str | os.PathLike, grid: bool = True) -> list[Path]:
    """Figures of RUN_DIR/metrics.jsonl into RUN_DIR/figures/tracking/."""
    run_dir = Path(run_dir)
    return plot_metrics(run_dir / "metrics.jsonl", run_dir / "figures" / "tracking", grid=grid)

"""Geometry tracking during SSL training: H_eff spectra on a probe batch,
representation spread / covariance condition / RankMe (from headgeom.eval.rankme), head-vs-backbone update size, plots.

>>> tracker = GeometryTracker(probe_views, every=100, reading="ambient", reduction="mean")
>>> metrics = tracker(step, method)            # dict[str, float]; {} between tracking steps
>>> plot_run("runs/simsiam")                   # runs/simsiam/figures/tracking/*.png
"""
from headgeom.tracking.plots import plot_metrics, plot_run, read_metrics
from headgeom.tracking.tracker import REDUCTIONS, GeometryTracker
from headgeom.tracking.updates import UpdateRatio, relative_change

__all__ = [
    "GeometryTracker", "REDUCTIONS", "plot_metrics", "plot_run", "read_metrics", "UpdateRatio", "relative_change",
]

"""Geometry tracking: what headgeom measures of a model while it trains, not where it is logged.

(Where the numbers go, metrics.jsonl, TensorBoard, MLflow, W&B, is the experiment loggers'
business: :mod:`headgeom.train.loggers`.) On a fixed probe batch: H_eff spectra,
representation spread / covariance condition / RankMe (from headgeom.eval.rankme), head-vs-backbone
update size, and the figures of a run's record.

>>> tracker = GeometryTracker(probe_views, every=100, reading="ambient", reduction="mean")
>>> metrics = tracker(step, method)            # dict[str, float] (metrics.jsonl keys); {} between tracking steps
>>> record = tracker.measure(step, method)     # TrackingRecord: record.reading("ambient").lambda_min, ...
>>> read_tracking("runs/simsiam").heff("ambient", "lambda_min")   # the series back from metrics.jsonl
>>> plot_run("runs/simsiam")                   # runs/simsiam/figures/tracking/*.png (headgeom.report.plots.tracking)
"""
from headgeom.tracking.plots import plot_metrics, plot_run
from headgeom.tracking.record import REDUCTIONS, HeffReading, Statistics, TrackingRecord, Updates
from headgeom.tracking.tracker import GeometryTracker
from headgeom.tracking.trajectory import Trajectory, read_metrics, read_tracking
from headgeom.tracking.updates import UpdateRatio, relative_change

__all__ = [
    "GeometryTracker", "HeffReading", "REDUCTIONS", "Statistics", "TrackingRecord", "Updates", "Trajectory",
    "read_tracking",     "plot_metrics", "plot_run", "read_metrics", "UpdateRatio", "relative_change",
]

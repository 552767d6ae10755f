"""A run's metrics as series: the tracker's records (:func:`read_tracking`, the one reader of
them in metrics.jsonl) and every numeric metric (:func:`read_metrics`, what the figures plot).

    traj = read_tracking("runs/simsiam")              # Trajectory of the tracked lines, in file order
    traj.steps                                         # [0, 10, 20, ...]
    lmin, source = traj.heff("ambient", "lambda_min")  # one value per tracked step, "blocks" | "operator"
    traj.statistic("spread_projector"), traj.logged("loss")

Each tracked line of metrics.jsonl (read by :func:`headgeom.runs.metrics.read_metrics`) is kept
whole (the loop's own keys at that step: ``loss``, ``grad_norm_*``) beside the tracker's
:class:`~headgeom.tracking.record.TrackingRecord` parsed from it. Series hold None where a value
is undefined or not finite at that step (what a trajectory plots and a verdict counts).

    series = read_metrics("runs/simsiam/metrics.jsonl")   # {"loss": ([0, 10, ...], [1.2, 0.9, ...]), ...}
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from headgeom.runs.metrics import MetricsRecord
from headgeom.runs.metrics import read_metrics as read_run_metrics
from headgeom.tracking.record import HEFF_SOURCES, HeffReading, Statistics, TrackingRecord, Updates, finite_or_none

__all__ = ["Trajectory", "read_metrics", "read_tracking"]

_HEFF_FIELDS = {f.name for f in fields(HeffReading)} - {"reading", "reduction", "source"}


def _check(name: str, cls: type) -> None:
    names = [f.name for f in fields(cls)]
    if name not in names:
        raise ValueError(f"{name!r} is not a field of {cls.__name__}; choose one of {names}")


@dataclass(frozen=True)
class Trajectory:
    """The tracked steps of a run: ``lines`` (metrics.jsonl lines) and their ``records``, aligned."""

    lines: tuple[MetricsRecord, ...] = ()
    records: tuple[TrackingRecord, ...] = ()

    def __post_init__(self) -> None:
        if len(self.lines) != len(self.records):
            raise ValueError(f"Trajectory needs one record per line; got {len(self.lines)} lines and "
                             f"{len(self.records)} records")

    def __len__(self) -> int:
        return len(self.records)

    @property
    def steps(self) -> list[int]:
        return [r.step for r in self.records]

    def logged(self, key: str) -> list[float | None]:
        """The training loop's own ``key`` (``loss``, ``grad_norm_head``, ...) at every tracked step."""
        return [line.finite(key) for line in self.lines]

    def statistic(self, name: str) -> list[float | None]:
        """A :class:`Statistics` field (``spread_projector``, ``rankme_z``, ...) at every tracked step."""
        _check(name, Statistics)
        return [None if r.statistics is None else finite_or_none(getattr(r.statistics, name)) for r in self.records]

    def update(self, name: str) -> list[float | None]:
        """An :class:`Updates` field (``update_ratio``, ...) at every tracked step (None at the first)."""
        _check(name, Updates)
        return [None if r.updates is None else finite_or_none(getattr(r.updates, name)) for r in self.records]

    def heff(self, reading: str, name: str, reduction: str = "mean") -> tuple[list[float | None], str]:
        """A :class:`HeffReading` field (``lambda_min``, ``floor``, ``M_ratio_fro``, ...) under
        ``reading`` at every tracked step, and its source: "blocks" (exact per-sample blocks) when
        any step has it from the blocks, else "operator" (Lanczos on the whole coupled H_eff, used
        for train-mode BatchNorm heads), else "absent" (all None). Steps measured by the other
        source hold None."""
        if name not in _HEFF_FIELDS:
            raise ValueError(f"{name!r} is not a measured field of HeffReading; choose one of {sorted(_HEFF_FIELDS)}")
        readings = [r.reading(reading, reduction) for r in self.records]
        for source in HEFF_SOURCES:
            values = [finite_or_none(getattr(h, name)) if h is not None and h.source == source else None
                      for h in readings]
            if any(h is not None and h.source == source and getattr(h, name) is not None for h in readings):
                return values, source
        return [None] * len(readings), "absent"

    def m_ratio(self, reading: str, reduction: str = "mean") -> tuple[list[float | None], str]:
        """‖M‖/‖H_eff‖ at every tracked step: Frobenius when measured, else spectral; (values,
        "<norm> (<source>)"), or all None and "absent"."""
        for norm in ("fro", "spectral"):
            values, source = self.heff(reading, f"M_ratio_{norm}", reduction)
            if source != "absent":
                return values, f"{norm} ({source})"
        return [None] * len(self), "absent"


def read_tracking(run: str | os.PathLike[str], *, strict: bool = False) -> Trajectory:
    """The tracked lines of a run's metrics.jsonl (``run``: the run directory or the file), in file
    order; ``strict`` as in :func:`headgeom.runs.metrics.read_metrics`. A line is tracked when it
    holds a key of the tracker's record (:meth:`TrackingRecord.from_metrics`)."""
    lines, records = [], []
    for line in read_run_metrics(run, strict=strict):
        record = TrackingRecord.from_metrics(line)
        if record is not None:
            lines.append(line)
            records.append(record)
    return Trajectory(tuple(lines), tuple(records))


def read_metrics(path: str | os.PathLike) -> dict[str, tuple[list[int], list[float]]]:
    """{metric: (steps, values)} from a metrics.jsonl, in file order (finite numbers only), read
    strictly by :func:`headgeom.runs.metrics.read_metrics` (a bad line is an error naming it).

    Every key but ``step`` with a finite numeric value on at least one line is a metric (null,
    strings, booleans and lists are skipped; a metric missing on a line, e.g. a tracked quantity
    between tracking steps, leaves a gap)."""
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

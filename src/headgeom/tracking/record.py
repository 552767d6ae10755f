"""The tracker's record of one tracking step, its flat metrics.jsonl keys, and its reader.

:class:`GeometryTracker.measure <headgeom.tracking.tracker.GeometryTracker.measure>` returns a
:class:`TrackingRecord`; the training loop logs :meth:`TrackingRecord.metrics` (the flat keys
below) into the run's metrics.jsonl once, and :func:`headgeom.tracking.trajectory.read_tracking`
reads the records back from it (:meth:`TrackingRecord.from_metrics` of the lines
:func:`headgeom.runs.metrics.read_metrics` gives). The key names are the run's on-disk schema
(TensorBoard tags, the tracking figures and older runs read them), written and parsed here only:

- ``heff_<reading>_<reduction>_<field>`` for :class:`HeffReading` fields from the exact
  per-sample blocks (``source="blocks"``), ``heff_<reading>_<reduction>_op_<field>`` from Lanczos
  on the whole coupled H_eff (``source="operator"``; docs/paper.md §3);
- :class:`Statistics` and :class:`Updates` fields under their own names (``spread_projector``,
  ``update_ratio``, ...).

A field is None where its value is undefined (the tracker stores non-finite results as None) or
not measured on that path; None fields are left out of the line. A non-None non-finite value set
by hand is written as :func:`headgeom.io.json_safe` writes it (NaN as null, ±inf as "inf"/"-inf")
and read back as that float.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Iterable

from headgeom.geometry.engine.readings import READINGS
from headgeom.runs.metrics import MetricsRecord

__all__ = ["HEFF_SOURCES", "REDUCTIONS", "HeffReading", "Statistics", "TrackingRecord", "Updates", "combine",
           "finite_or_none", "floor_key"]

REDUCTIONS = {
    "mean": "blocks of the loss as the method defines it (headgeom losses average over the N probe "
            "samples, so each block carries a factor 1/N)",
    "sum": "N x the blocks of the loss as given: for a loss averaged over the batch, the blocks of "
           "its per-sample sum (independent of the probe batch size N)",
}
HEFF_SOURCES = {"blocks": "", "operator": "op_"}  # where the numbers come from -> infix of the key


def finite_or_none(x: Any) -> float | None:
    """``float(x)`` when finite, else None (the tracker's "undefined": a collapsed batch's condition number)."""
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def _put(out: dict[str, float], key: str, value: float | None) -> None:
    if value is not None:
        out[key] = float(value)


@dataclass(frozen=True)
class HeffReading:
    """H_eff = G + M of one loss-Hessian reading at one tracking step (docs/paper.md §3).

    ``source`` "blocks": exact per-sample (d, d) blocks, all fields but ``converged``/``iterations``;
    "operator": Lanczos at both ends of the whole coupled (N·d, N·d) H_eff (train-mode BatchNorm
    heads), ``lambda_min``, ``lambda_max``, ``floor``, ``operand_scale``, ``M_ratio_spectral``, ``converged``,
    ``iterations`` and ``n_negative`` when the Krylov space was exact. Definitions:
    ``GeometryTracker.metadata()["keys"]``."""

    reading: str
    reduction: str
    source: str
    lambda_min: float | None = None
    lambda_max: float | None = None
    n_negative: float | None = None
    frac_samples_negative: float | None = None
    floor: float | None = None
    operand_scale: float | None = None
    M_ratio_fro: float | None = None
    M_ratio_spectral: float | None = None
    lambda_min_G: float | None = None
    threshold_ratio: float | None = None
    power_lambda_min: float | None = None
    power_shift: float | None = None
    converged: float | None = None
    iterations: float | None = None

    def __post_init__(self) -> None:
        if self.reading not in READINGS:
            raise ValueError(f"HeffReading.reading must be one of {sorted(READINGS)}; got {self.reading!r}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"HeffReading.reduction must be one of {sorted(REDUCTIONS)}; got {self.reduction!r}")
        if self.source not in HEFF_SOURCES:
            raise ValueError(f"HeffReading.source must be one of {sorted(HEFF_SOURCES)}; got {self.source!r}")

    @staticmethod
    def prefix(reading: str, reduction: str, source: str = "blocks") -> str:
        """The metrics.jsonl key prefix of these numbers: ``heff_<reading>_<reduction>_[op_]``."""
        return f"heff_{reading}_{reduction}_{HEFF_SOURCES[source]}"

    def metrics(self) -> dict[str, float]:
        """The flat metrics.jsonl keys of the defined fields."""
        p = self.prefix(self.reading, self.reduction, self.source)
        out: dict[str, float] = {}
        for f in _VALUE_FIELDS:
            _put(out, p + f, getattr(self, f))
        return out

    @classmethod
    def from_metrics(cls, line: MetricsRecord, reading: str, reduction: str) -> HeffReading | None:
        """The reading's numbers in ``line`` (blocks first, then operator), None when it holds none."""
        for source in HEFF_SOURCES:
            p = cls.prefix(reading, reduction, source)
            values = {f: line.number(p + f) for f in _VALUE_FIELDS}
            if any(v is not None for v in values.values()):
                return cls(reading, reduction, source, **values)
        return None

    @property
    def m_ratio(self) -> tuple[float | None, str | None]:
        """(‖M‖/‖H_eff‖, its norm): Frobenius when measured (blocks), else spectral; (None, None) without either."""
        for norm in ("fro", "spectral"):
            value = getattr(self, f"M_ratio_{norm}")
            if value is not None:
                return value, norm
        return None, None


_VALUE_FIELDS = tuple(f.name for f in fields(HeffReading) if f.name not in ("reading", "reduction", "source"))


def floor_key(key: str) -> str | None:
    """The key of the round-off floor recorded beside an eigenvalue key, None for other keys
    (``heff_tangential_mean_lambda_min`` -> ``heff_tangential_mean_floor``; the operator estimate's
    ``..._op_lambda_min`` -> ``..._op_floor``)."""
    for name in ("lambda_min", "lambda_max"):
        if key.endswith(name):
            return key[: -len(name)] + "floor"
    return None


@dataclass(frozen=True)
class Statistics:
    """Representation statistics on the probe batch (definitions: ``GeometryTracker.metadata()``):
    spread of z_1, projector(z_1) and the geometry head's output; covariance condition number,
    kept rank and RankMe of z_1 and projector(z_1) (:mod:`headgeom.eval.rankme`); the view gap
    (mean and std over the probe samples of ∠(projector(z_1), projector(z_2)), degrees)."""

    spread_z: float | None = None
    spread_projector: float | None = None
    spread_head: float | None = None
    cov_condition_z: float | None = None
    cov_rank_z: float | None = None
    rankme_z: float | None = None
    cov_condition_projector: float | None = None
    cov_rank_projector: float | None = None
    rankme_projector: float | None = None
    view_gap_deg: float | None = None
    view_gap_deg_std: float | None = None


@dataclass(frozen=True)
class Updates:
    """Head/backbone relative update size since the previous tracking call (:mod:`headgeom.tracking.updates`)."""

    update_head_rel: float | None = None
    update_backbone_rel: float | None = None
    update_steps: float | None = None
    update_ratio: float | None = None


def _flat(group: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for f in fields(group):
        _put(out, f.name, getattr(group, f.name))
    return out


def _group(cls: type, line: MetricsRecord) -> Any:
    values = {f.name: line.number(f.name) for f in fields(cls)}
    return cls(**values) if any(v is not None for v in values.values()) else None


@dataclass(frozen=True)
class TrackingRecord:
    """What the tracker measured at ``step``: one :class:`HeffReading` per tracked reading, the
    representation :class:`Statistics` and the :class:`Updates` (None when not tracked at that step).
    ``heff`` is kept in the order of ``READINGS``, then ``REDUCTIONS``."""

    step: int
    heff: tuple[HeffReading, ...] = ()
    statistics: Statistics | None = None
    updates: Updates | None = None

    def __post_init__(self) -> None:
        seen = [(h.reading, h.reduction) for h in self.heff]
        if len(set(seen)) != len(seen):
            raise ValueError(f"TrackingRecord holds one HeffReading per (reading, reduction); got {seen}")
        # one order (the readings', then the reductions'), so a record read back equals the one written
        order = {key: i for i, key in enumerate((r, red) for r in READINGS for red in REDUCTIONS)}
        object.__setattr__(self, "heff", tuple(sorted(self.heff, key=lambda h: order[(h.reading, h.reduction)])))

    def reading(self, reading: str, reduction: str = "mean") -> HeffReading | None:
        """The H_eff numbers under ``reading`` and ``reduction``, None when not tracked."""
        for h in self.heff:
            if (h.reading, h.reduction) == (reading, reduction):
                return h
        return None

    def metrics(self) -> dict[str, float]:
        """The flat ``{key: value}`` the training loop logs into metrics.jsonl (without ``step``)."""
        out: dict[str, float] = {}
        for h in self.heff:
            out.update(h.metrics())
        for group in (self.statistics, self.updates):
            if group is not None:
                out.update(_flat(group))
        return out

    def merged(self, other: TrackingRecord) -> TrackingRecord:
        """This record with ``other``'s readings added (several trackers at one step; their
        statistics and updates are the same numbers, ``other``'s are kept where it has them)."""
        if other.step != self.step:
            raise ValueError(f"cannot merge tracking records of steps {self.step} and {other.step}")
        return TrackingRecord(self.step, self.heff + other.heff, other.statistics or self.statistics,
                              other.updates or self.updates)

    @classmethod
    def from_metrics(cls, line: MetricsRecord) -> TrackingRecord | None:
        """The tracker's numbers in a metrics.jsonl line, None when the line holds none of its keys."""
        heff = tuple(h for r in READINGS for red in REDUCTIONS
                     if (h := HeffReading.from_metrics(line, r, red)) is not None)
        statistics, updates = _group(Statistics, line), _group(Updates, line)
        if not heff and statistics is None and updates is None:
            return None
        return cls(line.step, heff, statistics, updates)


def combine(records: Iterable[TrackingRecord]) -> TrackingRecord:
    """One record of several trackers' records at the same step (:meth:`TrackingRecord.merged`)."""
    records = list(records)
    if not records:
        raise ValueError("combine needs at least one TrackingRecord")
    out = records[0]
    for r in records[1:]:
        out = out.merged(r)
    return out

"""headgeom.tracking.record: the tracker's typed record, its flat metrics.jsonl keys and its reader.

A record written by the training loop's own writer (train.loggers.JsonlLogger) and read back by
read_tracking must be the record itself: float64 values bit for bit, None fields absent, and
non-finite values as io.json_safe writes them (NaN as null, ±inf as "inf"/"-inf").
"""
from __future__ import annotations

import dataclasses
import math
import struct

import pytest

from headgeom.runs.metrics import MetricsRecord
from headgeom.tracking.record import (HeffReading, Statistics, TrackingRecord, Updates, combine, finite_or_none,
                                     floor_key)
from headgeom.tracking.trajectory import Trajectory, read_tracking
from headgeom.train.loggers import JsonlLogger


def _bits(x):
    return None if x is None else struct.pack("<d", x)  # NaN == NaN, -0.0 != 0.0: the exact float64


def _same(a, b) -> None:
    """Records equal field by field at the bit level (dataclass == says NaN != NaN)."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), (a, b)
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, tuple):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float):
        assert _bits(a) == _bits(b), (a, b)
    else:
        assert a == b, (a, b)


def _write(path, records, extra=None):
    log = JsonlLogger(path)
    for r in records:
        log.log(r.step, {**(extra or {}).get(r.step, {}), **r.metrics()})
    log.close()


BLOCKS = HeffReading("tangential", "mean", "blocks", lambda_min=-(0.1 + 0.2) * 1e-7, lambda_max=1 / 3,
                     n_negative=2.0, frac_samples_negative=0.25, floor=5e-324, operand_scale=2.0 ** -40,
                     M_ratio_fro=0.7071067811865476,
                     M_ratio_spectral=math.pi, power_lambda_min=-2.9999999e-8, power_shift=0.333)
OPERATOR = HeffReading("ambient", "sum", "operator", lambda_min=-1e300, lambda_max=math.inf, floor=0.0,
                       converged=1.0, iterations=17.0, M_ratio_spectral=math.nan)  # n_negative: None


def test_a_record_round_trips_through_metrics_jsonl_exactly(tmp_path):
    stats = Statistics(spread_z=0.1, spread_projector=0.0, spread_head=1e-17, cov_condition_z=-math.inf,
                       cov_rank_z=3.0, rankme_z=2.5, cov_condition_projector=None, cov_rank_projector=1.0,
                       rankme_projector=1.0000000000000002)
    records = [TrackingRecord(0, (BLOCKS, OPERATOR), stats, None),
               TrackingRecord(5, (BLOCKS,), stats, Updates(0.5, 0.25, 5.0, 2.0)),
               TrackingRecord(7, (), None, Updates(update_ratio=None, update_steps=2.0))]
    # the loop's own keys share the tracked lines; an untracked line in between is not a record
    extra = {5: {"loss": -0.5, "lr": 0.1, "epoch": 1.0}}
    path = tmp_path / "metrics.jsonl"
    _write(path, records[:2], extra)
    JsonlLogger(path).log(6, {"loss": -0.6})
    _write(path, records[2:])  # the logger appends

    got = read_tracking(tmp_path, strict=True)
    assert got.steps == [line.step for line in got.lines] == [0, 5, 7]
    _same(got.records, tuple(records))
    assert got.logged("loss") == [None, -0.5, None]
    # the non-finite values on disk as io.json_safe writes them, None fields absent
    line0 = got.lines[0].values
    assert line0["heff_ambient_sum_op_lambda_max"] == "inf" and line0["cov_condition_z"] == "-inf"
    assert line0["heff_ambient_sum_op_M_ratio_spectral"] is None
    assert "heff_ambient_sum_op_n_negative" not in line0 and "cov_condition_projector" not in line0


def test_the_on_disk_key_names_are_the_documented_schema():
    # the names TensorBoard tags, the tracking figures, older runs and the Lightning monitor read
    assert sorted(BLOCKS.metrics()) == sorted(f"heff_tangential_mean_{f}" for f in (
        "lambda_min", "lambda_max", "n_negative", "frac_samples_negative", "floor", "operand_scale",
        "M_ratio_fro", "M_ratio_spectral", "power_lambda_min", "power_shift"))
    assert sorted(OPERATOR.metrics()) == sorted(f"heff_ambient_sum_op_{f}" for f in (
        "lambda_min", "lambda_max", "floor", "converged", "iterations", "M_ratio_spectral"))
    assert set(TrackingRecord(1, (), Statistics(spread_projector=0.5), Updates(update_ratio=3.0)).metrics()) == {
        "spread_projector", "update_ratio"}


def test_parsing_a_line_by_hand():
    line = MetricsRecord(3, {"loss": 1.0, "heff_ambient_mean_op_lambda_min": -2.0, "heff_ambient_mean_floor": None,
                             "spread_z": "inf", "other": "text"})
    rec = TrackingRecord.from_metrics(line)
    # a line holding both sources of one reading (not written by the tracker): the blocks are read
    h = rec.reading("ambient")
    assert h.source == "blocks" and math.isnan(h.floor) and h.lambda_min is None
    assert rec.reading("tangential") is None and rec.reading("ambient", "sum") is None
    assert rec.statistics.spread_z == math.inf and rec.updates is None
    assert TrackingRecord.from_metrics(MetricsRecord(4, {"loss": 1.0, "lr": 0.1})) is None
    only_op = TrackingRecord.from_metrics(MetricsRecord(3, {"heff_ambient_mean_op_lambda_min": -2.0}))
    assert only_op.reading("ambient").source == "operator" and only_op.reading("ambient").lambda_min == -2.0


def test_m_ratio_prefers_frobenius_and_says_which():
    assert BLOCKS.m_ratio == (0.7071067811865476, "fro")
    assert math.isnan(OPERATOR.m_ratio[0]) and OPERATOR.m_ratio[1] == "spectral"
    assert HeffReading("ambient", "mean", "blocks").m_ratio == (None, None)


def test_merging_the_records_of_several_trackers():
    a = TrackingRecord(2, (BLOCKS,), Statistics(spread_z=0.1), None)
    b = TrackingRecord(2, (dataclasses.replace(OPERATOR, reduction="mean"),), Statistics(spread_z=0.1), Updates(0.1))
    both = combine([a, b])
    assert [h.reading for h in both.heff] == ["ambient", "tangential"] and both.updates == Updates(0.1)
    assert both.metrics() == {**a.metrics(), **b.metrics()}  # the later tracker's statistics, as a dict update
    assert combine([b, dataclasses.replace(a, statistics=Statistics(spread_z=0.2))]).statistics.spread_z == 0.2
    with pytest.raises(ValueError, match="steps 2 and 3"):
        a.merged(dataclasses.replace(b, step=3))
    with pytest.raises(ValueError, match="one HeffReading per"):
        a.merged(a)
    with pytest.raises(ValueError, match="at least one"):
        combine([])


def test_bad_fields_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="reading must be one of"):
        HeffReading("exact", "mean", "blocks")
    with pytest.raises(ValueError, match="reduction must be one of"):
        HeffReading("ambient", "median", "blocks")
    with pytest.raises(ValueError, match="source must be one of"):
        HeffReading("ambient", "mean", "lanczos")
    assert finite_or_none(math.nan) is None and finite_or_none(-math.inf) is None and finite_or_none(2) == 2.0


def test_trajectory_series_say_where_the_numbers_come_from():
    blocks = HeffReading("ambient", "mean", "blocks", lambda_min=-1.0, M_ratio_spectral=0.5, M_ratio_fro=math.nan)
    op = HeffReading("ambient", "mean", "operator", lambda_min=-2.0, M_ratio_spectral=0.25)
    recs = (TrackingRecord(0, (op,), Statistics(spread_z=math.inf)), TrackingRecord(1, (blocks,), None, Updates(0.1)))
    traj = Trajectory(tuple(MetricsRecord(r.step, r.metrics()) for r in recs), recs)
    # blocks win when any step has them; the operator step holds None there
    assert traj.heff("ambient", "lambda_min") == ([None, -1.0], "blocks")
    assert traj.heff("ambient", "converged") == ([None, None], "absent")
    assert traj.heff("tangential", "lambda_min") == ([None, None], "absent")
    # a NaN Frobenius ratio is present (the source is the blocks) but not a number of the series
    assert traj.m_ratio("ambient") == ([None, None], "fro (blocks)")
    only_op = Trajectory(traj.lines[:1], recs[:1])
    assert only_op.m_ratio("ambient") == ([0.25], "spectral (operator)")
    assert traj.statistic("spread_z") == [None, None] and traj.update("update_head_rel") == [None, 0.1]
    with pytest.raises(ValueError, match="not a field of Statistics"):
        traj.statistic("loss")
    with pytest.raises(ValueError, match="not a measured field of HeffReading"):
        traj.heff("ambient", "source")
    with pytest.raises(ValueError, match="one record per line"):
        Trajectory(traj.lines, recs[:1])


def test_floor_key_names_the_floor_beside_an_eigenvalue():
    # the tracking figures draw an eigenvalue with the floor recorded under this key
    reading = HeffReading("ambient", "mean", "operator", lambda_min=-1.0, floor=1e-9)
    keys = reading.metrics()
    lam = HeffReading.prefix("ambient", "mean", "operator") + "lambda_min"
    assert floor_key(lam) in keys and keys[floor_key(lam)] == 1e-9
    assert floor_key("heff_tangential_mean_lambda_max") == "heff_tangential_mean_floor"
    assert floor_key("spread_z") is None and floor_key("heff_ambient_mean_floor") is None

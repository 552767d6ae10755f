"""headgeom.runs.metrics: the one schema and reader of a run's metrics.jsonl."""
from __future__ import annotations

import json
import math

import pytest

from headgeom.runs.metrics import MetricsRecord, metrics_path, read_metrics
from headgeom.train.loggers import JsonlLogger


def _write_with_the_trainers_logger(path, rows):
    log = JsonlLogger(path)
    for step, scalars in rows:
        log.log(step, scalars)
    log.close()


def test_records_are_what_the_trainer_wrote(tmp_path):
    rows = [(0, {"spread_z": 0.5, "heff_exact_mean_lambda_min": -1e-3}),
            (1, {"epoch": 0.25, "loss": -0.5, "lr": 0.1}),
            (2, {"loss": math.inf, "lam": math.nan, "tag": "x", "flag": True})]
    _write_with_the_trainers_logger(tmp_path / "metrics.jsonl", rows)
    recs = read_metrics(tmp_path)
    assert [r.step for r in recs] == [0, 1, 2]
    assert recs[1].values == {"epoch": 0.25, "loss": -0.5, "lr": 0.1}
    assert recs[2].number("loss") == math.inf and math.isnan(recs[2].number("lam"))
    assert recs[2].finite("loss") is None and recs[1].finite("loss") == -0.5
    assert recs[2].number("tag") is None and recs[2].number("flag") is None and recs[2].number("absent") is None
    # a record writes back the very line it was read from
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [r.to_line() for r in recs] == lines
    assert recs[0].as_dict() == json.loads(lines[0])


def test_a_torn_line_is_skipped_by_default_and_named_when_strict(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "loss": 1.0}\n[1]\n{"loss": 2.0}\n{"step": 3.0, "loss": 3.0}\n{"step": 4, "lo')
    assert [(r.step, r.values["loss"]) for r in read_metrics(path)] == [(0, 1.0), (3, 3.0)]
    with pytest.raises(ValueError, match=r"metrics.jsonl:2 must be a JSON object"):
        read_metrics(path, strict=True)
    path.write_text('{"step": 0}\n{"step": 1.5}\n')
    with pytest.raises(ValueError, match=r":2 has no integer 'step' \(got 1.5\)"):
        read_metrics(path, strict=True)
    path.write_text('{"step": 0}\n{"step": 1, "lo')
    with pytest.raises(ValueError, match=r":2 is not valid JSON"):
        read_metrics(path, strict=True)


def test_a_missing_file_is_no_records_unless_strict(tmp_path):
    assert read_metrics(tmp_path) == []
    with pytest.raises(FileNotFoundError, match="RUN_DIR/metrics.jsonl"):
        read_metrics(tmp_path, strict=True)
    assert metrics_path(tmp_path) == tmp_path / "metrics.jsonl"
    assert metrics_path(tmp_path / "other.jsonl") == tmp_path / "other.jsonl"


def test_records_of_older_runs_load(tmp_path):
    # a run written before NaN/inf were sanitised by the logger holds bare NaN tokens, which
    # Python's json reads; they are records like any other
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": NaN, "lr": 0.1}\n')
    (rec,) = read_metrics(tmp_path)
    assert rec == MetricsRecord(1, {"loss": rec.values["loss"], "lr": 0.1}) and math.isnan(rec.number("loss"))

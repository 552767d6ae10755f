"""headgeom.tracking.trajectory.read_metrics: every numeric metric of a metrics.jsonl as
(steps, values), gaps where a line lacks it, and clear errors on bad files (the record reader,
read_tracking, is tested with the record in test_tracking_record.py)."""
import json

import pytest

from headgeom.tracking import read_metrics

ROWS = [
    {"step": 0, "loss": 1.0, "heff_ambient_mean_lambda_min": -2e-6, "spread_z": 0.1, "cov_condition_z": 10.0},
    {"step": 5, "loss": 0.8, "flag": True},  # a step without tracking: a gap, not a zero; booleans are no metric
    {"step": 10, "loss": 0.7, "heff_ambient_mean_lambda_min": 3e-9, "spread_z": 0.2, "cov_condition_z": 1e6,
     "update_ratio": None, "note": "text is skipped", "sizes": [1, 2]},
    {"step": 20, "loss": 0.5, "heff_ambient_mean_lambda_min": -0.3, "spread_z": 0.25, "cov_condition_z": "inf"},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n", encoding="utf-8")
    return path


def test_read_metrics_keeps_finite_numbers_per_step(tmp_path):
    series = read_metrics(_write(tmp_path / "metrics.jsonl", ROWS))
    assert sorted(series) == ["cov_condition_z", "heff_ambient_mean_lambda_min", "loss", "spread_z"]
    assert series["loss"] == ([0, 5, 10, 20], [1.0, 0.8, 0.7, 0.5])
    assert series["cov_condition_z"] == ([0, 10], [10.0, 1e6])  # "inf" and null left out
    assert series["heff_ambient_mean_lambda_min"] == ([0, 10, 20], [-2e-6, 3e-9, -0.3])


@pytest.mark.parametrize("content, match", [
    ('{"step": 0, "loss": 1.0}\n{"step": 1, "loss"\n', "not valid JSON"),
    ('{"loss": 1.0}\n', "integer 'step'"),
    ('{"step": 1.5, "loss": 1.0}\n', "integer 'step'"),
    ('[1, 2]\n', "JSON object"),
    ('{"step": 0, "tag": "x"}\n', "no numeric metric"),
])
def test_bad_metrics_files_fail_clearly(tmp_path, content, match):
    path = tmp_path / "metrics.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        read_metrics(path)

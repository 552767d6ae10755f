"""headgeom.tracking.plots: a run's tracking figures written as PNG files, one per metric and a grid,
each eigenvalue drawn with the floor recorded beside it (the drawing itself:
tests/report/plots/test_plots_tracking.py)."""
import json

import pytest

from headgeom.tracking import plot_metrics, plot_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ROWS = [
    {"step": 0, "loss": 1.0, "heff_ambient_mean_lambda_min": -2e-6, "spread_z": 0.1, "cov_condition_z": 10.0},
    {"step": 5, "loss": 0.8},
    {"step": 10, "loss": 0.7, "heff_ambient_mean_lambda_min": 3e-9, "spread_z": 0.2, "cov_condition_z": 1e6},
    {"step": 20, "loss": 0.5, "heff_ambient_mean_lambda_min": -0.3, "spread_z": 0.25, "cov_condition_z": "inf"},
]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n", encoding="utf-8")
    return path


def test_plots_write_one_png_per_metric_and_a_grid(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    _write(run / "metrics.jsonl", ROWS)
    paths = plot_run(run)
    names = sorted(p.name for p in paths)
    assert names == sorted(["cov_condition_z.png", "heff_ambient_mean_lambda_min.png", "loss.png",
                            "spread_z.png", "tracking_grid.png"])
    for p in paths:
        assert p.parent == run / "figures" / "tracking"
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert not list((run / "figures" / "tracking").glob(".*.tmp"))  # atomic writes leave no temp files
    only = plot_metrics(run / "metrics.jsonl", tmp_path / "one", keys=["spread_z"])
    assert [p.name for p in only] == ["spread_z.png"]


def test_missing_file_and_unknown_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        plot_run(tmp_path)
    path = _write(tmp_path / "metrics.jsonl", ROWS)
    with pytest.raises(KeyError, match="not_a_metric"):
        plot_metrics(path, tmp_path / "out", keys=["not_a_metric"])


def test_each_eigenvalue_gets_its_recorded_floor_and_the_grid_all_chosen_metrics(tmp_path, monkeypatch):
    import headgeom.tracking.plots as plots

    calls = []
    monkeypatch.setattr(plots, "metric_figure", lambda key, steps, values, floor=None: calls.append((key, floor)))
    monkeypatch.setattr(plots, "metrics_grid", lambda series, floors: calls.append((list(series), floors)))
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: path)
    rows = [{"step": s, "heff_mse_mean_lambda_min": -1e-14, "heff_mse_mean_floor": f,
             "heff_mse_mean_op_lambda_max": 2.0, "spread_z": 0.1} for s, f in ((0, 1e-10), (10, 3e-10))]
    paths = plot_metrics(_write(tmp_path / "metrics.jsonl", rows), tmp_path / "figs",
                         keys=["heff_mse_mean_lambda_min", "heff_mse_mean_op_lambda_max", "spread_z"], grid=True)
    floor = ([0, 10], [1e-10, 3e-10])
    assert calls[:3] == [("heff_mse_mean_lambda_min", floor), ("heff_mse_mean_op_lambda_max", None),
                         ("spread_z", None)]  # no ..._op_floor recorded: drawn without a band
    assert calls[3] == (["heff_mse_mean_lambda_min", "heff_mse_mean_op_lambda_max", "spread_z"],
                        {"heff_mse_mean_lambda_min": floor})
    assert [p.name for p in paths] == ["heff_mse_mean_lambda_min.png", "heff_mse_mean_op_lambda_max.png",
                                       "spread_z.png", "tracking_grid.png"]

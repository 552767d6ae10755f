"""headgeom.tracking.plots: PNG figures from a small metrics.jsonl, and clear errors on bad files."""
import json

import pytest

from figure_checks import assert_tick_labels_apart, floor_band_artists
from headgeom.tracking import plot_metrics, plot_run, read_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ROWS = [
    {"step": 0, "loss": 1.0, "heff_ambient_mean_lambda_min": -2e-6, "spread_z": 0.1, "cov_condition_z": 10.0},
    {"step": 5, "loss": 0.8},  # a step without tracking: a gap, not a zero
    {"step": 10, "loss": 0.7, "heff_ambient_mean_lambda_min": 3e-9, "spread_z": 0.2, "cov_condition_z": 1e6,
     "update_ratio": None, "note": "text is skipped"},
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
    assert series["heff_ambient_mean_lambda_min"][0] == [0, 10, 20]


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


def test_missing_file_and_unknown_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        plot_run(tmp_path)
    path = _write(tmp_path / "metrics.jsonl", ROWS)
    with pytest.raises(KeyError, match="not_a_metric"):
        plot_metrics(path, tmp_path / "out", keys=["not_a_metric"])


def test_an_eigenvalue_within_its_recorded_floor_is_drawn_at_zero_inside_the_band(tmp_path, monkeypatch):
    import headgeom.tracking.plots as plots

    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig) or path)
    rows = [{"step": s, "heff_mse_mean_lambda_min": lam, "heff_mse_mean_lambda_max": 1.0 + s,
             "heff_mse_mean_floor": 1e-10 * (1.0 + s)} for s, lam in ((0, -1e-14), (10, -3e-13), (20, -0.2))]
    plot_metrics(_write(tmp_path / "metrics.jsonl", rows), tmp_path / "figs", keys=["heff_mse_mean_lambda_min"])
    (fig,) = drawn
    ax = fig.axes[0]
    assert list(ax.get_lines()[0].get_ydata()) == [0.0, 0.0, -0.2]  # round-off at 0, real curvature kept
    assert floor_band_artists(ax) and ax.get_yscale() == "symlog"
    assert ax.yaxis.get_transform().linthresh == pytest.approx(1e-10)  # the linear band is the floor
    assert_tick_labels_apart(ax)
    assert plots.floor_key("heff_mse_mean_op_lambda_min") == "heff_mse_mean_op_floor"
    assert plots.floor_key("spread_z") is None

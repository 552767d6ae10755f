"""The tracking figures (headgeom.report.plots.tracking): a metric against step, an eigenvalue
within its recorded floor at 0 inside the band, log and symlog axes for values spanning decades,
and a grid of four panels to a row."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_tick_labels_apart, floor_band_artists  # noqa: E402
from headgeom.report.plots import tracking as plots  # noqa: E402


def test_an_eigenvalue_within_its_recorded_floor_is_drawn_at_zero_inside_the_band():
    steps = [0, 10, 20]
    floor = (steps, [1e-10 * (1.0 + s) for s in steps])
    fig = plots.metric_figure("heff_mse_mean_lambda_min", steps, [-1e-14, -3e-13, -0.2], floor=floor)
    (ax,) = fig.axes
    assert list(ax.get_lines()[0].get_ydata()) == [0.0, 0.0, -0.2]  # round-off at 0, real curvature kept
    assert floor_band_artists(ax) and ax.get_yscale() == "symlog"
    assert ax.yaxis.get_transform().linthresh == pytest.approx(1e-10)  # the linear band is the floor
    assert_tick_labels_apart(ax)
    assert ax.get_title() == "heff_mse_mean_lambda_min" and ax.get_xlabel() == "step"


def test_without_a_floor_the_values_are_drawn_as_recorded():
    fig = plots.metric_figure("heff_mse_mean_lambda_min", [0, 10, 20], [-1e-14, -3e-13, -0.2])
    (ax,) = fig.axes
    assert list(ax.get_lines()[0].get_ydata()) == [-1e-14, -3e-13, -0.2]
    assert not floor_band_artists(ax) and ax.get_yscale() == "symlog"  # signed, spanning 13 decades


@pytest.mark.parametrize("values, scale", [([1.0, 2.0, 5.0], "linear"), ([10.0, 1e3, 1e6], "log"),
                                           ([0.0, 0.0, 0.0], "linear"), ([1.0, -2.0, 3.0], "linear")])
def test_the_y_axis_is_logarithmic_only_across_three_decades(values, scale):
    (ax,) = plots.metric_figure("m", [0, 1, 2], values).axes
    assert ax.get_yscale() == scale


def test_markers_only_on_short_series():
    (short,) = plots.metric_figure("m", list(range(30)), [1.0] * 30).axes
    (long,) = plots.metric_figure("m", list(range(31)), [1.0] * 31).axes
    assert short.get_lines()[0].get_marker() not in (None, "None", "")
    assert long.get_lines()[0].get_marker() in (None, "None", "")


def test_the_grid_has_four_panels_to_a_row_in_the_given_order_with_the_floors():
    series = {f"m{i}": ([0, 1], [1.0, 2.0 + i]) for i in range(5)}
    series["lam"] = ([0, 1], [-1e-14, -0.5])
    fig = plots.metrics_grid(series, {"lam": ([0, 1], [1e-10, 1e-10])})
    assert [ax.get_title() for ax in fig.axes] == list(series)
    assert [ax.get_subplotspec().get_geometry()[:2] for ax in fig.axes] == [(2, 4)] * 6
    assert fig.get_size_inches() == pytest.approx((16, 5.6))
    assert [bool(floor_band_artists(ax)) for ax in fig.axes] == [False] * 5 + [True]
    assert list(fig.axes[-1].get_lines()[0].get_ydata()) == [0.0, -0.5]
    one = plots.metrics_grid({"m": ([0], [1.0])})
    assert len(one.axes) == 1 and one.get_size_inches() == pytest.approx((4, 2.8))
    with pytest.raises(ValueError, match="at least one series"):
        plots.metrics_grid({})

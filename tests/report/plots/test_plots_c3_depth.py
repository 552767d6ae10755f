"""C3's figure (headgeom.report.plots.c3_depth): a distinct error-bar line per depth (mean,
min-max over seeds, only finite positive ε), the linear level, the threshold, one legend outside."""
import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside, line_styles  # noqa: E402
from headgeom.report.plots import c3_depth as plots  # noqa: E402

N_SERIES = 16


def test_sixteen_depths_are_distinct_and_the_legend_is_outside():
    depths = tuple(range(1, N_SERIES + 1))
    eps = {(dp, w): [0.01 * dp * w, 0.02 * dp * w] for dp in depths for w in (8, 32)}
    fig = plots.eps_vs_width(eps, depths, (8, 32), 0.05, "mse", 4, 3)
    styles = line_styles(fig.axes[0], prefix="depth ")  # the threshold line aside
    assert len(styles) == N_SERIES and len({(c, ls) for c, ls, _ in styles}) == N_SERIES
    assert assert_legends_outside(fig) == 1


def test_mean_and_min_max_of_finite_values_and_the_linear_level():
    eps = {(1, 8): [0.1, 0.3, math.inf, 0.0], (1, 32): [math.inf], (0, 0): [0.4, math.inf]}
    ax = plots.eps_vs_width(eps, (1,), (8, 32), 0.05, "mse", 4, 3).axes[0]
    (bars,) = ax.containers
    assert list(bars.lines[0].get_xdata()) == [8] and list(bars.lines[0].get_ydata()) == pytest.approx([0.2])
    (segment,) = bars.lines[2][0].get_segments()  # the bar spans min..max of the finite positive values
    assert [y for _, y in segment] == pytest.approx([0.1, 0.3])
    levels = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines() if ln.get_label().startswith(("linear", "thr"))}
    assert levels == {"linear (mean of 1/2 finite)": pytest.approx(0.4), "threshold": pytest.approx(0.05)}
    assert ax.get_title() == "C3: fitted isotropy along γ, mse loss, d=4, k=3"

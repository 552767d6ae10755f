"""C5's figure (headgeom.report.plots.c5_relu_gap): a panel per head, a distinct line per run
kind and BN setting, the seed mean that ends where a seed stopped, one legend outside."""
import math

import matplotlib

matplotlib.use("Agg")

from figure_checks import assert_legends_outside, line_styles  # noqa: E402
from headgeom.report.plots import c5_relu_gap as plots  # noqa: E402

N_SERIES = 16


def _cell(kinds, curve):
    return {"runs": {k: {"t": [0.0, 1.0, 2.0], "spread_u": list(curve)} for k in kinds}}


def test_many_step_sizes_are_distinct_and_the_legend_is_outside():
    kinds = ["flow"] + [f"gd_lr={0.001 * (i + 1):g}" for i in range(N_SERIES - 1)]  # 16 kinds, x2 for BN
    by_head = {h: {b: [_cell(kinds, [1.0, 0.5, 0.1])] for b in (False, True)} for h in ("relu", "silu")}
    fig = plots.spread_vs_time(by_head, kinds, "u", seeds=1)
    assert [ax.get_title() for ax in fig.axes] == ["relu", "silu"]
    for ax in fig.axes:
        styles = line_styles(ax)
        assert len(styles) == 2 * N_SERIES and len({(c, ls) for c, ls, _ in styles}) == 2 * N_SERIES
        assert ax.get_yscale() == "log"
    assert assert_legends_outside(fig) == 1
    assert fig.axes[0].get_ylabel() == "u spread (mean over 1 seed)"


def test_the_mean_over_seeds_ends_where_a_seed_stopped():
    by_head = {"relu": {False: [_cell(["flow"], [1.0, 0.5, 0.2]), _cell(["flow"], [3.0, None, None])]}}
    (line,) = plots.spread_vs_time(by_head, ["flow"], "u", seeds=2).axes[0].get_lines()
    y = list(line.get_ydata())
    assert y[0] == 2.0 and math.isnan(y[1]) and math.isnan(y[2])
    assert line.get_label() == "flow"


def test_a_head_without_cells_for_one_bn_setting_draws_only_the_other():
    by_head = {"relu": {False: [], True: [_cell(["flow"], [1.0, 0.5, 0.2])]}}
    (line,) = plots.spread_vs_time(by_head, ["flow"], "u", seeds=1).axes[0].get_lines()
    assert line.get_label() == "flow +BN"

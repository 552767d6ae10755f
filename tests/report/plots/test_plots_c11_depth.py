"""C11's figure (headgeom.report.plots.c11_depth): per panel the seeds as dots and their mean per
depth as a line (non-finite seeds left out of the dots), log panels at level 1, chance on accuracy."""
import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c11_depth as plots  # noqa: E402
from headgeom.report.style import CHANCE_GID  # noqa: E402


def _by_key(panels):
    by = {key: {d: {s: 2.0 * d + s for s in range(2)} for d in (1, 2, 3)} for _, keys, _ in panels for key, _ in keys}
    by["knn[z]"] = {1: {0: 0.5, 1: math.nan}, 2: {0: 0.6, 1: 0.7}}  # a seed without a value; depth 3 failed
    return by


def test_dots_per_seed_mean_lines_and_levels():
    panels = plots.panels(with_l2=False)
    fig = plots.depth(panels, _by_key(panels), (3, 1, 2), {10}, "quick, shapes")
    comp, acc, change = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [title for title, _, _ in panels]
    assert comp.get_yscale() == change.get_yscale() == "log" and acc.get_yscale() == "linear"
    (knn,) = [ln for ln in acc.get_lines() if ln.get_label() == "kNN"]
    off = 0.08 * (0 - 0.5)
    assert list(knn.get_xdata()) == pytest.approx([1 + off, 2 + off])
    assert knn.get_ydata()[1] == pytest.approx(0.65)
    dots = [tuple(p) for p in acc.collections[0].get_offsets()]
    assert dots == [pytest.approx((1 + off, 0.5)), pytest.approx((2 + off, 0.6)), pytest.approx((2 + off, 0.7))]
    assert [ln.get_ydata()[0] for ln in acc.get_lines() if ln.get_gid() == CHANCE_GID] == [pytest.approx(0.1)]
    assert [ln.get_ydata()[0] for ln in comp.get_lines() if ln.get_label().startswith("_")] == [1.0]
    assert list(acc.get_xticks()) == [1, 2, 3]
    assert fig._suptitle.get_text().startswith("C11: depth ablation (quick, shapes)")
    assert assert_legends_outside(fig) == 3


def test_the_paper_reading_joins_the_compression_panel_and_mixed_classes_draw_no_chance():
    panels = plots.panels(with_l2=True)
    assert [key for key, _ in panels[0][1]][-1] == "trace_ratio[l2]"
    acc = plots.depth(panels, _by_key(panels), (1, 2, 3), {10, 100}, "quick, shapes").axes[1]
    assert not [ln for ln in acc.get_lines() if ln.get_gid() == CHANCE_GID]

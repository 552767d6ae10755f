"""C12's figure (headgeom.report.plots.c12_guillotine): accuracy along the head per probe (raw z
in, and z/|z| in where measured), chance at 1/C (1/4 for rotation), one legend off the data."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c12_guillotine as plots  # noqa: E402
from headgeom.report.style import CHANCE_GID  # noqa: E402

TITLES = {"knn": "knn", "linear": "linear", "rotation": "rotation"}


def _cell(acc, points=("z", "head.0", "head.1"), **extra):
    return {"points": list(points), "accuracy": {p: {pt: acc for pt in points} for p in TITLES}, **extra}


def _chance(fig):
    return {ax.get_title(): [float(ln.get_ydata()[0]) for ln in ax.get_lines() if ln.get_gid() == CHANCE_GID]
            for ax in fig.axes}


def test_chance_at_one_over_c_and_the_legend_off_the_data():
    fig = plots.probes([_cell(0.1, num_classes=10) for _ in range(3)], TITLES)
    assert _chance(fig) == {"knn": [0.1], "linear": [0.1], "rotation": [0.25]}  # the rotation probe has 4 classes
    assert assert_legends_outside(fig) == 1
    # cells that did not record num_classes: only the rotation probe's chance is known
    fig = plots.probes([_cell(0.1)], TITLES)
    assert [sum(ln.get_gid() == CHANCE_GID for ln in ax.get_lines()) for ax in fig.axes] == [0, 0, 1]


def test_mean_and_std_over_seeds_along_raw_and_l2_points():
    points = ("z", "head.0", "head.1", "l2z/head.0", "l2z/head.1")
    fig = plots.probes([_cell(0.4, points), _cell(0.6, points)], {"knn": "kNN"})
    (ax,) = fig.axes
    bars = {c.get_label(): c for c in ax.containers}
    assert set(bars) == {"raw", "l2 input"}
    for c in bars.values():  # z, then two head points each
        x, y = c.lines[0].get_data()
        assert list(x) == [0, 1, 2] and list(y) == pytest.approx([0.5] * 3)
        (segment, *_) = c.lines[2][0].get_segments()
        assert [y for _, y in segment] == pytest.approx([0.5 - 0.02 ** 0.5, 0.5 + 0.02 ** 0.5])  # std, ddof=1
    assert ax.get_title() == "kNN"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["z", "head.0", "head.1"]
    # without l2 points only the raw series
    assert [c.get_label() for c in plots.probes([_cell(0.5)], {"knn": "kNN"}).axes[0].containers] == ["raw"]

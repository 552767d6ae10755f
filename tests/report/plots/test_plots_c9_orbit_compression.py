"""C9's figure (headgeom.report.plots.c9_orbit_compression): a column per backbone, a row for
compression and one for selectivity, a point per seed with its CI, a legend beside each row."""
import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c9_orbit_compression as plots  # noqa: E402

FAMILIES = ("rotation", "hue")


def _cell(value):
    est = {"value": value, "ci": [value / 2, value * 2]}
    return {"families": {f: {v: {k: est for _, series in plots.ROWS for _, k, _ in series} for v in ("l2", "raw")}
                         for f in FAMILIES}}


def test_estimate_bars_are_distances_to_the_ci_ends():
    assert plots.estimate_bars({"value": 2.0, "ci": [1.5, 3.0]}) == (2.0, 0.5, 1.0)
    assert plots.estimate_bars({"value": 2.0, "ci": [2.5, 1.0]}) == (2.0, 0.0, 0.0)  # CI beside the value
    value, lo, hi = plots.estimate_bars({"value": 2.0, "ci": None})
    assert value == 2.0 and math.isnan(lo) and math.isnan(hi)


def test_a_point_per_seed_and_family_and_a_legend_beside_each_row():
    fig = plots.compression({"resnet18": [_cell(4.0), _cell(8.0)], "vit_tiny": []}, FAMILIES)
    assert len(fig.axes) == 4
    assert [ax.get_title() for ax in fig.axes] == ["resnet18 (2 seeds)", "vit_tiny (0 seeds)"] * 2
    top = fig.axes[0]
    n_series = len(plots.ROWS[0][1])
    assert len(top.containers) == 2 * n_series  # a container per series and seed
    x, y = top.containers[0].lines[0].get_data()
    first_series_offset = 0.12 * (0 - (n_series - 1) / 2)
    assert list(x) == pytest.approx([first_series_offset, 1 + first_series_offset]) and list(y) == [4.0, 4.0]
    x, _ = top.containers[1].lines[0].get_data()  # the second seed, shifted right
    assert list(x) == pytest.approx([first_series_offset + 0.03, 1 + first_series_offset + 0.03])
    labels = [c.get_label() for c in top.containers]
    assert labels[0] == plots.ROWS[0][1][0][2] and labels[1].startswith("_")  # one legend entry per series
    assert top.get_yscale() == "log"
    assert assert_legends_outside(fig) == 2

"""The activation ablation's figures (headgeom.report.plots.activation_ablation): sixteen activations
drawn distinct with one legend outside; round-off λ at 0 in the floor band; kNN means along the head
with the chance line."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside, floor_band_artists, line_styles  # noqa: E402
from headgeom.report.plots import activation_ablation as plots  # noqa: E402
from headgeom.report.style import CHANCE_GID  # noqa: E402

NAMES = tuple(f"act{i}" for i in range(16))


def _cell(i):
    return {"steps": [0, 1], "spread_projector": [0.1, 0.1], "knn": {"z": 0.5, "head.0": 0.4}, "num_classes": 10,
            "lambda_max[ambient]": [2.0, 2.0],
            "lambda_min[ambient]": [-1e-14, -1e-15] if i % 2 else [-0.5, -1e-3]}  # even: negative; odd: round-off


def test_many_activations_are_distinct_with_chance_and_legends_outside():
    groups = {a: [_cell(i)] for i, a in enumerate(NAMES)}
    figures = {"lambda_min": plots.lambda_min(groups, ("ambient",), 1e-10), "spread": plots.spread(groups),
               "knn": plots.knn(groups, NAMES, 5)}
    for name, fig in figures.items():
        assert assert_legends_outside(fig) == 1, name
        styles = line_styles(fig.axes[0])
        assert len(styles) == 16 and len({(c, ls) for c, ls, _ in styles}) == 16, name
    knn_ax = figures["knn"].axes[0]
    assert [float(ln.get_ydata()[0]) for ln in knn_ax.get_lines() if ln.get_gid() == CHANCE_GID] == [0.1]
    lam_ax = figures["lambda_min"].axes[0]
    assert floor_band_artists(lam_ax)
    by_label = {ln.get_label(): list(ln.get_ydata()) for ln in lam_ax.get_lines()}
    assert by_label["act1"] == [0.0, 0.0] and by_label["act0"] == [-0.5, -1e-3]


def test_knn_means_over_seeds_at_every_point_any_seed_measured():
    groups = {"relu": [{"knn": {"z": 0.5, "head.0": 0.3}}, {"knn": {"z": 0.7, "head.0": 0.5, "head.1": 0.2}}],
              "tanh": [{"knn": {}}]}  # nothing measured: no line
    ax = plots.knn(groups, ("tanh", "relu", "gelu"), 7).axes[0]
    (bars,) = ax.containers
    assert bars.get_label() == "relu"
    x, y = bars.lines[0].get_data()
    assert list(x) == [0, 1, 2] and list(y) == pytest.approx([0.6, 0.4, 0.2])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["z", "head.0", "head.1"]
    assert "k=7" in ax.get_ylabel()
    assert not [ln for ln in ax.get_lines() if ln.get_gid() == CHANCE_GID]  # no num_classes recorded

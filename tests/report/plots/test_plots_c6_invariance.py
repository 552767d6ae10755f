"""C6's figure (headgeom.report.plots.c6_invariance): a panel per metric and stage, the quotients
of every seed pooled on common log bins, an all-zero panel left empty, one legend outside."""
import math

import matplotlib

matplotlib.use("Agg")

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c6_invariance as plots  # noqa: E402

NAMES = {"head_G": "G", "backbone_G": "J_fᵀJ_f"}
STAGES = ("before", "after")


def _seed(scale):
    """One seed's quotients: tangents 10^-2 · scale (one negative), controls ~1, content 10^1."""
    q = {"tangent": [-0.01 * scale, 0.01 * scale], "random": [1.0, 2.0], "content": [10.0, 0.0]}
    return {f"{s}.{n}": q for s in STAGES for n in NAMES}


def _bar_heights(ax):
    return [p.get_height() for c in ax.containers for p in c.patches if p.get_height() > 0]


def test_panels_pool_the_seeds_on_log_bins_and_the_legend_is_outside():
    fig = plots.quotient_histograms([_seed(1.0), _seed(10.0)], "joint", NAMES, STAGES)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["G — before", "G — after", "J_fᵀJ_f — before", "J_fᵀJ_f — after"]
    assert fig._suptitle.get_text().startswith("C6 (joint)") and fig._suptitle.get_text().endswith("2 seeds pooled")
    ax = fig.axes[0]
    # the bins span log10 of the smallest to the largest non-zero |q| over all kinds and seeds: -2 .. 1
    lo, hi = ax.get_xlim()
    assert lo <= -2 and hi >= 1
    assert ax.get_legend_handles_labels()[1] == ["tangent", "random", "content"]
    # |q| pooled: the tangents at 10^-2 (twice) and 10^-1 (twice) fill two bins, the first at the left edge
    tangent, random = ax.containers  # filled bars; content is a step outline
    tangent_x = sorted(p.get_x() for p in tangent.patches if p.get_height() > 0)
    assert len(tangent_x) == 2 and math.isclose(tangent_x[0], -2.0, abs_tol=1e-9)
    assert math.isclose(sum(p.get_height() * p.get_width() for p in tangent.patches), 1.0)  # a density
    assert len([p for p in random.patches if p.get_height() > 0]) == 2
    assert assert_legends_outside(fig) == 1


def test_a_panel_whose_quotients_are_all_zero_stays_empty():
    seed = _seed(1.0)
    seed["after.backbone_G"] = {"tangent": [0.0], "random": [0.0], "content": [0.0]}
    fig = plots.quotient_histograms([seed], "head_only", NAMES, STAGES)
    empty = fig.axes[3]
    assert empty.get_title() == "" and not _bar_heights(empty) and not empty.patches
    assert _bar_heights(fig.axes[2]) and fig._suptitle.get_text().endswith("1 seed pooled")

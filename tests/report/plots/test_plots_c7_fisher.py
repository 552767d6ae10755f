"""C7's figure (headgeom.report.plots.c7_fisher): a panel per regime, the mean ranks over seeds
per tolerance, the bound rank(I_z) after − dim V_aug, the stated tolerance marked, one legend outside."""
import matplotlib

matplotlib.use("Agg")

from figure_checks import assert_legends_outside, line_styles  # noqa: E402
from headgeom.report.plots import c7_fisher as plots  # noqa: E402

STAGES = ("before", "after")
TOLS = (1e-2, 1e-6)


def _cell(iz, ih):
    """Ranks per stage and tolerance: I_z = iz, I_h = ih after training and iz before; smaller at 1e-2."""
    m = {}
    for s in STAGES:
        for t in TOLS:
            drop = 1.0 if t == 1e-2 else 0.0
            m[f"{s}.rank_Iz@{t:g}"] = iz - drop
            m[f"{s}.rank_Ih@{t:g}"] = (ih if s == "after" else iz) - drop
    return m


def test_mean_ranks_the_bound_and_the_tolerance_line():
    by_regime = {"joint": [_cell(8.0, 6.0), _cell(8.0, 5.0)], "head_only": [_cell(7.0, 7.0)]}
    fig = plots.ranks_vs_tolerance(by_regime, STAGES, TOLS, 1e-3, dim_aug=2)
    assert [ax.get_title() for ax in fig.axes] == ["joint", "head_only"]
    joint = {ln.get_label(): list(ln.get_ydata()) for ln in fig.axes[0].get_lines()}
    assert joint["rank_Ih (after)"] == [4.5, 5.5] and joint["rank_Iz (before)"] == [7.0, 8.0]
    assert joint["bound rank_Iz (after) - 2"] == [5.0, 6.0]
    tol_lines = [ln for ln in fig.axes[0].get_lines() if ln.get_label().startswith("_")]
    assert [list(ln.get_xdata()) for ln in tol_lines] == [[1e-3, 1e-3]]
    assert fig.axes[0].get_xscale() == "log"
    # I_z and I_h in two colours, before dashed and after solid: four distinct series and the bound
    styles = line_styles(fig.axes[0])
    assert len(styles) == 5 and len({(c, ls) for c, ls, _ in styles}) == 5
    assert assert_legends_outside(fig) == 1

"""The collapse grid's figure (headgeom.report.plots.collapse_grid): spread and λ_min (round-off
from the relative floor drawn at 0) against the step, a style per run."""
import matplotlib

matplotlib.use("Agg")

from figure_checks import assert_legends_outside, floor_band_artists  # noqa: E402
from headgeom.report.plots import collapse_grid as plots  # noqa: E402


def test_spread_and_lambda_min_with_round_off_at_zero():
    groups = {"relu-lr0.01": [{"steps": [0, 1], "spread_projector": [0.2, 0.1], "lambda_min": [-1e-12, -0.5],
                               "lambda_max": [1.0, 1.0]}],
              "silu-bn-lr0.1": [{"steps": [0, 1], "spread_projector": [0.2, 0.3], "lambda_min": [0.1, 0.2],
                                 "lambda_max": [1.0, 1.0]}]}
    fig = plots.spread(groups, rel_floor=1e-10)
    spread_ax, lam_ax = fig.axes
    assert spread_ax.get_ylabel() == "spread of L2-normalised u" and lam_ax.get_ylabel() == "λ_min(H_eff), ambient"
    drawn = {ln.get_label(): list(ln.get_ydata()) for ln in lam_ax.get_lines() if not ln.get_label().startswith("_")}
    assert drawn == {"relu-lr0.01": [0.0, -0.5], "silu-bn-lr0.1": [0.1, 0.2]}  # |λ| ≤ 1e-10 · max|λ| is zero
    assert floor_band_artists(lam_ax)
    assert assert_legends_outside(fig) == 1

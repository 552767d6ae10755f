"""C8's figures (headgeom.report.plots.c8_hessian_tracking): a λ_min panel per reading, spread of u
and z, the gradient norms of head and backbone on one log range."""
import matplotlib

matplotlib.use("Agg")

from headgeom.report.plots import c8_hessian_tracking as plots  # noqa: E402


def _cell(scale):
    return {"steps": [0, 1, 2], "spread_projector": [0.5, 0.4, 0.3], "spread_z": [0.6, 0.6, 0.5],
            "grad_norm_head": [None, 1e-3 * scale, 1e-4 * scale], "grad_norm_backbone": [None, 10.0, 1.0],
            "lambda_min[ambient]": [-0.1, -0.2, 0.3], "lambda_min[tangential]": [0.1, 0.2, 0.3],
            "lambda_max[ambient]": [1.0] * 3, "lambda_max[tangential]": [1.0] * 3}


GROUPS = {"normal-silu": [_cell(1.0)], "collapsed-relu": [_cell(2.0)]}


def test_a_lambda_min_panel_per_reading():
    fig = plots.lambda_min(GROUPS, ("ambient", "tangential"), 1e-10)
    assert [ax.get_ylabel() for ax in fig.axes] == ["λ_min(H_eff), ambient reading", "λ_min(H_eff), tangential reading"]
    drawn = {ln.get_label(): list(ln.get_ydata()) for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")}
    assert drawn == {"normal-silu": [-0.1, -0.2, 0.3], "collapsed-relu": [-0.1, -0.2, 0.3]}


def test_spread_of_u_and_z():
    fig = plots.spread(GROUPS)
    assert [ax.get_ylabel() for ax in fig.axes] == ["spread of L2-normalised u", "spread of L2-normalised z"]


def test_gradient_norms_on_one_log_range_without_step_zero():
    head_ax, backbone_ax = plots.grad_norm(GROUPS).axes[:2]
    assert head_ax.get_yscale() == backbone_ax.get_yscale() == "log"
    assert head_ax.get_ylim() == backbone_ax.get_ylim()  # one range: head and backbone compare directly
    drawn = {ln.get_label(): list(ln.get_xdata()) for ln in head_ax.get_lines()}
    assert drawn == {"normal-silu": [1, 2], "collapsed-relu": [1, 2]}  # no gradient at step 0

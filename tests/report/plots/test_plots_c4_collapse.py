"""C4's figures (headgeom.report.plots.c4_collapse): λ_min per activation and reading (round-off
drawn at 0), and the sweeps (median over seeds, λ relative to max|λ|, the init dotted only where comparable)."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c4_collapse as plots  # noqa: E402

FLOOR = 1e-10


def test_lambda_min_means_over_seeds_with_round_off_at_zero_and_a_panel_per_state_with_cells():
    groups = {("equilibrium", "ambient", "silu"): [{"lambda_min_rel_H": -0.2}, {"lambda_min_rel_H": -0.4}],
              ("equilibrium", "ambient", "relu"): [{"lambda_min_rel_H": 5e-11}, {"lambda_min_rel_H": -5e-11}],
              ("equilibrium", "tangential", "silu"): [{"lambda_min_rel_H": 0.1}]}
    fig = plots.lambda_min(groups, ("equilibrium", "scaled-equilibrium"), ("ambient", "tangential"),
                           ("relu", "silu"), FLOOR, "4-8-3")
    (ax,) = fig.axes  # no cell of the scaled state: no panel
    bars = {c.get_label(): c for c in ax.containers}
    x, y = bars["ambient"].lines[0].get_data()
    assert list(x) == pytest.approx([-0.2, 0.8]) and list(y) == pytest.approx([0.0, -0.3])  # ±5e-11 is round-off
    x, y = bars["tangential"].lines[0].get_data()
    assert list(x) == pytest.approx([1.2]) and list(y) == pytest.approx([0.1])
    assert ax.get_title() == "equilibrium" and fig._suptitle.get_text().endswith("heads 4-8-3")
    assert assert_legends_outside(fig) == 1


def _swept(lams, floors):
    return {"sweep_grid": [0.01, 0.1, 1.0], "sweep_lambda_min": lams, "sweep_floor": floors, "point_magnitude": 0.05}


def test_sweep_medians_relative_lambda_and_the_init_only_where_comparable():
    groups = {("equilibrium", "mse", "silu"): [_swept([-2.0, 1.0, 4.0], [1e-10, 1e-10, 1e-10]),
                                               _swept([-4.0, 3.0, 8.0], [2e-10, 1e-10, 0.0]),
                                               _swept([-1.0, 2.0, 2.0], [1e-10, 1e-10, 1e-10])],
              ("scaled-equilibrium", "mse", "silu"): [_swept([-1.0, -1.0, 1.0], [1e-10] * 3)],
              ("pseudo-collapsed", "mse", "silu"): [{"point_magnitude": 0.3}, {"point_magnitude": 0.5}]}
    fig = plots.lambda_min_sweep(groups, ("equilibrium", "scaled-equilibrium"), ("mse", "ambient"), ("silu",), FLOOR,
                                 {"mse": "residual", "ambient": "angle"}, {"scaled-equilibrium"}, "4-8-3")
    eq, scaled = fig.axes  # one reading with cells: a column
    (line,) = [ln for ln in eq.get_lines() if ln.get_label() == "silu"]
    # λ / max|λ| with max|λ| = floor / rel_floor (1 or 2 here); a zero floor (max|λ| = 0) reads 0
    assert list(line.get_ydata()) == pytest.approx([-2.0, 2.0, 2.0])
    assert eq.get_xlabel() == "‖u − c_i‖ (residual)" and eq.get_title() == "equilibrium, mse"
    dotted = lambda ax: [ln.get_xdata()[0] for ln in ax.get_lines() if ln.get_linestyle() == ":"]  # noqa: E731
    assert dotted(eq) == [] and dotted(scaled) == [pytest.approx(0.4)]
    assert assert_legends_outside(fig) == 1


def test_gap_sweep_draws_both_states_per_reading_with_the_measured_gap_and_ratio_one():
    nan = float("nan")
    curves = {"tangential": {"silu": {"measured": ([4.0, 20.0, 40.0], [2.0, 9.0, 20.0], 1),
                                      "synthetic": ([1.0, 6.0, 48.0], [0.8, nan, 80.0], None)}},
              "mse": {"silu": {"measured": ([4.0, 20.0, 40.0], [0.04, 0.2, 0.4], 1)}}}
    fig = plots.gap_sweep(curves, 20.0, "4-8-3")
    tangential, mse = fig.axes[:2]
    lines = {ln.get_label(): ln for ln in tangential.get_lines()}
    assert list(lines["silu, measured init"].get_ydata()) == [2.0, 9.0, 20.0]
    assert lines["silu, measured init"].get_linestyle() == "-" and lines["silu, synthetic init"].get_linestyle() == "--"
    assert lines["mean measured gap 20°"].get_xdata()[0] == 20.0 and lines["threshold (ratio 1)"].get_ydata()[0] == 1.0
    assert list(lines["the state as measured"].get_xdata()) == [20.0]  # the measured state ringed
    assert tangential.get_xscale() == "log" and tangential.get_yscale() == "log" and mse.get_title() == "mse"
    assert assert_legends_outside(fig) == 1
    # without a measured gap, no line for it
    fig = plots.gap_sweep(curves, None, "4-8-3")
    assert not any(ln.get_label().startswith("mean measured gap") for ln in fig.axes[0].get_lines())

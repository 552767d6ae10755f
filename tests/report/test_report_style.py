"""The shared figure style (headgeom.report.style) and the trajectory figures built with it:
distinct series, legends outside the data area, readable symlog ticks, the round-off band of λ."""
import math

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from figure_checks import (assert_legends_outside, assert_tick_labels_apart, floor_band_artists,  # noqa: E402
                           line_styles)
from headgeom.report import style  # noqa: E402
from headgeom.report.trajectories import floors_of, trajectory_figure  # noqa: E402

N_SERIES = 16
REL_FLOOR = 1e-10  # the engine's default (headgeom.geometry.spectrum)


# ---------------------------------------------------------------- style helpers
def test_series_styles_distinct_for_a_large_grid():
    styles = style.series_styles(40)
    pairs = [(s["color"], s["linestyle"]) for s in styles]  # distinct even without the markers
    assert len(set(pairs)) == 40
    # the two runs that shared a colour before (0 and 10) now differ in line style and marker
    assert styles[0]["color"] == styles[10]["color"]
    assert styles[0]["linestyle"] != styles[10]["linestyle"] and styles[0]["marker"] != styles[10]["marker"]
    # a second grouping (BN) of the same series: other line styles, so 20 series x 2 stay distinct
    both = {(s["color"], s["linestyle"]) for s in (style.series_style(i, v) for i in range(20) for v in (0, 1))}
    assert len(both) == 40
    with pytest.raises(ValueError, match=">= 0"):
        style.series_style(-1)
    with pytest.raises(ValueError, match="variant 0 or 1"):
        style.series_style(0, variant=2)


def test_zero_within_floor_and_floor_of_extremes():
    floors = style.roundoff_floor([-1e-14, -0.5, None], [2.0, 1.0, 1.0], REL_FLOOR)
    assert floors[0] == pytest.approx(2e-10) and floors[1] == pytest.approx(1e-10) and floors[2] is None
    assert style.zero_within_floor([-1e-14, -0.5, 3e-15, None], floors[:2] + [1e-10, 1e-10]) == [0.0, -0.5, 0.0, None]
    assert style.zero_within_floor([3e-15], [None]) == [3e-15]  # no floor known: drawn as recorded
    # a value exactly at the floor is zero (the engine counts |λ| <= floor as zero)
    assert style.zero_within_floor([-1e-10], [1e-10]) == [0.0]
    with pytest.raises(ValueError, match="one floor per value"):
        style.zero_within_floor([1.0, 2.0], [1.0])


def test_chance_line_at_one_over_c():
    fig = Figure()
    ax = fig.add_subplot()
    line = style.chance_line(ax, 10)
    assert line.get_gid() == style.CHANCE_GID and list(line.get_ydata()) == [0.1, 0.1]
    assert "1/10" in line.get_label()
    with pytest.raises(ValueError, match=">= 2"):
        style.chance_line(ax, 1)


def test_legend_outside_right_and_below_with_many_entries():
    for where in ("right", "below"):
        fig, ax = style.new_figure(figsize=(4, 3))
        for i, s in enumerate(style.series_styles(N_SERIES)):
            ax.plot([0, 1, 2], [i, i + 1, i], label=f"series {i}", **s)
            ax.plot([0, 1, 2], [i, i, i], label=f"series {i}", **s)  # duplicates are merged
        leg = style.legend_outside(ax, where)
        assert len(leg.get_texts()) == N_SERIES
        assert assert_legends_outside(fig) == 1
    with pytest.raises(ValueError, match="'right' or 'below'"):
        style.legend_outside(ax, "left")


@pytest.mark.parametrize("values,floor", [
    ([-1e-14, -3e-7, -0.3, -1e-3, 2e-2], 1e-13),   # many decades on both sides
    ([-1e-14, -3e-7, -0.3, -1e-3], 0.0),             # no floor: linthresh from the data
    ([1e-12, 5e3], 0.0),                             # positive only
    ([0.0, 0.0], 1e-14),                             # every value in the band
])
def test_signed_log_axis_ticks_do_not_collide(values, floor):
    fig, ax = style.new_figure(figsize=(4, 3))
    ax.plot(range(len(values)), values)
    linthresh = style.signed_log_axis(ax, values, floor=floor)
    nonzero = [abs(v) for v in values if v]
    assert linthresh == (floor if floor else min(nonzero))
    assert ax.get_yscale() == "symlog"
    assert 0.0 in list(ax.get_yticks())
    assert_tick_labels_apart(ax)


# ---------------------------------------------------------------- trajectory figures (C8, grid, ablation)
def _groups(n_runs: int = N_SERIES, seeds: int = 2):
    steps = [0, 15, 30, 45, 60]
    groups = {}
    for i in range(n_runs):
        ms = []
        for s in range(seeds):
            psd = i % 2 == 0  # ReLU / linear heads: exactly PSD, λ_min is round-off of 0
            lmax = [1.0 + 0.1 * k + s for k in range(len(steps))]
            lmin = ([-1e-14 * (k + 1) for k in range(len(steps))] if psd
                    else [-(10.0 ** -(1 + k)) * (1 + i) for k in range(len(steps))])
            ms.append({"steps": steps, "lambda_min[mse]": lmin, "lambda_max[mse]": lmax,
                       "spread_projector": [0.1 * (i + 1) + 0.01 * k for k in range(len(steps))]})
        groups[f"run {i} (lr 0.{i})"] = ms
    return groups


def test_trajectory_figure_many_runs_distinct_legend_outside_and_floor_band():
    groups = _groups()
    fig = trajectory_figure(groups, [("spread_projector", "spread"), ("lambda_min[mse]", "λ_min")], "t",
                            rel_floor=REL_FLOOR)
    spread_ax, lam_ax = fig.axes
    for ax in (spread_ax, lam_ax):
        styles = line_styles(ax)  # one style per run, the seeds share it
        assert len(styles) == N_SERIES and len({(c, ls) for c, ls, _ in styles}) == N_SERIES

    assert assert_legends_outside(fig) == 1
    # the round-off floor: a band around 0, and the PSD runs drawn at exactly 0 inside it
    band = floor_band_artists(lam_ax)
    assert len(band) == 1
    floor_min = REL_FLOOR * 1.0  # the smallest floor among the runs (λ_max = 1 at step 0)
    assert lam_ax.get_yscale() == "symlog"
    assert lam_ax.yaxis.get_transform().linthresh == pytest.approx(floor_min)
    lines = {ln.get_label(): ln for ln in lam_ax.get_lines()}
    for i in range(0, N_SERIES, 2):
        ys = lines[f"run {i} (lr 0.{i})"].get_ydata()
        assert all(y == 0.0 for y in ys), f"PSD run {i} drawn at {ys}, not inside the band"
    for i in range(1, N_SERIES, 2):  # real negative curvature stays negative, beyond the band
        ys = lines[f"run {i} (lr 0.{i})"].get_ydata()
        assert all(y < -floor_min for y in ys)
    assert_tick_labels_apart(lam_ax)


def test_trajectory_floor_prefers_the_recorded_floor():
    m = {"steps": [0, 1], "lambda_min[a]": [-1e-9, -1.0], "lambda_max[a]": [1.0, 1.0], "floor[a]": [1e-8, 1e-8]}
    assert floors_of(m, "lambda_min[a]", REL_FLOOR) == [1e-8, 1e-8]
    m["floor[a]"] = [None, None]  # the tracker recorded none (an older run): from the extremes
    assert floors_of(m, "lambda_min[a]", REL_FLOOR) == pytest.approx([1e-10, 1e-10])
    del m["floor[a]"]
    assert floors_of(m, "lambda_min[a]", REL_FLOOR) == pytest.approx([1e-10, 1e-10])
    assert floors_of(m, "lambda_min[a]", None) is None and floors_of(m, "spread", REL_FLOOR) is None
    # the collapse grid keys its single reading without a suffix
    grid = {"steps": [0], "lambda_min": [-1e-14], "lambda_max": [2.0], "floor": []}
    assert floors_of(grid, "lambda_min", REL_FLOOR) == pytest.approx([2e-10])
    fig = trajectory_figure({"relu": [dict(grid, spread_projector=[0.5])]},
                            [("spread_projector", "s"), ("lambda_min", "λ")], "grid", rel_floor=REL_FLOOR)
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == [0.0] and floor_band_artists(fig.axes[1])
    assert math.isclose(fig.axes[1].yaxis.get_transform().linthresh, 2e-10)


def test_trajectory_log_y_is_log_for_positive_series_and_symlog_with_a_zero():
    positive = {"a": [{"steps": [1, 2, 3], "g": [1e-4, 1e-2, 1.0]}]}
    with_zero = {"a": [{"steps": [1, 2, 3], "g": [0.0, 1e-2, 1.0]}]}
    assert trajectory_figure(positive, [("g", "g")], "t", log_y=True).axes[0].get_yscale() == "log"
    ax = trajectory_figure(with_zero, [("g", "g")], "t", log_y=True).axes[0]
    assert ax.get_yscale() == "symlog" and list(ax.get_lines()[0].get_ydata()) == [0.0, 1e-2, 1.0]
    assert trajectory_figure(positive, [("g", "g")], "t").axes[0].get_yscale() == "linear"


def test_new_figure_stays_outside_pyplot_and_saves_as_png(tmp_path):
    import matplotlib.pyplot as plt

    from headgeom.report.figures import save_figure

    before, backend = plt.get_fignums(), matplotlib.get_backend()
    fig, axes = style.new_figure(2, 3, figsize=(4, 3), squeeze=False)
    axes[1][2].plot([0, 1], [1, 0])
    assert axes.shape == (2, 3) and plt.get_fignums() == before and matplotlib.get_backend() == backend
    path = save_figure(fig, tmp_path / "a.png")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_library_imports_leave_matplotlib_unloaded():
    """Training processes and cluster cells import the tracker and the experiments, never a figure:
    they must not pay matplotlib's import (style imports it on the first figure)."""
    import subprocess
    import sys

    code = ("import sys, headgeom.tracking, headgeom.orbits, headgeom.report.trajectories\n"
            "from headgeom.experiments.registry import load_all\n"
            "load_all()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_signed_log_axis_labels_each_side_up_to_its_own_values():
    # large negative curvature beside small positive values just above the floor (λ_min of a linear head)
    values = [-0.3, -1e-4, -1e-9, 2e-12, 8e-13]
    fig, ax = style.new_figure(figsize=(4, 3))
    ax.plot(range(len(values)), values)
    style.signed_log_axis(ax, values, floor=1e-14)
    lo, hi = ax.get_ylim()
    shown = [t for t in ax.get_yticks() if lo <= t <= hi]
    assert any(t > 0 for t in shown) and any(t < 0 for t in shown) and 0.0 in shown
    assert_tick_labels_apart(ax)

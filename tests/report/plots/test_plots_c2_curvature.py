"""C2's figure (headgeom.report.plots.c2_curvature): a distinct line per setting (mean over
cells, band min-max), the flat control black and dashed, one legend outside."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside, line_styles  # noqa: E402
from headgeom.report.plots import c2_curvature as plots  # noqa: E402

N_SERIES = 16
RADII = (0.0, 0.01, 0.1, 1.0)


def test_sixteen_settings_are_distinct_and_the_legend_is_outside():
    by = {f"objective{i}:ambient": [{"slice_found": True, "iso_error_max": [0.0] + [1e-3 * (i + 1) * r for r in (1, 2, 3)]}]
          for i in range(N_SERIES)}
    fig = plots.isotropy_vs_distance(by, RADII, flat=set())
    styles = line_styles(fig.axes[0], prefix="objective")
    assert len(styles) == N_SERIES and len({(c, ls) for c, ls, _ in styles}) == N_SERIES
    assert assert_legends_outside(fig) == 1


def test_mean_over_found_slices_and_the_flat_control():
    by = {"info_nce:ambient": [{"slice_found": True, "iso_error_max": [0.0, 0.1, 0.2, 0.0]},
                               {"slice_found": True, "iso_error_max": [0.0, 0.3, 0.4, 0.0]},
                               {"slice_found": False, "iso_error_max": [9.0, 9.0, 9.0, 9.0]}],
          "mse:ambient": [{"slice_found": True, "iso_error_max": [0.0, 1e-16, 1e-16, 1e-16]}],
          "vicreg:ambient": [{"slice_found": False}]}
    ax = plots.isotropy_vs_distance(by, RADII, flat={"mse:ambient"}).axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"info_nce:ambient (n=2)", "mse:ambient (n=1) flat control"}
    curved = lines["info_nce:ambient (n=2)"]
    assert list(curved.get_xdata()) == [0.01, 0.1, 1.0]
    assert list(curved.get_ydata()) == pytest.approx([0.2, 0.3, 1e-17])  # an exact zero at 1e-17
    flat = lines["mse:ambient (n=1) flat control"]
    assert flat.get_linestyle() == "--" and flat.get_color() == "k"
    assert ax.get_xscale() == ax.get_yscale() == "log"

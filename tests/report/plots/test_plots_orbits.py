"""The figures of ``headgeom analyze`` (headgeom.report.plots.orbits): orbit PCA panels (a line per
orbit, its start marked, a style per class) and the tangent-metric box plots."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from headgeom.report.figures import figure_png_bytes  # noqa: E402
from headgeom.report.plots import orbits as plots  # noqa: E402
from headgeom.report.style import series_style  # noqa: E402


def _panel(point, dim, n_orbits, k=3, classes=None):
    coords = [[[i + 0.1 * s, -i + 0.2 * s] for s in range(k)] for i in range(n_orbits)]
    return {"point": point, "dim": dim, "coords": coords, "explained": [0.614, 0.205], "classes": classes}


def test_a_panel_per_point_with_a_line_and_a_start_marker_per_orbit():
    fig = plots.plot_orbit_pca([_panel("z", 10, 4, classes=[0, 1, 0, 11]), _panel("h", 3, 2)], title="hue orbits")
    assert len(fig.axes) == 2 and fig.get_suptitle() == "hue orbits"
    z, h = fig.axes
    assert [z.get_title(), z.get_xlabel(), z.get_ylabel()] == ["z (D=10)", "PC1 61%", "PC2 20%"]
    assert h.get_title() == "h (D=3)"
    lines = z.get_lines()
    assert len(lines) == 2 * 4  # the orbit, then its start
    assert list(lines[6].get_xdata()) == [3.0, 3.1, 3.2] and list(lines[7].get_xdata()) == [3.0]
    styles = [(to_hex(ln.get_color()), ln.get_linestyle()) for ln in lines[::2]]
    expected = [series_style(c) for c in (0, 1, 0, 11)]  # by class: orbits 0 and 2 alike, class 11 dashed
    assert styles == [(s["color"], s["linestyle"]) for s in expected]
    assert [to_hex(ln.get_color()) for ln in h.get_lines()[::2]] == [series_style(i)["color"] for i in range(2)]
    assert figure_png_bytes(fig, bbox_inches=None)[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="at least one panel"):
        plots.plot_orbit_pca([])


def _quotients(n, zeros, ratio):
    return {"log10_tangent": [-2.0 - 0.1 * i for i in range(n)] + [None] * zeros,
            "log10_random": [0.1 * i for i in range(n + 1)],
            "tangent": {"n_zero": zeros}, "random": {"n_zero": 0}, "ratio_of_medians": ratio}


def test_tangent_spectra_have_a_row_per_family_and_a_panel_per_metric_present():
    result = {"families": {"hue": {"backbone": _quotients(3, 1, 0.0123), "end_to_end": _quotients(3, 0, None),
                                   "head_G": None, "head_loss": None},
                           "scale": {"backbone": _quotients(2, 0, 0.5), "end_to_end": _quotients(2, 0, 0.25),
                                     "head_G": None, "head_loss": _quotients(2, 0, 2.0)}}}
    fig = plots.plot_tangent_spectra(result)
    assert len(fig.axes) == 2 * 3  # head_G measured for no family: no column
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[:2] == ["hue: ratio 0.0123, 1 zero", "hue: ratio n/a"] and titles[3:5] == ["scale: ratio 0.5",
                                                                                            "scale: ratio 0.25"]
    assert not fig.axes[2].axison and fig.axes[5].axison  # hue has no head_loss: an empty panel
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["tangent\nn=3", "random\nn=4"]
    assert [a.get_text() for a in fig.axes[0].texts] == ["backbone J_bᵀJ_b\n(pixel space)"]
    assert not fig.axes[3].texts  # the metric's label heads the first row only


@pytest.mark.parametrize("result, match", [({}, "families"), (None, "families"),
                                           ({"families": {"hue": {"backbone": None}}}, "no quotient metrics")])
def test_tangent_spectra_refuse_what_is_no_analysis_result(result, match):
    with pytest.raises(ValueError, match=match):
        plots.plot_tangent_spectra(result)


def test_a_family_without_finite_quotients_still_gets_its_boxes():
    q = _quotients(0, 2, None)
    fig = plots.plot_tangent_spectra({"families": {"hue": {"backbone": q}}})
    (ax,) = fig.axes
    assert ax.get_title() == "hue: ratio n/a, 2 zero"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tangent\nn=0", "random\nn=1"]

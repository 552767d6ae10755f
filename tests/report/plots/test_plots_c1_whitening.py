"""C1's figure (headgeom.report.plots.c1_whitening): one scatter series per metric, each setting's
values at its x position (offset per series), exact zeros at 1e-18, the criterion and the bound drawn."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c1_whitening as plots  # noqa: E402


def test_isotropy_error_places_each_value_of_each_setting():
    values = {"mse:ambient": {"iso_error": [0.0, 3e-15], "oversize_iso_error": [1.0]},
              "info_nce:tangential": {"iso_error": [2e-14], "abs_iso_error": [2.0, 2.5]}}
    fig = plots.isotropy_error(values, tol=1e-10)
    ax = fig.axes[0]
    drawn = {c.get_label(): [tuple(p) for p in c.get_offsets()] for c in ax.collections}
    label = {key: lab for key, lab, _, _ in plots.SERIES}
    dx = {key: off for key, _, _, off in plots.SERIES}
    assert drawn[label["iso_error"]] == [(dx["iso_error"], 1e-18), (dx["iso_error"], 3e-15),
                                         (1 + dx["iso_error"], 2e-14)]
    assert drawn[label["abs_iso_error"]] == [(1 + dx["abs_iso_error"], 2.0), (1 + dx["abs_iso_error"], 2.5)]
    assert drawn[label["oversize_iso_error"]] == [(dx["oversize_iso_error"], 1.0)]
    assert label["iso_error_engine"] not in drawn  # a series without values draws nothing
    assert sorted(ln.get_ydata()[0] for ln in ax.get_lines()) == pytest.approx([1e-10, 1.0])
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["mse\nambient", "info_nce\ntangential"]
    assert assert_legends_outside(fig) == 1


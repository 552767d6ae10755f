"""C10's figure (headgeom.report.plots.c10_pretrained): a panel per family, the ratios of each
checkpoint side by side with their CI bars (JSON numbers read back; an infinite CI end draws no bar)."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from figure_checks import assert_legends_outside  # noqa: E402
from headgeom.report.plots import c10_pretrained as plots  # noqa: E402


def _cell(value, ci):
    return {"families": {f: {"ratios": {"raw": {m: {"value": value, "ci": ci} for m in plots.METRICS}}}
                         for f in ("hue", "blur")}}


def test_each_checkpoint_a_group_of_ratios_with_ci_bars():
    checkpoints = [("DINO ViT-S/16", _cell(2.0, [1.5, 3.0])), ("VICReg R50", _cell(0.5, [0.25, "inf"]))]
    fig = plots.ratios(checkpoints, ("hue", "blur"))
    assert [ax.get_title() for ax in fig.axes] == ["hue", "blur"]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["DINO ViT-S/16", "VICReg R50"]
    bars = {c.get_label(): c for c in ax.containers}
    assert set(bars) == set(plots.METRICS)
    x, y = bars[plots.METRICS[0]].lines[0].get_data()
    assert list(x) == pytest.approx([-0.25, 0.75]) and list(y) == [2.0, 0.5]
    (segments,) = [bars[plots.METRICS[0]].lines[2][0].get_segments()]
    assert [[y for _, y in seg] for seg in segments] == [pytest.approx([1.5, 3.0]), pytest.approx([0.25, 0.5])]
    assert ax.get_yscale() == "log"
    assert assert_legends_outside(fig) == 1

"""The figures of a real quick run read: ``headgeom reproduce --only C4`` (the preset the default
run uses; its sweep grid was the figure whose titles ran into the x-labels of the row above and
whose y-label was drawn once per row; the gap sweep is drawn with or without CIFAR-10, from the synthetic
sweep alone without it), every figure checked as it is saved."""
import pytest

from figure_checks import text_collisions
from headgeom.experiments.runner import run_experiments
from headgeom.report import figures


@pytest.mark.slow
def test_every_figure_of_the_quick_c4_run_has_its_texts_apart_and_on_the_canvas(tmp_path, monkeypatch):
    checked = {}
    save = figures.save_figure

    def check_then_save(fig, path):
        checked[path.name] = text_collisions(fig)
        return save(fig, path)

    monkeypatch.setattr(figures, "save_figure", check_then_save)
    result = run_experiments(["C4"], "quick", tmp_path, progress=False)
    assert result["n_failed"] == 0
    assert set(checked) == {"C4_lambda_min.png", "C4_lambda_min_sweep.png", "C4_gap_sweep.png"}
    assert {name: problems for name, (_, problems) in checked.items() if problems} == {}
    assert all(n > 30 for n, _ in checked.values())  # titles, labels and ticks of every panel were seen
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == sorted(checked)

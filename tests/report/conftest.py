"""Every figure a report test builds must read: after each test, the text-layout check of
tests/figure_checks.py (no two drawn texts overlap, none leaves the canvas) runs on each matplotlib
Figure created during it, so each builder is checked on its tests' synthetic data, new ones too."""
import pytest
from matplotlib.figure import Figure

from figure_checks import text_collisions


@pytest.fixture(autouse=True)
def figures_read(monkeypatch):
    """Record each Figure made during the test; fail the test if one has colliding texts."""
    built: list[Figure] = []
    init = Figure.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(Figure, "__init__", record)
    yield built
    monkeypatch.undo()
    failures = [f"figure {n} ({fig.get_suptitle() or [ax.get_title() for ax in fig.axes]!r}):\n  " + "\n  ".join(p)
                for n, fig in enumerate(built) for p in [text_collisions(fig)[1]] if p]
    if failures:
        pytest.fail("texts collide:\n" + "\n".join(failures), pytrace=False)

"""Checks on drawn figures shared by the figure tests: legends off the data area, y tick labels
apart, the styles of the labelled lines, the round-off band (headgeom.report.style)."""
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer

from headgeom.report import style


def line_styles(ax, prefix: str = "") -> list[tuple[str, str, str]]:
    """(colour, line style, marker) of every labelled line of ``ax`` whose label starts with
    ``prefix``, error-bar series included, chance lines left out."""
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") and ln.get_gid() != style.CHANCE_GID
             and ln.get_label().startswith(prefix)]
    lines += [c.lines[0] for c in ax.containers if isinstance(c, ErrorbarContainer)
              and not str(c.get_label()).startswith("_") and str(c.get_label()).startswith(prefix)
              and c.lines[0] is not None]
    return [(to_hex(ln.get_color()), ln.get_linestyle(), ln.get_marker()) for ln in lines]


def draw(fig):
    """Draw ``fig`` on an Agg canvas (a bare Figure has none) and return the renderer."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def assert_legends_outside(fig) -> int:
    """Every legend of ``fig`` lies outside the data area of every axes; returns how many legends."""
    renderer = draw(fig)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            area = ax.get_window_extent(renderer)
            assert not box.overlaps(area), f"legend {box} covers the data area {area} of {ax.get_title()!r}"
    return len(legends)


def assert_tick_labels_apart(ax) -> None:
    """The visible y tick labels of ``ax`` do not overlap one another."""
    renderer = draw(ax.figure)
    lo, hi = sorted(ax.get_ylim())
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t, loc in zip(ax.get_yticklabels(), ax.get_yticks())
             if t.get_visible() and t.get_text() and lo <= loc <= hi]
    assert len(boxes) >= 2, f"expected labelled y ticks, got {[b[0] for b in boxes]}"
    for i, (ta, a) in enumerate(boxes):
        for tb, b in boxes[i + 1:]:
            assert not a.overlaps(b), f"y tick labels {ta!r} and {tb!r} collide"


def floor_band_artists(ax) -> list:
    return [a for a in list(ax.collections) + list(ax.patches) if a.get_gid() == style.FLOOR_GID]

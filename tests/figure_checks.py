"""Checks on drawn figures shared by the figure tests: every drawn text apart from every other and
on the canvas, legends off the data area, y tick labels apart, the styles of the labelled lines,
the round-off band (headgeom.report.style)."""
from unittest import mock

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

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


def drawn_texts(fig) -> tuple[object, list[Text]]:
    """Draw ``fig`` (Agg) and return (renderer, the Text artists that drew): titles, suptitle,
    axis labels, tick labels, legend texts, annotations, each once, in drawing order.

    Only what is really drawn counts: a Text asked to draw but hidden or empty, a tick outside the
    view limits (its Axis does not draw it) or an annotation whose point lies outside its axes
    (matplotlib skips it) is left out. Recorded by wrapping ``Text.draw`` during the draw, which
    Annotation's ``draw`` also ends in."""
    drawn: dict[int, Text] = {}
    original = Text.draw

    def record(self, renderer):
        if self.get_visible() and self.get_text():
            drawn.setdefault(id(self), self)
        return original(self, renderer)

    with mock.patch.object(Text, "draw", record):
        renderer = draw(fig)
    return renderer, list(drawn.values())


def _owners(fig) -> dict[int, str]:
    """id of each axis label and tick label -> which axis of which panel it labels."""
    owners = {}
    for n, ax in enumerate(fig.axes):
        panel = repr(ax.get_title()) if ax.get_title() else f"axes {n}"
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for t in axis.get_ticklabels(which="both") + [axis.label, axis.get_offset_text()]:
                owners[id(t)] = f"{'label' if t is axis.label else 'tick label'} of {name} in {panel}"
    return owners


def _describe(text: Text, owners: dict[int, str]) -> str:
    where = owners.get(id(text)) or (f"in {text.axes.get_title() or 'untitled axes'!r}" if text.axes else "")
    return f"{type(text).__name__} {text.get_text()!r} ({where or 'on the figure'})"


def text_collisions(fig, tol: float = 0.5) -> tuple[int, list[str]]:
    """Every problem with the drawn texts of ``fig``: two text boxes (matplotlib's own extents,
    ``get_window_extent(renderer)``) that overlap by more than ``tol`` pixels in both directions,
    and any box that reaches more than ``tol`` pixels beyond the canvas. Tick labels of one axis
    are held to the same rule. Returns (how many texts, the problems: none when the figure reads)."""
    renderer, texts = drawn_texts(fig)
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    owners = _owners(fig)
    canvas = fig.bbox
    problems = []
    for i, (ta, a) in enumerate(boxes):
        if a.x0 < canvas.x0 - tol or a.y0 < canvas.y0 - tol or a.x1 > canvas.x1 + tol or a.y1 > canvas.y1 + tol:
            problems.append(f"{_describe(ta, owners)} at {a.extents.round(1).tolist()} leaves the canvas "
                            f"{canvas.extents.round(1).tolist()}")
        for tb, b in boxes[i + 1:]:
            width = min(a.x1, b.x1) - max(a.x0, b.x0)
            height = min(a.y1, b.y1) - max(a.y0, b.y0)
            if width > tol and height > tol:
                problems.append(f"{_describe(ta, owners)} and {_describe(tb, owners)} overlap by "
                                f"{width:.1f} x {height:.1f} px")
    return len(boxes), problems


def assert_texts_apart(fig) -> int:
    """No two drawn texts of ``fig`` overlap and none leaves the canvas (:func:`text_collisions`);
    returns how many texts were checked."""
    n, problems = text_collisions(fig)
    assert not problems, "texts collide:\n" + "\n".join(problems)
    return n


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

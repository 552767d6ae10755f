"""The text-layout checker of tests/figure_checks.py on figures built to fail it and to pass it:
it must see every kind of drawn text (titles, suptitle, axis and tick labels, legend, annotations),
catch overlaps and texts off the canvas, and ignore what is not drawn."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from figure_checks import assert_texts_apart, drawn_texts, text_collisions  # noqa: E402


def _grid(layout):
    """Two rows of panels with titles and x-labels, a legend, an annotation and a suptitle."""
    fig = Figure(figsize=(6.0, 4.0), layout=layout)
    axes = fig.subplots(2, 2)
    for r, row in enumerate(axes):
        for c, ax in enumerate(row):
            ax.plot([1, 2, 3], [3, 1, 2], label="series a")
            ax.set_title(f"state {r}, reading {c}")
            ax.set_xlabel("residual ‖u − c‖")
    axes[0][1].legend(loc="upper right", fontsize=7)
    axes[1][0].annotate("minimum", xy=(2, 1), xytext=(2.2, 2.5), fontsize=7)
    fig.supylabel("λ_min / max|λ|")
    fig.suptitle("a grid of panels")
    return fig


def test_a_laid_out_grid_passes_and_every_kind_of_text_is_checked():
    fig = _grid("constrained")
    _, texts = drawn_texts(fig)
    shown = {t.get_text() for t in texts}
    assert {"a grid of panels", "λ_min / max|λ|", "state 1, reading 0", "residual ‖u − c‖", "series a",
            "minimum"} <= shown
    assert any(t in shown for t in ("1.0", "1.5", "2.0", "3.0"))  # tick labels
    assert assert_texts_apart(fig) == len(texts) > 20


def test_titles_running_into_the_x_labels_of_the_row_above_fail():
    fig = _grid(None)  # no layout engine: the C4 sweep's fault
    fig.set_size_inches(6.0, 6.6)  # rows as tall as C4's: the gap between rows meets the x-labels
    _, problems = text_collisions(fig)
    above = "Text 'residual ‖u − c‖' (label of x in 'state 0, reading 0')"
    assert any("Text 'state 1, reading 0'" in p and above in p for p in problems), problems
    with pytest.raises(AssertionError, match="texts collide"):
        assert_texts_apart(fig)


def test_a_label_drawn_twice_over_one_column_fails():
    fig = Figure(figsize=(4.0, 3.0), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    for ax in (top, bottom):  # one long y-label per row: each taller than its row, so they meet
        ax.set_ylabel("λ_min(H_eff) / max|λ| (median over seeds)")
    _, problems = text_collisions(fig)
    assert any(p.count("λ_min(H_eff) / max|λ| (median over seeds)") == 2 for p in problems), problems


def test_a_text_off_the_canvas_fails_and_one_on_its_edge_passes():
    fig = Figure(figsize=(3.0, 2.0))
    fig.text(1.0, 0.5, "beyond the right edge", ha="left")
    fig.text(0.0, 0.0, "on the corner", ha="left", va="bottom")
    _, problems = text_collisions(fig)
    assert len(problems) == 1 and "'beyond the right edge'" in problems[0] and "leaves the canvas" in problems[0]


def test_tick_labels_of_one_axis_that_collide_fail():
    fig = Figure(figsize=(2.0, 2.0), layout="constrained")
    ax = fig.subplots()
    ax.set_xticks(range(6), [f"activation {i}" for i in range(6)])
    _, problems = text_collisions(fig)
    assert any("'activation 0'" in p and "'activation 1'" in p for p in problems), problems


def test_what_is_not_drawn_is_not_checked():
    fig = Figure(figsize=(4.0, 3.0), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_xlim(0, 1)
    hidden = ax.text(0.5, 0.5, "hidden", visible=False)
    ax.text(0.5, 0.5, "")  # empty
    ax.annotate("outside its axes", xy=(5.0, 5.0), xytext=(0.5, 0.5), annotation_clip=True)
    title = ax.set_title("shown")
    over = ax.text(0.5, 1.02, "shown too", transform=ax.transAxes, visible=False)  # over the title, hidden
    _, texts = drawn_texts(fig)
    shown = [t.get_text() for t in texts]
    assert hidden not in texts and over not in texts and "" not in shown and "outside its axes" not in shown
    assert title in texts
    assert assert_texts_apart(fig) == len(texts)
    over.set_visible(True)
    assert any("'shown too'" in p and "'shown'" in p for p in text_collisions(fig)[1])

"""The one table type (headgeom.report.table): its markdown (the text results.json stores), read back, as
HTML, and on the terminal wrapped between words, never cutting one."""
import pytest

from headgeom.report.table import Table, table_html, wrap


def _table():
    t = Table(("run", "spread", "note"), title="Grid (mean ± std)")
    t.add("relu/bn", "0.25 ± 0.01 (3)", "escaped | twice")
    t.add("silu", 1, "line one\nline two")
    return t


def test_markdown_is_the_pipe_table_with_cells_escaped():
    assert _table().markdown() == ("| run | spread | note |\n|---|---|---|\n"
                                   "| relu/bn | 0.25 ± 0.01 (3) | escaped \\| twice |\n"
                                   "| silu | 1 | line one<br>line two |")
    # an empty cell is one space between its pipes (the group tables' corner cell)
    assert Table(["", "a"], [["g", "1"]]).markdown() == "| | a |\n|---|---|\n| g | 1 |"
    with_notes = Table(["a"], [["1"]], notes=["n = 3 seeds"])
    assert with_notes.markdown() == "| a |\n|---|\n| 1 |\n\nn = 3 seeds"


def test_a_row_must_have_a_cell_per_column():
    with pytest.raises(ValueError, match="a row of 2 cells under 3 columns"):
        _table().add("x", "y")
    with pytest.raises(ValueError, match="at least one column"):
        Table(())


def test_markdown_reads_back_to_the_same_table():
    t = _table()
    back = Table.from_markdown(t.markdown(), title=t.title)
    assert (back.columns, back.rows, back.title) == (t.columns, [["relu/bn", "0.25 ± 0.01 (3)", "escaped | twice"],
                                                                ["silu", "1", "line one<br>line two"]], t.title)
    assert back.markdown() == t.markdown()
    notes = Table(["a"], [["1"]], notes=["first", "second"])
    assert Table.from_markdown(notes.markdown()).notes == ["first", "second"]
    with pytest.raises(ValueError, match="not a markdown pipe table"):
        Table.from_markdown("just text")


def test_html_escapes_first_then_marks():
    t = Table(("a", "b"), [["**bold** <script>", "x<br>y `c`"]])
    html = t.html()
    assert "<th>a</th><th>b</th>" in html
    assert "<td><strong>bold</strong> &lt;script&gt;</td>" in html and "<td>x<br>y <code>c</code></td>" in html
    assert table_html(_table().markdown()) == _table().html()  # a stored table renders as the live one
    assert table_html("not | a table") == "<pre>not | a table</pre>"


def test_terminal_text_wraps_between_words_and_never_cuts_one():
    t = Table(("verdict", "measured"), title="C9 a long statement of the claim, wrapped as well")
    t.add("[test] not supported", "selectivity=1.37 [1.252, 1.517] (n=1); compression=21.85 ± 1.5 (n=3)")
    for width in (100, 60, 40, 30, 20):
        text = t.text(width)
        assert all(len(line) <= width for line in text.splitlines()), (width, text)
        words = " ".join([t.title, *t.columns, *t.rows[0]]).split()
        assert sorted(text.split()) == sorted(words)  # every word whole, none lost
    wide = t.text(200).splitlines()
    assert wide[1].split() == ["verdict", "measured"] and wide[2].startswith("[test] not supported  selectivity")
    # side by side the columns need 20 + 2 + 28 characters at least: narrower, each row's cells stack
    narrow = t.text(24, header=False).splitlines()
    assert narrow[3] == "[test] not supported" and narrow[4].startswith("  selectivity=1.37")
    # a word longer than the width stands whole on its own line
    assert wrap("a supercalifragilistic b", 8) == ["a", "supercalifragilistic", "b"]
    assert wrap("**x**<br>y", 10) == ["x", "y"]


def test_widths_shrink_the_widest_column_down_to_its_longest_word():
    t = Table(("a", "b"), [["short", "many words here that can wrap at every space"]])
    assert t.widths(200) == [5, 44]
    assert t.widths(30) == [5, 23]
    assert t.widths(5) == [5, 5]  # the floor: "words", "every", "space" are the longest words of column b

"""The one-screen summary that opens report.md: exactly one line per claim present, its parts, and
the details grouped under each claim."""
import pytest

from headgeom.claims.budget import PaperBudget, budget
from headgeom.claims.claim import CLAIMS
from headgeom.claims.row import Row
from headgeom.report.markdown import format_measured, render_report
from headgeom.report.summary import headline, summary_table

PAPER = PaperBudget(epochs=1, batch=100, n_train=400)


def _row(cid, kind="test", verdict="supported", experiment=None, measured=None, **extra):
    measured = {"x": {"value": 2.0, "n": 3, "spread": 0.5}} if measured is None else measured
    fields = {"headline": next(iter(measured), None), **extra}
    return Row(id=cid, statement=f"statement of {cid}", setting=fields.pop("setting", {}), verdict=verdict,
               criterion="c", evidence=kind, experiment=experiment or cid, measured=measured, **fields)


def _summary_lines(table):
    text = table if isinstance(table, str) else table.markdown()
    return [line for line in text.splitlines() if line.startswith("| **C")]


def test_one_line_per_claim_present_in_natural_order():
    rows = [_row("C10"), _row("C1", "identity"), _row("C1", "premise", "not supported"), _row("C2"),
            _row("C5", experiment="GRID"), _row("C5")]
    lines = _summary_lines(summary_table(rows, format_measured))
    assert [line.split(" | ")[0] for line in lines] == ["| **C1**", "| **C2**", "| **C5**", "| **C10**"]
    c1 = lines[0]
    assert CLAIMS["C1"].short in c1 and " proof " in c1
    assert "identities: 1 hold; premises: 1 fail" in c1


def test_ours_quotes_the_headline_of_the_first_test_row():
    rows = [_row("C9", "identity", measured={"compression": {"value": 9.0, "n": 1, "spread": 0.0}},
                 headline="compression"),
            _row("C9", measured={"other": 1.0, "compression": {"value": 21.0, "n": 3, "spread": 2.0}},
                 headline="compression")]
    key, entry = headline(rows)
    assert (key, entry.to_json()) == ("compression", {"value": 21.0, "n": 3, "spread": 2.0})
    (line,) = _summary_lines(summary_table(rows, format_measured))
    assert "compression: 21 ± 2 (n=3)" in line and "21.85×" in line  # ours and the paper's
    # no test row: the first row's; no row at all: none
    assert headline(rows[:1])[1].to_json() == {"value": 9.0, "n": 1, "spread": 0.0}
    assert headline([]) is None
    (line,) = _summary_lines(summary_table([_row("C9", measured={"y": 1.0})], format_measured))
    assert "y: 1" in line and "tests: 1 supported" in line


def test_the_least_budget_and_its_label():
    rows = [_row("C12", budget=budget(1, 99, PAPER)), _row("C12", budget=budget(4, 100, PAPER))]
    (line,) = _summary_lines(summary_table(rows, format_measured))
    assert "24.8% of the paper's budget (1 steps × 99 vs 4 × 100), budget-limited" in line
    (theory,) = _summary_lines(summary_table([_row("C3")], format_measured))
    assert theory.endswith("| - |")  # no budget in ours, no row from the authors


def test_the_report_opens_with_the_summary_and_groups_details_under_each_claim():
    exp = {"title": "t", "statement": "s", "config": {}, "seeds": 1, "n_cells": 1, "n_failed": 0, "elapsed_s": 1.0,
           "tables": [("Grid table", "| a |\n|---|\n| 1 |")], "notes": [], "figures": [], "failed_cells": [],
           "errors": []}
    res = {"preset": "quick", "command": "headgeom reproduce",
           "claims": [_row("C5", experiment="GRID").to_json(), _row("C1").to_json()],
           "experiments": {"C1": exp, "GRID": exp, "C7": exp, "EXTRA": exp}, "environment": {}}
    md = render_report(res)
    summary = md.index("## Summary")
    head = md[summary:md.index("## Details")]
    # the bottom lines lead, one per claim, then the summary
    assert md.index("## Bottom lines") < md.index("| **C1** |") < md.index("| **C5** |") < summary
    assert summary < md.index("| **C1** |", summary) < md.index("| **C5** |", summary) < md.index("## Details")
    assert len(_summary_lines(head)) == 2 and head.count("\n") < 30  # one screen
    assert len(_summary_lines(md[:summary])) == 2  # one bottom line per claim
    # details: C1, then C5 with the GRID experiment under it, C7 (no rows), then the rest
    order = [md.index(h) for h in ("## C1: ", "### C1: t", "## C5: ", "### GRID: t", "## C7: ",
                                   "## Experiments without claim rows", "### EXTRA: t")]
    assert order == sorted(order)


def test_the_headline_a_row_names_is_quoted_not_another_key():
    sel = {"value": 0.9, "n": 2, "spread": 0.1}
    rows = [_row("C9", "identity", measured={"compression": {"value": 21.0, "n": 3, "spread": 2.0}}),
            _row("C9", measured={"compression": {"value": 5.0, "n": 2, "spread": 1.0}, "selectivity": sel},
                 headline="selectivity")]
    assert headline(rows)[0] == "selectivity"  # the first test row's, not the first key nor the first row's
    (line,) = _summary_lines(summary_table(rows, format_measured))
    assert "selectivity: 0.9 ± 0.1 (n=2)" in line and "compression: 21" not in line and "compression: 5" not in line
    # a test row's headline is preferred to an identity row's
    ident = _row("C9", "identity", measured={"x": {"value": 1.0, "n": 1, "spread": 0.0}}, headline="x")
    assert headline([ident] + rows)[0] == "selectivity"


def test_a_headline_must_name_a_measured_key():
    assert _row("C9", headline="x").headline == "x"
    with pytest.raises(ValueError, match="headline 'selectivity' is not one of its measured keys"):
        _row("C9", headline="selectivity")


def test_every_row_must_name_its_headline():
    row = _row("C4", setting={"part": "collapsed states", "reading": "tangential"},
               measured={"min_frac_past_threshold": {"value": 1.0, "n": 5, "spread": 0.0}, "y": 2.0}).to_json()
    # the error names the row (id and the setting that tells it apart) and the keys it may choose from
    with pytest.raises(ValueError, match=r"claim row C4 \(part collapsed states, reading tangential\) names no "
                                         r"headline.*\['min_frac_past_threshold', 'y'\]"):
        Row.from_json(dict(row, headline=None))
    with pytest.raises(ValueError, match="names no headline"):
        _row("C1", measured={})
    assert Row.from_json(row).headline == "min_frac_past_threshold"


def test_ours_and_the_authors_runs_side_by_side():
    from headgeom.claims.sources import AUTHORS

    ours = _row("C12", measured={"gap_z_minus_head_output": {"value": 0.02, "n": 2, "spread": 0.01}},
                budget=budget(1, 99, PAPER), source="ours (quick)", headline="gap_z_minus_head_output")
    theirs = _row("C12", verdict="inconclusive", source=AUTHORS, budget=budget(4, 100, PAPER),
                  measured={"gap_z_minus_head_output": {"value": 0.147, "n": 1, "spread": 0.0}},
                  headline="gap_z_minus_head_output")
    text = summary_table([ours, theirs], format_measured, preset="quick").markdown()
    assert "| ours (quick, budget) | authors' runs, re-judged (their budget) |" in text
    (line,) = _summary_lines(text)
    mine, authors = line.split(" | ")[3:5]
    assert "tests: 1 supported" in mine and "0.02 ± 0.01 (n=2)" in mine and "24.8% of the paper's budget" in mine
    assert "tests: 1 inconclusive" in authors and "0.147" in authors and "100% of the paper's budget" in authors
    # a claim only one source has: the other column is "-"
    (only,) = _summary_lines(summary_table([theirs], format_measured, preset="released"))
    assert only.split(" | ")[3] == "-"

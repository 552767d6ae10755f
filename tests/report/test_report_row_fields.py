"""What report.md, report.html and the docs block show of a row besides its verdict: its headline in words, its
view gap, its conventions with each one's robustness status (the sweep in the details), and the diagnostic rows
apart from the counted ones, said never to count; and the bottom lines above the filterable rows of the page."""
import json
from pathlib import Path

from headgeom.claims.robustness import Robustness
from headgeom.claims.row import Row
from headgeom.report.html import render_html
from headgeom.report.markdown import DIAGNOSTIC_NOTE, claims_table, render_report
from headgeom.report.results_block import rendered_from

SWEEP = Robustness.of(0.1, (0.1, 0.3, 1.0), ("not supported", "not supported", "supported"))
FLOOR = Robustness.of(1e-10, (1e-12, 1e-10, 1e-8), ("not supported",) * 3)


def _rows():
    test = Row(id="C4", statement="smooth heads are past the threshold", setting={"state": "pseudo-collapsed"},
               measured={"frac_past": {"value": 0.0, "n": 4, "spread": 0.0}, "other": 3},
               verdict="not supported", evidence="test", headline="frac_past", criterion="past in >= 80% of seeds",
               headline_text="share of seeds past their own threshold", conventions=("view_gap", "floor", "majority"),
               robustness={"view_gap": SWEEP, "floor": FLOOR},
               view_gap={"value": 5.6, "n": 2, "spread": 0.4, "what": "degrees between the two views"})
    diag = Row(id="C4", statement="smooth heads are past the threshold", setting={"reading": "ambient"},
               measured={"frac_negative": {"value": 1.0, "n": 4, "spread": 0.0}}, verdict="supported",
               evidence="diagnostic", headline="frac_negative", criterion="G is indefinite under this reading")
    return [test, diag]


def _results():
    return {"preset": "quick", "command": "headgeom reproduce", "claims": [r.to_json() for r in _rows()],
            "experiments": {}, "environment": {}}


def test_the_markdown_row_shows_words_view_gap_conventions_and_the_sweep():
    md = claims_table(_rows())
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert "**share of seeds past their own threshold** (`frac_past`): **0 ± 0 (n=4)**" in row
    assert "view gap: 5.6 ± 0.4 (n=2)" in row
    assert "conventions: view_gap, floor, majority<br>robustness: view_gap flips at 1; floor robust; majority not swept" in row
    # the sweep, value by value, in the details under the tables
    assert "Robustness of row 1 (C4, state pseudo-collapsed):" in md
    assert "| view_gap | 0.1 | 0.1: not supported; 0.3: not supported; 1: supported | flips at 1 |" in md
    # the diagnostic row in a table of its own, after the note that it never counts
    assert md.index(DIAGNOSTIC_NOTE) < md.index("| 2 | C4 |") and md.count("| row | id | statement |") == 2
    assert "Rows: tests: 1 not supported; diagnostics: 1 show it; only `test` rows count as support." in md


def test_the_page_shows_the_bottom_lines_above_the_filters_and_the_diagnostic_rows_apart():
    page = render_html(_results())
    assert page.index("<h2>Bottom lines</h2>") < page.index('<form class="filters"') < page.index('<tr class="row"')
    assert "<strong>undecided</strong>: no test row decides it" in page
    assert 'class="c undecided">undecided</span>' in page  # the claim's own line, coloured
    assert '<option value="diagnostic">diagnostic (never counted) (1)</option>' in page
    diagnostic = page.index('<div class="diagnostic">')
    assert page.index('data-evidence="test"') < diagnostic < page.index('data-evidence="diagnostic"')
    assert "view gap: 5.6 ± 0.4 (n=2)" in page and "robustness: view_gap flips at 1; floor robust" in page
    assert "<summary>robustness sweep</summary>" in page and "<td>0.1: not supported; 0.3: not supported; 1: supported" in page


def test_the_report_and_the_docs_block_lead_with_the_bottom_line(tmp_path):
    md = render_report(_results())
    assert md.index("## Bottom lines") < md.index("## Summary")
    assert "**Bottom line:** **undecided**: no test row decides it: 1 of our test rows" in md
    assert "view_gap flips at 1" in md[:md.index("## Summary")]  # the bottom line says why the row does not decide
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**_results(), "finished": "x"}))
    block = rendered_from(path, "built")
    assert block.index("Bottom lines:") < block.index("Verdict counts per claim") < block.index(DIAGNOSTIC_NOTE)
    assert "share of seeds past their own threshold: 0 ± 0 (n=4)" in block


def test_stored_bottom_lines_that_are_not_the_rules_are_warned_of():
    from headgeom.claims.bottom_line import bottom_lines
    results = _results()
    (line,) = bottom_lines(_rows())
    results["bottom_lines"] = [line.to_json()]
    assert "are not what the rule gives" not in render_report(results)
    # a file whose rows changed after its bottom lines were written (here: the test row now robust and decided)
    rows = [_rows()[0].replace(robustness={"view_gap": Robustness.of(0.1, (0.1, 1.0), ("not supported",) * 2),
                                           "floor": FLOOR}), _rows()[1]]
    results["claims"] = [r.to_json() for r in rows]
    md = render_report(results)
    assert "**Warning:** the bottom lines results.json stores for C4 are not what the rule gives on its rows" in md

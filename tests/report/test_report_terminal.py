"""The terminal summary of ``headgeom reproduce`` (headgeom.report.terminal): it leads with the bottom lines, and it
counts the same rows per claim as report.md's and report.html's summaries, and shows the same bottom lines, the rows of every experiment that judged the claim (C4's
rows come from C4, C8 and GRID), ours and the authors' apart, on built rows and on the committed quick results."""
import html
import json
import re
from pathlib import Path

from headgeom.claims.row import Row
from headgeom.claims.sources import AUTHORS
from headgeom.report.bottom_lines import bottom_lines_of
from headgeom.report.html import render_html
from headgeom.report.markdown import render_report, rows_of
from headgeom.report.summary import by_claim, source_counts
from headgeom.report.terminal import terminal_summary

ROOT = Path(__file__).resolve().parents[2]


def _row(cid, experiment, verdict="supported", evidence="test", source="ours (quick)", **setting):
    return Row(id=cid, statement=f"statement of {cid}", setting=setting, verdict=verdict, evidence=evidence,
               criterion="c", headline="x", measured={"x": {"value": 1.0, "n": 2, "spread": 0.0}},
               experiment=experiment, source=source).to_json()


def _results(rows):
    return {"preset": "quick", "command": "headgeom reproduce", "claims": rows, "experiments": {}, "environment": {}}


def _report_counts(md, cid):
    """The ours and authors' cells of claim ``cid``'s line in the report's summary (after '## Summary')."""
    line = next(ln for ln in md[md.index("## Summary"):].splitlines() if ln.startswith(f"| **{cid}** |"))
    cells = [c.strip() for c in line.strip("|").split(" | ")]
    return [c.split("<br>")[0] for c in cells[3:5] if c != "-"]


def _html_counts(page, cid):
    """The first line (the counts) of the ours and authors' cells of claim ``cid``'s summary line in report.html."""
    line = re.search(r'<summary class="grid"><span class="id"><strong>' + re.escape(cid)
                     + r"</strong></span>(.*?)</summary>", page).group(1)
    cells = re.findall(r"<span>(.*?)</span>", re.sub(r'<span class="matches"></span>', "", line))
    return [html.unescape(c.split("<br>")[0]) for c in cells[2:4] if c != "-"]


def _html_bottom(page, cid):
    """The conclusion shown atop claim ``cid``'s section of report.html."""
    start = page.index(f'<span class="id"><strong>{cid}</strong>')
    return html.unescape(re.search(r'<span class="c [^"]+">(.*?)</span>', page[start:]).group(1))


def _terminal_counts(text, cid):
    """The '  ours: ...' and '  authors' runs, re-judged: ...' lines under claim ``cid``'s block (unwrapped)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"{cid}  "))
    out = []
    for ln in lines[start + 1:]:
        if ln.startswith("  ours: ") or ln.startswith(f"  {AUTHORS}: "):
            out.append(ln.strip().split(": ", 1)[1])
        elif out and ln.startswith("    "):  # a wrapped counts line
            out[-1] += " " + ln.strip()
        elif ln.startswith("  ["):
            break
    return out


def test_the_terminal_and_the_report_count_a_claims_rows_over_every_experiment():
    rows = [_row("C4", "C4", "not supported", state="pseudo-collapsed"),
            _row("C4", "C4", evidence="identity", state="equilibrium"),
            _row("C4", "C8", part="collapsed states"), _row("C4", "GRID", "inconclusive", part="collapsed states"),
            _row("C8", "C8", part="curvature"), _row("C8", "RELEASED", "inconclusive", source=AUTHORS),
            _row("C8", "ABLATION", "not supported", evidence="diagnostic", reading="ambient")]
    results = _results(rows)
    text, md = terminal_summary(results), render_report(results)
    assert _terminal_counts(text, "C4") == _report_counts(md, "C4") == [
        "tests: 1 supported, 1 not supported, 1 inconclusive; identities: 1 hold"]
    assert _terminal_counts(text, "C8") == _report_counts(md, "C8") == [
        "tests: 1 supported; diagnostics: 1 do not show it", "tests: 1 inconclusive"]
    # one block per claim, whatever experiment made its rows
    assert [ln.split()[0] for ln in text.splitlines() if re.match(r"C\d+  ", ln)] == ["C4", "C8"]


def test_the_terminal_leads_with_the_bottom_lines():
    results = _results([_row("C4", "C4", "not supported"), _row("C12", "RELEASED", source=AUTHORS)])
    text = terminal_summary(results, width=100)
    assert text.startswith("Bottom lines") and text.index("Does not hold:") < text.index("C4  statement of C4")
    words = " ".join(text[:text.index("C4  statement")].split())
    assert "C4 Does not hold: 1 of our test rows refutes it" in words
    assert "C12 Holds: 1 test row of the authors' runs re-judged supports it" in words
    assert all(len(line) <= 100 for line in text.splitlines())


def test_on_the_committed_quick_results_all_three_count_the_same_rows_and_show_the_same_bottom_lines():
    results = json.loads((ROOT / "docs/results/quick.json").read_text(encoding="utf-8"))
    text, md, page = terminal_summary(results), render_report(results), render_html(results)
    rows = rows_of(results)
    groups = by_claim(rows)
    assert len(groups) >= 12
    for cid, group in groups.items():
        counts = [c for _, c in source_counts(group)]
        assert _terminal_counts(text, cid) == _report_counts(md, cid) == _html_counts(page, cid) == counts, cid
    terminal_words, md_words = " ".join(text.split()), " ".join(md.split())
    for line in bottom_lines_of(results, rows):
        assert f"{line.claim} {line.text}" in terminal_words, line.claim
        assert f"| **{line.claim}** |" in md and f"**{line.conclusion}**: {line.rest}" in md_words, line.claim
        assert _html_bottom(page, line.claim) == line.conclusion, line.claim
        assert html.escape(line.rest, quote=False) in page or html.escape(line.rest) in page, line.claim

"""The verdict numbers of docs/results.md and README.md come from committed results files the tool wrote,
never typed by hand.

Each block between its markers (the full block of docs/results.md, the short summary of README.md) is
re-rendered from the files tools/results_block.py names and must match the page to the character; an
edited number or count, or a results file changed without re-rendering, fails here."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from headgeom.report.bottom_lines import bottom_lines_of, stale_bottom_lines
from headgeom.report.markdown import rows_of
from headgeom.report.results_block import (BEGIN, END, SUMMARY_BEGIN, SUMMARY_END, render_block, render_summary,
                                           replace_block)
from headgeom.report.table import cell_text
from script_modules import tool

ROOT = Path(__file__).resolve().parents[1]
PAGES = [("docs/results.md", render_block, BEGIN, END), ("README.md", render_summary, SUMMARY_BEGIN, SUMMARY_END)]


def _tool():
    return tool("results_block")


def _block(text: str, begin: str, end: str) -> str:
    return text[text.index(begin):text.index(end) + len(end)]


def test_every_results_file_exists_and_was_written_by_headgeom_reproduce():
    for rel, _ in _tool().SOURCES:
        results = json.loads((ROOT / rel).read_text(encoding="utf-8"))
        assert results["command"].startswith("headgeom reproduce"), rel
        assert results["claims"] and all("verdict" in c and "evidence" in c for c in results["claims"]), rel


def test_the_tool_renders_both_pages():
    assert [(str(page), render) for page, render, *_ in _tool().TARGETS] == [(p, r) for p, r, *_ in PAGES]


@pytest.mark.parametrize("page, render, begin, end", PAGES, ids=[p[0] for p in PAGES])
def test_the_block_is_the_rendering_of_the_committed_results(page, render, begin, end):
    text = (ROOT / page).read_text(encoding="utf-8")
    expected = render(_tool().SOURCES, ROOT)
    assert _block(text, begin, end) == expected, f"{page}'s results block is stale or edited: run python tools/results_block.py"


@pytest.mark.parametrize("page, render, begin, end", PAGES, ids=[p[0] for p in PAGES])
def test_an_edited_number_in_the_block_is_caught(page, render, begin, end):
    block = _block((ROOT / page).read_text(encoding="utf-8"), begin, end)
    match = re.search(r"(\d+) (?:supported|not supported|inconclusive|hold|of our test rows|test rows? of the)", block)
    assert match, "the block quotes no count"
    edited = block[:match.start(1)] + str(int(match.group(1)) + 1) + block[match.end(1):]
    assert edited != block and edited != render(_tool().SOURCES, ROOT)


def test_the_counts_count_every_row_of_each_source_once():
    """The full block's verdict counts (its summary tables) add up to the rows of each file, ours and the
    authors' apart."""
    tool = _tool()
    block = _block((ROOT / "docs/results.md").read_text(encoding="utf-8"), BEGIN, END)
    summaries = [part.split("<details>")[0] for part in block.split("Verdict counts per claim")[1:]]
    counted = sum(int(n) for s in summaries for n in re.findall(r"(\d+) (?:supported|not supported|inconclusive|"
                                                                 r"hold|fail|not checked|undecided|show it|"
                                                                 r"do not show it)\b", s))
    rows = sum(len(json.loads((ROOT / rel).read_text(encoding="utf-8"))["claims"]) for rel, _ in tool.SOURCES)
    assert len(summaries) == len(tool.SOURCES) and counted == rows


def test_the_readme_leads_with_one_bottom_line_per_claim_of_each_file():
    """The README's block is claim | bottom line, one line per claim of each file, each the rule's (the file's
    stored bottom lines where it has them, checked against the rule on its own rows)."""
    tool = _tool()
    block = _block((ROOT / "README.md").read_text(encoding="utf-8"), SUMMARY_BEGIN, SUMMARY_END)
    assert block.count("| claim | bottom line |") == len(tool.SOURCES)
    for rel, _ in tool.SOURCES:
        results = json.loads((ROOT / rel).read_text(encoding="utf-8"))
        rows = rows_of(results)
        assert stale_bottom_lines(results, rows) == [], f"{rel}: stored bottom lines differ from the rule's"
        for line in bottom_lines_of(results, rows):
            assert f"**{line.conclusion}**: {cell_text(line.rest)} |" in block, (rel, line.claim)


def test_replace_block_needs_both_markers():
    with pytest.raises(ValueError, match="results:begin"):
        replace_block("no markers here", "x")
    assert replace_block(f"a {BEGIN} old {END} b", "NEW") == "a NEW b"
    with pytest.raises(ValueError, match="results-summary:begin"):
        replace_block(f"a {BEGIN} old {END} b", "x", SUMMARY_BEGIN, SUMMARY_END)
    assert replace_block(f"a {SUMMARY_BEGIN} old {SUMMARY_END} b", "NEW", SUMMARY_BEGIN, SUMMARY_END) == "a NEW b"

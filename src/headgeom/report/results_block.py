"""The blocks of docs/results.md and README.md that quote verdicts: rendered from committed results files
that ``headgeom reproduce`` wrote, never typed by hand (tests/test_results_block.py re-renders them and
fails on any difference, so an edited number or a stale file is caught).

The full block (docs/results.md) sits between ``<!-- results:begin -->`` and ``<!-- results:end -->``.
It states the rule the bottom lines follow once, then for each results file it names the command that wrote
it, the bottom line of each claim (:mod:`headgeom.report.bottom_lines`), the claims summary of
:mod:`headgeom.report.summary` (ours with spread and n, the verdicts by evidence kind, the least budget),
then the verdict of every row by claim, setting and evidence kind with its conventions' robustness, the
``diagnostic`` rows apart (never counted). The short block (README.md) sits between
``<!-- results-summary:begin -->`` and ``<!-- results-summary:end -->``: per results file one line per
claim, its bottom line. ``python tools/results_block.py`` rewrites both in place.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headgeom.claims.budget import budget_text
from headgeom.claims.evidence import DIAGNOSTIC, verdict_text
from headgeom.claims.row import Row
from headgeom.report.bottom_lines import bottom_lines_of, bottom_lines_table, rule_note
from headgeom.report.markdown import DIAGNOSTIC_NOTE, conventions_lines, format_measured, rows_of
from headgeom.report.summary import by_claim, headline_words, summary_table
from headgeom.report.table import Table

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- results-summary:begin -->", "<!-- results-summary:end -->"
NOTE = "<!-- rendered by `python tools/results_block.py` from the files named below; do not edit -->"
ROW_KEYS = ("state", "reading", "part", "source")

__all__ = ["BEGIN", "END", "SUMMARY_BEGIN", "SUMMARY_END", "render_block", "render_summary", "replace_block",
           "rendered_from", "summarized_from"]


def _row_setting(c: Row) -> str:
    s = c.setting
    parts = [f"{k} {s[k]}" for k in ROW_KEYS if s.get(k)]
    if c.source and not s.get("source"):
        parts.append(f"source {c.source}")
    if s.get("head"):
        parts.append(f"head {s['head']}")
    return ", ".join(parts) or "-"


def _rows_table(rows: list[Row]) -> Table:
    table = Table(("claim", "row", "evidence", "verdict", "headline", "budget", "robustness"))
    for cid, group in by_claim(rows).items():
        for c in group:
            table.add(cid, _row_setting(c), c.evidence, verdict_text(c),
                      f"{headline_words(c)}: {format_measured(c.headline_entry)}", budget_text(c.budget) or "-",
                      "<br>".join(conventions_lines(c)) or "-")
    return table


def _every_row(rows: list[Row]) -> list[str]:
    """The rows' tables (markdown lines): the counted kinds, then the diagnostic rows under their note."""
    counted = [r for r in rows if r.evidence != DIAGNOSTIC]
    diagnostics = [r for r in rows if r.evidence == DIAGNOSTIC]
    out = [_rows_table(counted).markdown(), ""] if counted else []
    return out + ([DIAGNOSTIC_NOTE, "", _rows_table(diagnostics).markdown(), ""] if diagnostics else [])


def _results(path: Path) -> tuple[dict[str, Any], list[Row]]:
    results = json.loads(path.read_text(encoding="utf-8"))
    return results, rows_of(results)


def rendered_from(path: Path, title: str) -> str:
    """The part of the block for one results.json: its title, command, summary and rows."""
    results, rows = _results(path)
    if not rows:
        return "\n".join([f"**{title}** (`{path.as_posix()}`): _No claim entries were produced._", ""])
    return "\n".join([
        f"**{title}** (`{path.as_posix()}`, written by `{results.get('command', 'headgeom reproduce')}`, "
        f"finished {results.get('finished', '?')}):", "",
        "Bottom lines:", "", bottom_lines_table(bottom_lines_of(results, rows), rows).markdown(), "",
        "Verdict counts per claim and source, with the headline measure and the least budget:", "",
        summary_table(rows, format_measured).markdown(), "",
        "<details><summary>Every row</summary>", "", *_every_row(rows), "</details>", ""])


def summarized_from(path: Path, title: str, shown: str | None = None) -> str:
    """The short form for one results.json: its title and one line per claim with its bottom line (the
    counts are in the full block). ``shown``: the path to print."""
    results, rows = _results(path)
    table = bottom_lines_table(bottom_lines_of(results, rows), rows)
    table = Table(("claim", "bottom line"), [[f"{claim}: {short}", line] for claim, short, line in table.rows])
    return "\n".join([f"**{title}** (`{shown or path.as_posix()}`, finished {results.get('finished', '?')}):", "",
                      table.markdown()]) + "\n"


def render_block(sources: list[tuple[Path, str]], root: Path) -> str:
    """The whole block (markers included) from (results file relative to ``root``, title) pairs: the rule of
    the bottom lines once, then each file's part."""
    parts = [BEGIN, NOTE, "", rule_note(), ""]
    for rel, title in sources:
        parts.append(rendered_from(root / rel, title).replace(f"`{(root / rel).as_posix()}`", f"`{rel.as_posix()}`"))
    return "\n".join(parts) + END


def render_summary(sources: list[tuple[Path, str]], root: Path) -> str:
    """The short block (markers included) from (results file relative to ``root``, title) pairs."""
    parts = [SUMMARY_BEGIN, NOTE, ""]
    for rel, title in sources:
        parts.append(summarized_from(root / rel, title, shown=rel.as_posix()))
    return "\n".join(parts) + SUMMARY_END


def replace_block(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with its block between ``begin`` and ``end`` replaced by ``block``; ValueError when the
    markers are missing or out of order."""
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"no {begin} ... {end} block in the text: add the two markers where the results go")
    return text[:i] + block + text[j + len(end):]

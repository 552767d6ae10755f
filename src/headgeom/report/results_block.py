"""The blocks of docs/results.md and README.md that quote verdicts: rendered from committed results files
that ``headgeom reproduce`` wrote, never typed by hand (tests/test_results_block.py re-renders them and
fails on any difference, so an edited number or a stale file is caught).

The full block (docs/results.md) sits between ``<!-- results:begin -->`` and ``<!-- results:end -->``.
For each results file it names the command that wrote it and the claims summary of
:mod:`headgeom.report.summary` (ours with spread and n, the verdicts by evidence kind, the least budget),
then the verdict of every row by claim, setting and evidence kind. The short block (README.md) sits
between ``<!-- results-summary:begin -->`` and ``<!-- results-summary:end -->``: per results file one
line per claim, its verdict counts by evidence kind for each source of rows. ``python
tools/results_block.py`` rewrites both in place.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headgeom.claims.budget import budget_text
from headgeom.claims.evidence import counts_text, verdict_text
from headgeom.claims.sources import AUTHORS, is_authors
from headgeom.report.markdown import cell_text, format_measured
from headgeom.report.summary import CLAIMS, by_claim, least_budget, summary_table

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- results-summary:begin -->", "<!-- results-summary:end -->"
NOTE = "<!-- rendered by `python tools/results_block.py` from the files named below; do not edit -->"
ROW_KEYS = ("state", "reading", "part", "source")

__all__ = ["BEGIN", "END", "SUMMARY_BEGIN", "SUMMARY_END", "render_block", "render_summary", "replace_block",
           "rendered_from", "summarized_from"]


def _row_setting(c: dict[str, Any]) -> str:
    s = c.get("setting") if isinstance(c.get("setting"), dict) else {}
    parts = [f"{k} {s[k]}" for k in ROW_KEYS if s.get(k)]
    if c.get("source") and not s.get("source"):
        parts.append(f"source {c['source']}")
    if s.get("head"):
        parts.append(f"head {s['head']}")
    return ", ".join(parts) or "-"


def _rows_table(claims: list[dict[str, Any]]) -> str:
    lines = ["| claim | row | evidence | verdict | headline | budget |", "|---|---|---|---|---|---|"]
    for cid, rows in by_claim(claims).items():
        for c in rows:
            head = c.get("headline")
            quoted = f"{head}: {format_measured(c['measured'][head])}" if head in (c.get("measured") or {}) else "-"
            lines.append("| " + " | ".join(cell_text(x) for x in (
                cid, _row_setting(c), c["evidence"], verdict_text(c), quoted,
                budget_text(c.get("budget")) or "-")) + " |")
    return "\n".join(lines)


def rendered_from(path: Path, title: str) -> str:
    """The part of the block for one results.json: its title, command, summary and rows."""
    results = json.loads(path.read_text(encoding="utf-8"))
    claims = results.get("claims", [])
    return "\n".join([
        f"**{title}** (`{path.as_posix()}`, written by `{results.get('command', 'headgeom reproduce')}`, "
        f"finished {results.get('finished', '?')}):", "",
        summary_table(claims, format_measured, cell_text).rstrip(), "",
        "<details><summary>Every row</summary>", "", _rows_table(claims), "", "</details>", ""])


def _counts(rows: list[dict[str, Any]]) -> str:
    """A source's verdict counts by evidence kind, "budget-limited" when its least budget is; "-" without rows."""
    if not rows:
        return "-"
    budget = least_budget(rows)
    return counts_text(rows) + ("; budget-limited" if budget and budget.get("limited") else "")


def summarized_from(path: Path, title: str, shown: str | None = None) -> str:
    """The short form for one results.json: its title and one line per claim, the verdict counts of
    ours and, when the file has any, of the authors' runs re-judged. ``shown``: the path to print."""
    results = json.loads(path.read_text(encoding="utf-8"))
    groups = by_claim(results.get("claims", []))
    authors = any(is_authors(c) for rows in groups.values() for c in rows)
    head = ["claim", "statement", "ours"] + ([AUTHORS] if authors else [])
    lines = [f"**{title}** (`{shown or path.as_posix()}`, finished {results.get('finished', '?')}):", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cid, rows in groups.items():
        statement = CLAIMS[cid].short if cid in CLAIMS else str(rows[0].get("statement", ""))
        cells = [cid, statement, _counts([r for r in rows if not is_authors(r)])]
        if authors:
            cells.append(_counts([r for r in rows if is_authors(r)]))
        lines.append("| " + " | ".join(cell_text(x) for x in cells) + " |")
    return "\n".join(lines) + "\n"


def render_block(sources: list[tuple[Path, str]], root: Path) -> str:
    """The whole block (markers included) from (results file relative to ``root``, title) pairs."""
    parts = [BEGIN, NOTE, ""]
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

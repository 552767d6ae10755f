"""The block of README.md (and docs) that quotes verdicts: rendered from committed results files that
``headgeom reproduce`` wrote, never typed by hand (tests/test_results_block.py re-renders it and fails
on any difference, so an edited number or a stale file is caught).

The block sits between ``<!-- results:begin -->`` and ``<!-- results:end -->``. For each results file
it names the command that wrote it and the claims summary of :mod:`headgeom.report.summary` (ours with
spread and n, the verdicts by evidence kind, the least budget), then the verdict of every row by claim,
setting and evidence kind. ``python tools/results_block.py`` rewrites the block in place.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headgeom.claims.budget import budget_text
from headgeom.claims.evidence import verdict_text
from headgeom.report.markdown import cell_text, format_measured
from headgeom.report.summary import by_claim, summary_table

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
ROW_KEYS = ("state", "reading", "part", "source")

__all__ = ["BEGIN", "END", "render_block", "replace_block", "rendered_from"]


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


def render_block(sources: list[tuple[Path, str]], root: Path) -> str:
    """The whole block (markers included) from (results file relative to ``root``, title) pairs."""
    parts = [BEGIN, "<!-- rendered by `python tools/results_block.py` from the files named below; do not edit -->", ""]
    for rel, title in sources:
        parts.append(rendered_from(root / rel, title).replace(f"`{(root / rel).as_posix()}`", f"`{rel.as_posix()}`"))
    return "\n".join(parts) + END


def replace_block(text: str, block: str) -> str:
    """``text`` with its block replaced by ``block``; ValueError when the markers are missing or out of order."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        raise ValueError(f"no {BEGIN} ... {END} block in the text: add the two markers where the results go")
    return text[:i] + block + text[j + len(END):]

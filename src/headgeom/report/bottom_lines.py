"""The bottom lines that lead every view of the results (report.md, report.html, the terminal summary, the
README and docs results blocks): one per claim, by the rule of :mod:`headgeom.claims.bottom_line`.

They are read from results.json's ``bottom_lines`` when it has them (the runner writes them), else derived from
its rows by the same rule (a results file written before the rule); :func:`stale_bottom_lines` says where stored
ones differ from what the rule gives on the file's own rows (a hand edit, or a file older than the rule).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headgeom.claims.bottom_line import RULE, BottomLine, bottom_lines
from headgeom.claims.claim import claim_of
from headgeom.claims.row import Row
from headgeom.report.table import Table

__all__ = ["bottom_lines_of", "bottom_lines_table", "conclusion_cell", "rule_note", "stale_bottom_lines"]


def bottom_lines_of(results: Mapping[str, Any], rows: list[Row]) -> list[BottomLine]:
    """The bottom lines of a results.json dict whose rows are ``rows``: those it stores, each checked (a
    conclusion that does not follow from its rows is refused), else the rule's on ``rows``."""
    stored = results.get("bottom_lines")
    if stored is None:
        return bottom_lines(rows)
    return [BottomLine.from_json(b) for b in stored]


def stale_bottom_lines(results: Mapping[str, Any], rows: list[Row]) -> list[str]:
    """The claims whose stored bottom line is not the rule's on the file's own rows ([] without stored ones)."""
    if results.get("bottom_lines") is None:
        return []
    derived = {b.claim: b for b in bottom_lines(rows)}
    stored = {b.claim: b for b in bottom_lines_of(results, rows)}
    return sorted(c for c in set(derived) | set(stored) if derived.get(c) != stored.get(c))


def conclusion_cell(line: BottomLine) -> str:
    """``**holds in part**: <the sentence after the conclusion>`` (markdown)."""
    return f"**{line.conclusion}**: {line.rest}"


def bottom_lines_table(lines: list[BottomLine], rows: list[Row]) -> Table:
    """claim | statement | bottom line, one line per claim (markdown marks: the conclusion in bold)."""
    table = Table(("claim", "statement", "bottom line"))
    for line in lines:
        first = next((r for r in rows if r.id == line.claim), None)
        table.add(f"**{line.claim}**", claim_of(line.claim, first.statement if first else "").short,
                  conclusion_cell(line))
    return table


def rule_note() -> str:
    """How the bottom lines are derived: the rule in words, under their table."""
    return "How a bottom line is derived (`headgeom.claims.bottom_line.RULE`): " + RULE

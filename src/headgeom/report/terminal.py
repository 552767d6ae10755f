"""The summary ``headgeom reproduce`` prints at the end: the bottom line of every claim first, then per claim (over
the rows of every experiment that judged it, as report.md groups them) its verdict counts per source, the same
phrases as the report's summary (:func:`headgeom.report.summary.source_counts`), and its rows; lines at most
``width`` characters wherever no single word is longer (cells wrap between words, never cutting one).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headgeom.claims.bottom_line import BottomLine
from headgeom.claims.evidence import DIAGNOSTIC, counts_text, tagged_verdict
from headgeom.claims.row import NAME_KEYS, Row
from headgeom.report.bottom_lines import bottom_lines_of
from headgeom.report.markdown import count_noun, distinct_settings, format_measured, limited_label, rows_of
from headgeom.report.summary import by_claim, headline_words, source_counts
from headgeom.report.table import Table, wrap

__all__ = ["TERMINAL_KEYS", "format_bottom_lines", "format_claims_short", "terminal_summary"]

TERMINAL_KEYS = NAME_KEYS + ("data", "dataset", "backbone", "head_input", "family")
"""The setting keys the terminal summary tells rows apart by, when they differ (other settings are in report.md)."""

DIAGNOSTIC_LINE = "diagnostic rows, never counted (the reading or the construction fixes their outcome):"


def format_bottom_lines(lines: list[BottomLine], width: int = 100) -> str:
    """One block per claim: its id, then its bottom line's sentence wrapped under it."""
    out = wrap("Bottom lines (how each is derived from the test rows: report.md, under them):", width)
    table = Table(("claim", "bottom line"))
    for line in lines:
        table.add(line.claim, line.text)
    return "\n".join(out + [table.text(width, indent="  ", header=False)]) if lines else "no bottom lines"


def format_claims_short(rows: list[Row], width: int = 100) -> str:
    """A plain-text claims table for the terminal (module docstring).

    One block per claim id, over the rows of every experiment that judged it: the claim id and the statement,
    its verdict counts per source (ours, the authors' runs re-judged), then a table of its rows: evidence kind
    and verdict, the setting keys that tell the claim's rows apart (those of :data:`TERMINAL_KEYS` when any of
    them does, with the experiment that made the row when several did), and the headline measure (in words
    where the row has them; the other measures are in report.md); the ``diagnostic`` rows last, under a line
    saying they are never counted. Last, the number of rows per kind and verdict over every claim."""
    if not rows:
        return "no claim entries were produced"
    lines: list[str] = []
    for cid, group in by_claim(rows).items():
        lines += wrap(f"{cid}  {' '.join(group[0].statement.split())}", width)
        for source, counts in source_counts(group):  # a source's counts, continued lines hanging under it
            first, *rest = wrap(f"{source}: {counts}", width - 2)
            lines.append("  " + first)
            if rest:
                lines += ["    " + ln for ln in wrap(" ".join(rest), width - 4)]
        counted = [r for r in group if r.evidence != DIAGNOSTIC]
        diagnostics = [r for r in group if r.evidence == DIAGNOSTIC]
        distinct = dict(zip(map(id, group), distinct_settings(group, prefer=TERMINAL_KEYS)))
        several = len({r.experiment for r in group}) > 1
        for part in (counted, diagnostics):
            if not part:
                continue
            if part is diagnostics:
                lines += ["  " + ln for ln in wrap(DIAGNOSTIC_LINE, width - 2)]
            settings = [_setting(r, distinct[id(r)], several) for r in part]
            table = Table(["verdict"] + (["setting"] if any(settings) else []) + ["measured"])
            for r, setting in zip(part, settings):
                more = len(r.measured) - 1
                meas = (f"{headline_words(r)}: {format_measured(r.headline_entry)}"
                        + (f"; +{more} more in report.md" if more else ""))
                table.add(_short_verdict(r), *([setting] if any(settings) else []), meas)
            lines.append(table.text(width, indent="  ", header=False))
    lines.append("\n".join(wrap(count_noun(len(rows), "claim entry", "claim entries")
                                + " (only tests count as support):", width)))
    lines += ["  " + line for part in counts_text(rows).split("; ") for line in wrap(part, width - 2)]
    return "\n".join(lines)


def _setting(r: Row, distinct: str, several: bool) -> str:
    """The setting cell: the experiment that made the row when several judged the claim, then what differs."""
    return ", ".join(p for p in ((f"({r.experiment})" if several and r.experiment else ""), distinct) if p)


def _short_verdict(c: Row) -> str:
    """``[kind] verdict words`` for the terminal table."""
    return (tagged_verdict(c) + limited_label(c) + (" (incomplete)" if c.incomplete else "")
            + (" (head out of distribution)" if c.out_of_distribution else ""))


def terminal_summary(results: Mapping[str, Any], width: int = 100) -> str:
    """What ``headgeom reproduce`` prints at the end: the bottom lines, then the rows per claim."""
    rows = rows_of(results)
    return format_bottom_lines(bottom_lines_of(results, rows), width) + "\n\n" + format_claims_short(rows, width)

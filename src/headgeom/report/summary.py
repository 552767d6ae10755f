"""The one-screen summary that opens report.md: one line per claim C1…C12 present in the results, as a
table (headgeom.report.table).

Each line gives a short statement (headgeom.claims.claim), the paper's number (docs/paper.md §3; "proof" for the theorems,
which the paper proves rather than measures), then side by side the two sources of rows
(headgeom.claims.sources): ours, headgeom's own runs at the preset, and the authors' released runs
re-judged by the same rules. Each source's cell holds its verdict counts by evidence kind
(headgeom.claims.evidence; :func:`source_counts`, which the terminal summary prints too, so both count the
same rows per claim), one headline measured value with its spread and n (the ``headline`` every row names,
i.e. the measured entry that decided its verdict, headgeom.claims.row, told in words by its
``headline_text`` where the row has one; from the source's first ``test`` row, else its first row) and the
least training budget of its rows (headgeom.claims.budget). The paper's numbers are quoted for comparison,
never tuned toward.
"""
from __future__ import annotations

from typing import Any, Callable

from headgeom.claims.budget import Budget, budget_text
from headgeom.claims.claim import Claim, claim_of, natural_key
from headgeom.claims.evidence import TEST, counts_text
from headgeom.claims.row import Row
from headgeom.claims.sources import AUTHORS, is_authors
from headgeom.report.table import Table

__all__ = ["by_claim", "claim_line", "headline", "headline_row", "headline_words", "least_budget", "source_cell",
           "source_counts", "source_parts", "summary_table"]


def headline_row(rows: list[Row]) -> Row | None:
    """The row whose headline a source's cell quotes: its first ``test`` row, else its first row; None without."""
    ordered = [r for r in rows if r.evidence == TEST] + [r for r in rows if r.evidence != TEST]
    return ordered[0] if ordered else None


def headline(rows: list[Row]) -> tuple[str, Any] | None:
    """(measured key, value) to quote as ours: the ``headline`` of :func:`headline_row`; None without rows."""
    row = headline_row(rows)
    return (row.headline, row.headline_entry) if row else None


def headline_words(row: Row) -> str:
    """A row's headline as a reader reads it: its ``headline_text``, else its measured key."""
    return row.headline_text or row.headline


def source_counts(rows: list[Row]) -> list[tuple[str, str]]:
    """(source, verdict counts by evidence kind) of one claim's rows, ours first, then the authors' runs
    re-judged, each source present once: what the report's summary and the terminal both print per claim."""
    mine = [r for r in rows if not is_authors(r)]
    theirs = [r for r in rows if is_authors(r)]
    return [(name, counts_text(group)) for name, group in (("ours", mine), (AUTHORS, theirs)) if group]


def least_budget(rows: list[Row]) -> Budget | None:
    """The smallest budget fraction among the rows that have one."""
    budgets = [r.budget for r in rows if r.budget]
    return min(budgets, key=lambda b: b.fraction) if budgets else None


def by_claim(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows grouped by claim id, ids in natural order (C1, C2, …, C10, …)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.id, []).append(r)
    return {k: groups[k] for k in sorted(groups, key=natural_key)}


def claim_line(cid: str, rows: list[Row]) -> Claim:
    """The summary's gist and paper number of claim ``cid`` (:func:`headgeom.claims.claim.claim_of`: a claim
    the registry does not know is told by its first row's statement)."""
    return claim_of(cid, rows[0].statement if rows else "")


def source_parts(rows: list[Row], format_measured: Callable[[Any], str]) -> list[str]:
    """One source's cell of a claim as lines: verdict counts, the headline value, the least budget; none
    without rows."""
    if not rows:
        return []
    found = headline_row(rows)
    parts = [counts_text(rows)]
    if found:
        parts.append(f"{headline_words(found)}: {format_measured(found.headline_entry)}")
    b = least_budget(rows)
    if b:
        parts.append(budget_text(b))
    return parts


def source_cell(rows: list[Row], format_measured: Callable[[Any], str]) -> str:
    """One source's markdown cell of a claim (:func:`source_parts` on lines), "-" without rows."""
    return "<br>".join(source_parts(rows, format_measured)) or "-"


def summary_table(rows: list[Row], format_measured: Callable[[Any], str], preset: str | None = None) -> Table:
    """The summary: one line per claim id present in ``rows``, ours (at ``preset``) and the authors' runs
    re-judged side by side; line breaks inside a source's cell are ``<br>``."""
    ours_head = f"ours ({preset}, budget)" if preset else "ours (budget)"
    table = Table(("claim", "statement", "paper", ours_head, f"{AUTHORS} (their budget)"))
    for cid, group in by_claim(rows).items():
        info = claim_line(cid, group)
        mine = [r for r in group if not is_authors(r)]
        theirs = [r for r in group if is_authors(r)]
        table.add(f"**{cid}**", info.short, info.paper, source_cell(mine, format_measured),
                  source_cell(theirs, format_measured))
    return table

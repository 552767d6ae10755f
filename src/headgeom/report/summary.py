"""The one-screen summary that opens report.md: one line per claim C1…C12 present in the results, as a
table (headgeom.report.table).

Each line gives a short statement (headgeom.claims.claim), the paper's number (docs/paper.md §3; "proof" for the theorems,
which the paper proves rather than measures), then side by side the two sources of rows
(headgeom.claims.sources): ours, headgeom's own runs at the preset, and the authors' released runs
re-judged by the same rules. Each source's cell holds its verdict counts by evidence kind
(headgeom.claims.evidence), one headline measured value with its spread and n (the ``headline`` every
row names, i.e. the measured entry that decided its verdict, headgeom.claims.row; from the source's
first ``test`` row, else its first row) and the least training budget of its rows
(headgeom.claims.budget). The paper's numbers are quoted for comparison, never tuned
toward.
"""
from __future__ import annotations

from typing import Any, Callable

from headgeom.claims.budget import Budget, budget_text
from headgeom.claims.claim import Claim, claim_of, natural_key
from headgeom.claims.evidence import TEST, counts_text
from headgeom.claims.row import Row
from headgeom.claims.sources import AUTHORS, is_authors
from headgeom.report.table import Table

__all__ = ["by_claim", "claim_line", "headline", "least_budget", "source_cell", "source_parts", "summary_table"]


def headline(rows: list[Row]) -> tuple[str, Any] | None:
    """(measured key, value) to quote as ours: the ``headline`` of the first ``test`` row, else of the first
    row; None without rows."""
    ordered = [r for r in rows if r.evidence == TEST] + [r for r in rows if r.evidence != TEST]
    return (ordered[0].headline, ordered[0].headline_entry) if ordered else None


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
    found = headline(rows)
    parts = [counts_text(rows)]
    if found:
        parts.append(f"{found[0]}: {format_measured(found[1])}")
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

"""The one-screen summary that opens report.md: one line per claim C1…C12 present in the results.

Each line gives a short statement, the paper's number (docs/paper.md §3; "proof" for the theorems,
which the paper proves rather than measures), then side by side the two sources of rows
(headgeom.claims.sources): ours, headgeom's own runs at the preset, and the authors' released runs
re-judged by the same rules. Each source's cell holds its verdict counts by evidence kind
(headgeom.claims.evidence), one headline measured value with its spread and n (the ``headline`` every
row names, i.e. the measured entry that decided its verdict, :func:`check_headline`; from the source's
first ``test`` row, else its first row) and the least training budget of its rows
(headgeom.claims.budget). The paper's numbers are quoted for comparison, never tuned
toward.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from headgeom.claims.budget import budget_text
from headgeom.claims.evidence import TEST, counts_text
from headgeom.claims.sources import AUTHORS, is_authors


@dataclass(frozen=True)
class ClaimLine:
    """What the summary says of a claim besides the results: its gist and the paper's number (ours is
    the headline its rows name)."""

    short: str
    paper: str


CLAIMS: dict[str, ClaimLine] = {
    "C1": ClaimLine("a linear head whitens any r-dim subspace at a fixed point (Thm 3.1)", "proof"),
    "C2": ClaimLine("a curved loss metric cannot be made isotropic by a constant W (Prop 3.3)", "proof"),
    "C3": ClaimLine("deeper smooth heads make H_eff ε-isotropic along a trajectory (Thm 3.2)", "proof"),
    "C4": ClaimLine("smooth heads make collapsed equilibria saddles through M (Thm 4.1)", "proof"),
    "C5": ClaimLine("ReLU heads escape collapse only via step size or BN, not gradient flow", "14-run grid, no number"),
    "C6": ClaimLine("invariance forces vᵀGv = 0 on augmentation tangents (Prop 5.2)", "proof"),
    "C7": ClaimLine("rank(I_h) ≤ rank(I_z) − dim V_aug for Fisher information (Thm 5.3)", "proof"),
    "C8": ClaimLine("smooth heads show negative curvature in training and escape; ReLU/linear do not (Fig. 3)",
                    "normal Swish λ_min < 0 in 69/100 epochs (min −6.35e-6); collapsed ReLU λ_min = 0"),
    "C9": ClaimLine("the head compresses augmentation orbits while keeping classes apart (Tables 1, 5)",
                    "compression 21.85× (ResNet-18), 4015× (ViT-Tiny)"),
    "C10": ClaimLine("DINO heads compress orbits, VICReg and Barlow Twins heads expand them (§6.3)",
                     "per-dim ratio DINO ViT-S 1284, DINO R50 176, VICReg 1.43, Barlow 2.63"),
    "C11": ClaimLine("deeper heads compress more and protect the backbone better (depth ablation)",
                     "compression 49.1 / 57.2 / 78.5× at depth 1 / 2 / 3"),
    "C12": ClaimLine("the backbone beats the head on downstream probes (guillotine)",
                     "rotation probe 52.27 (z) vs 37.55 (head), CIFAR-10 ResNet-18"),
}


def natural_key(text: str) -> list[Any]:
    """"C2" before "C10"."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", text)]


def _row_name(claim: dict[str, Any]) -> str:
    """``C4 (reading tangential, part collapsed states)``: the id and the setting keys that tell a row apart."""
    setting = claim.get("setting") if isinstance(claim.get("setting"), Mapping) else {}
    told = ", ".join(f"{k} {setting[k]}" for k in ("part", "state", "reading", "probe", "metric", "regime", "objective")
                     if setting.get(k))
    return f"{claim.get('id', '?')}" + (f" ({told})" if told else "")


def check_headline(claim: dict[str, Any]) -> None:
    """ValueError unless the row names its ``headline``, the key of its ``measured`` entry that decided its
    verdict (the value the summary quotes as ours and the claims table shows first)."""
    key = claim.get("headline")
    keys = sorted(claim.get("measured") or {})
    if key is None:
        raise ValueError(f"claim row {_row_name(claim)} names no headline: set 'headline' to the measured entry "
                         f"its verdict was decided on, one of {keys} (add it with measured(...) if it is not there)")
    if key not in keys:
        raise ValueError(f"claim row {_row_name(claim)}: headline {key!r} is not one of its measured keys "
                         f"{keys}; name the measured entry that decided the verdict")


def headline(rows: list[dict[str, Any]]) -> tuple[str, Any] | None:
    """(measured key, value) to quote as ours: the ``headline`` of the first ``test`` row, else of the first
    row; None when no row names one (a results file written before every row had to)."""
    ordered = [r for r in rows if r.get("evidence") == TEST] + [r for r in rows if r.get("evidence") != TEST]
    for row in ordered:
        key = row.get("headline")
        if key is not None and key in (row.get("measured") or {}):
            return key, row["measured"][key]
    return None


def least_budget(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The smallest budget fraction among the rows that have one."""
    budgets = [r["budget"] for r in rows if r.get("budget")]
    return min(budgets, key=lambda b: b["fraction"]) if budgets else None


def by_claim(claims: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Rows grouped by claim id, ids in natural order (C1, C2, …, C10, …)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in claims:
        groups.setdefault(str(c["id"]), []).append(c)
    return {k: groups[k] for k in sorted(groups, key=natural_key)}


def claim_line(cid: str, rows: list[dict[str, Any]]) -> ClaimLine:
    """The summary's gist and paper number of claim ``cid``; a claim outside :data:`CLAIMS` is told by its
    first row's statement."""
    return CLAIMS.get(cid, ClaimLine(str(rows[0].get("statement", "")) if rows else "", "-"))


def source_parts(rows: list[dict[str, Any]], format_measured: Any) -> list[str]:
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


def source_cell(rows: list[dict[str, Any]], format_measured: Any) -> str:
    """One source's markdown cell of a claim (:func:`source_parts` on lines), "-" without rows."""
    return "<br>".join(source_parts(rows, format_measured)) or "-"


def summary_table(claims: list[dict[str, Any]], format_measured: Any, cell: Any, preset: str | None = None) -> str:
    """The markdown summary: one line per claim id present in ``claims``, ours (at ``preset``) and the
    authors' runs re-judged side by side.

    ``format_measured`` and ``cell`` are the markdown writer's value formatter and cell escaper. ``cell``
    is applied to the text of each column; line breaks inside a source's cell are ``<br>``."""
    if not claims:
        return "_No claim entries were produced._\n"
    ours_head = f"ours ({preset}, budget)" if preset else "ours (budget)"
    lines = [f"| claim | statement | paper | {ours_head} | {AUTHORS} (their budget) |", "|---|---|---|---|---|"]
    for cid, rows in by_claim(claims).items():
        info = claim_line(cid, rows)
        mine = [r for r in rows if not is_authors(r)]
        theirs = [r for r in rows if is_authors(r)]
        lines.append("| " + " | ".join(cell(x) for x in (f"**{cid}**", info.short, info.paper)) + " | "
                     + " | ".join(cell(source_cell(r, format_measured)) for r in (mine, theirs)) + " |")
    return "\n".join(lines) + "\n"

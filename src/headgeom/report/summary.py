"""The one-screen summary that opens report.md: one line per claim C1…C12 present in the results.

Each line gives a short statement, the paper's number (docs/paper.md §3; "proof" for the theorems,
which the paper proves rather than measures), then side by side the two sources of rows
(headgeom.claims.sources): ours, headgeom's own runs at the preset, and the authors' released runs
re-judged by the same rules. Each source's cell holds its verdict counts by evidence kind
(headgeom.claims.evidence), one headline measured value with its spread and n (the ``headline`` a row
names, i.e. the measure that decided its verdict, else the first key matching the claim's patterns
below; from the source's first ``test`` row that has it, else its first row) and the least training
budget of its rows (headgeom.claims.budget). The paper's numbers are quoted for comparison, never tuned
toward.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from headgeom.claims.budget import budget_text
from headgeom.claims.evidence import TEST, counts_text
from headgeom.claims.sources import AUTHORS, is_authors


@dataclass(frozen=True)
class ClaimLine:
    """What the summary says of a claim besides the results: its gist, the paper's number, and the
    measured keys (in order of preference, a trailing "*" matches any suffix) to quote as ours."""

    short: str
    paper: str
    headline: tuple[str, ...] = ()


CLAIMS: dict[str, ClaimLine] = {
    "C1": ClaimLine("a linear head whitens any r-dim subspace at a fixed point (Thm 3.1)", "proof",
                    ("isotropy_error",)),
    "C2": ClaimLine("a curved loss metric cannot be made isotropic by a constant W (Prop 3.3)", "proof",
                    ("iso_error_at_r=*", "max_abs_R_frame")),
    "C3": ClaimLine("deeper smooth heads make H_eff ε-isotropic along a trajectory (Thm 3.2)", "proof",
                    ("best_eps_deepest", "frac_depth_pairs_decreasing")),
    "C4": ClaimLine("smooth heads make collapsed equilibria saddles through M (Thm 4.1)", "proof",
                    ("frac_seeds_negative_H[silu]", "frac_seeds_negative_H[*")),
    "C5": ClaimLine("ReLU heads escape collapse only via step size or BN, not gradient flow", "14-run grid, no number",
                    ("relu_flow_escape_fraction", "escaped[*")),
    "C6": ClaimLine("invariance forces vᵀGv = 0 on augmentation tangents (Prop 5.2)", "proof",
                    ("ratio_random_after", "head_G_ratio_content_after")),
    "C7": ClaimLine("rank(I_h) ≤ rank(I_z) − dim V_aug for Fisher information (Thm 5.3)", "proof",
                    ("holds_frac_after", "rank_Ih_after")),
    "C8": ClaimLine("smooth heads show negative curvature in training and escape; ReLU/linear do not (Fig. 3)",
                    "normal Swish λ_min < 0 in 69/100 epochs (min −6.35e-6); collapsed ReLU λ_min = 0",
                    ("frac_points_negative[normal-silu]", "frac_points_negative[*")),
    "C9": ClaimLine("the head compresses augmentation orbits while keeping classes apart (Tables 1, 5)",
                    "compression 21.85× (ResNet-18), 4015× (ViT-Tiny)", ("selectivity", "compression")),
    "C10": ClaimLine("DINO heads compress orbits, VICReg and Barlow Twins heads expand them (§6.3)",
                     "per-dim ratio DINO ViT-S 1284, DINO R50 176, VICReg 1.43, Barlow 2.63",
                     ("selectivity[*", "trace_ratio_raw[*")),
    "C11": ClaimLine("deeper heads compress more and protect the backbone better (depth ablation)",
                     "compression 49.1 / 57.2 / 78.5× at depth 1 / 2 / 3",
                     ("selectivity depth *", "selectivity[depth *", "trace_ratio[depth *", "paired_difference")),
    "C12": ClaimLine("the backbone beats the head on downstream probes (guillotine)",
                     "rotation probe 52.27 (z) vs 37.55 (head), CIFAR-10 ResNet-18", ("gap_z_minus_head_output",)),
}


def natural_key(text: str) -> list[Any]:
    """"C2" before "C10"."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", text)]


def _match(key: str, pattern: str) -> bool:
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


def check_headline(claim: dict[str, Any]) -> None:
    """ValueError when a row's optional ``headline`` (the measured key that decided its verdict, quoted
    as ours in the summary) is not a key of its ``measured``."""
    key = claim.get("headline")
    if key is not None and key not in (claim.get("measured") or {}):
        raise ValueError(f"claim row {claim.get('id', '?')}: headline {key!r} is not one of its measured keys "
                         f"{sorted(claim.get('measured') or {})}; name the measured entry that decided the verdict")


def headline(rows: list[dict[str, Any]], patterns: tuple[str, ...]) -> tuple[str, Any] | None:
    """(measured key, value) to quote as ours: the ``headline`` a row names (the measure that decided
    its verdict), looking at ``test`` rows first; else the first pattern that some row matches; else
    the first measured entry of the first test row (or of the first row)."""
    ordered = [r for r in rows if r.get("evidence") == TEST] + [r for r in rows if r.get("evidence") != TEST]
    for row in ordered:
        key = row.get("headline")
        if key is not None and key in (row.get("measured") or {}):
            return key, row["measured"][key]
    for pattern in patterns:
        for row in ordered:
            for key, value in (row.get("measured") or {}).items():
                if _match(key, pattern):
                    return key, value
    for row in ordered:
        for key, value in (row.get("measured") or {}).items():
            return key, value
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


def source_cell(rows: list[dict[str, Any]], info: ClaimLine, format_measured: Any) -> str:
    """One source's cell of a claim: verdict counts, the headline value, the least budget; "-" without rows."""
    if not rows:
        return "-"
    found = headline(rows, info.headline)
    parts = [counts_text(rows)]
    if found:
        parts.append(f"{found[0]}: {format_measured(found[1])}")
    b = least_budget(rows)
    if b:
        parts.append(budget_text(b))
    return "<br>".join(parts)


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
        info = CLAIMS.get(cid, ClaimLine(str(rows[0].get("statement", "")), "-"))
        mine = [r for r in rows if not is_authors(r)]
        theirs = [r for r in rows if is_authors(r)]
        lines.append("| " + " | ".join(cell(x) for x in (f"**{cid}**", info.short, info.paper)) + " | "
                     + " | ".join(cell(source_cell(r, info, format_measured)) for r in (mine, theirs)) + " |")
    return "\n".join(lines) + "\n"

"""Where a claim row's data come from (docs/paper.md §3.8): every row of results.json carries
``source``, either headgeom's own runs at a preset, ``"ours (<preset>)"``, or :data:`AUTHORS`, the
authors' released paper-scale runs re-judged by headgeom's rules (headgeom.experiments.released_results).
The report puts the two side by side per claim (headgeom.report.summary)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from headgeom.claims.row import Row

__all__ = ["AUTHORS", "is_authors", "ours"]

AUTHORS = "authors' runs, re-judged"


def ours(preset: str) -> str:
    """The source of a row from headgeom's own runs at ``preset``, e.g. "ours (quick)"."""
    return f"ours ({preset})"


def is_authors(row: Row) -> bool:
    """Whether the row re-judges the authors' released runs (a row without ``source`` is headgeom's own)."""
    return row.source == AUTHORS

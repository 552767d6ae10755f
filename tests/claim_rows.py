"""An experiment's Summary as results.json holds it, for the tests that read rows and tables by key: each
row's JSON form (headgeom.claims.row.Row.to_json, NaN kept as NaN: no runner has written it yet) and each
table as (title, markdown)."""
from __future__ import annotations

from typing import Any


def rows_json(summary: Any) -> list[dict[str, Any]]:
    """The summary's claim rows as dicts of their JSON form."""
    return [row.to_json() for row in summary.claims]


def tables_md(summary: Any) -> list[tuple[str, str]]:
    """The summary's tables as (title, markdown), the pairs results.json stores."""
    return [(table.title, table.markdown()) for table in summary.tables]

"""The first lines of report.md and report.html when the authors' released runs are missing from the
report: how to add them.

``headgeom reproduce`` judges the authors' released paper-scale runs beside its own (experiment
RELEASED) when a copy of their files is found (``--released DIR``, ``$HEADGEOM_RELEASED``, or the cache
folder ``headgeom released fetch`` fills); without one, the runner leaves RELEASED out and records why
in ``results["skipped"]``. The report then opens with :func:`released_notice`, which both renderers
show above everything else: one fetch, then the same command again, which takes seconds since every
finished cell is reused.
"""
from __future__ import annotations

from typing import Any

__all__ = ["RELEASED_ID", "released_notice"]

RELEASED_ID = "RELEASED"
"""The experiment id of the authors' runs (headgeom.experiments.released_results; report/ sits below
experiments/ and does not import it)."""


def released_notice(results: dict[str, Any]) -> str | None:
    """One markdown paragraph (bold and code marks only), or None when the authors' runs are in the
    report or were not part of what ran (``--only C4``)."""
    if RELEASED_ID not in (results.get("skipped") or {}):
        return None
    command = results.get("command") or "headgeom reproduce"
    return ("**The authors' released runs are not in this report:** no copy of their result files was found. "
            "Add them with `headgeom released fetch` (into the cache folder, where `headgeom reproduce` finds "
            "them; or `headgeom released fetch DIR` and `--released DIR`), then rerun "
            f"`{command}`: it takes seconds, since every finished cell is reused.")

"""A run's ``metrics.jsonl``: one schema, one reader.

Schema (written by ``headgeom.train``'s JSON-lines logger, one line per logged or tracked step)::

    {"step": int, <metric>: number | null | "inf" | "-inf" | other JSON, ...}

``step`` is the optimizer step the line describes (0: the initialisation, tracked before any
update); the other keys are the loop's (``epoch``, ``loss``, ``lr``, the method's logs) and the
tracker's (``spread_*``, ``heff_<reading>_...``). Non-finite numbers follow
:func:`headgeom.io.json_safe` (NaN as null, ±inf as "inf"/"-inf").

:func:`read_metrics` is the one reader: the trainer (resume, last loss), the run-folder check,
the tracking figures and the training experiments read through it. A run killed while writing
leaves a torn last line; the default reader skips it (and any line that is not a step record),
``strict=True`` raises on it naming the line.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headgeom.io import json_number, json_safe

__all__ = ["METRICS_NAME", "MetricsRecord", "metrics_path", "read_metrics"]

METRICS_NAME = "metrics.jsonl"


@dataclass(frozen=True)
class MetricsRecord:
    """One line of metrics.jsonl: its ``step`` and every other key as written (``values``)."""

    step: int
    values: Mapping[str, Any] = field(default_factory=dict)

    def number(self, key: str) -> float | None:
        """``key`` as a float (±inf and NaN decoded; see :func:`headgeom.io.json_number`), None when the
        line lacks it or holds something that is not a number."""
        if key not in self.values:
            return None
        v = self.values[key]
        if v is None or (isinstance(v, str) and v in ("inf", "-inf")):
            return json_number(v)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def finite(self, key: str) -> float | None:
        """:meth:`number` when finite, else None (what a trajectory plots)."""
        v = self.number(key)
        return v if v is not None and math.isfinite(v) else None

    def as_dict(self) -> dict[str, Any]:
        """The line as a dict, ``step`` first (what it was written from)."""
        return {"step": self.step, **self.values}

    def to_line(self) -> str:
        """The JSON line (no newline) the logger writes for this record."""
        return json.dumps(json_safe(self.as_dict()), allow_nan=False)


def metrics_path(run: str | os.PathLike[str]) -> Path:
    """``run/metrics.jsonl`` for a run directory, ``run`` itself for a file."""
    run = Path(run)
    return run if run.suffix == ".jsonl" or run.is_file() else run / METRICS_NAME


def _step(value: Any) -> int | None:
    """An integer step (an integral float is accepted), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return None
    return int(value)


def _records(path: Path, strict: bool) -> Iterator[MetricsRecord]:
    with path.open("r", encoding="utf-8", errors="strict" if strict else "replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                if strict:
                    raise ValueError(f"{path}:{lineno} is not valid JSON ({err.msg}); is the file truncated?") from None
                continue  # a torn last line from a kill
            if not isinstance(row, dict):
                if strict:
                    raise ValueError(f"{path}:{lineno} must be a JSON object with a 'step'; got {type(row).__name__}")
                continue
            step = _step(row.get("step"))
            if step is None:
                if strict:
                    raise ValueError(f"{path}:{lineno} has no integer 'step' (got {row.get('step')!r}); "
                                     "every line needs one")
                continue
            yield MetricsRecord(step, {k: v for k, v in row.items() if k != "step"})


def read_metrics(run: str | os.PathLike[str], *, strict: bool = False) -> list[MetricsRecord]:
    """The records of a run's metrics.jsonl (``run``: the run directory or the file), in file order.

    A missing file reads as no records unless ``strict``, which raises FileNotFoundError; lines
    that are not step records (a torn last line) are skipped unless ``strict``, which raises
    ValueError naming the line."""
    path = metrics_path(run)
    if not path.is_file():
        if strict:
            raise FileNotFoundError(f"no metrics file at {path}; a training run writes RUN_DIR/{METRICS_NAME}")
        return []
    return list(_records(path, strict))

"""One name per logged quantity: the shared tag scheme of every logger headgeom writes to.

A native run's ``metrics.jsonl`` keeps its keys (the on-disk schema :mod:`headgeom.tracking.record`
writes and every reader of a run parses); everything that leaves the run folder for a tracking
tool (TensorBoard, MLflow, W&B from ``headgeom train --logger``, the Lightning callback, the
framework-free :class:`headgeom.integrations.GeometryMonitor`) names the same quantity by the one
tag :func:`tag` gives its metrics.jsonl key. The rule, said once:

- ``heff_<reading>_mean_<rest>`` -> ``headgeom/<reading>/<rest>``, ``heff_<reading>_sum_<rest>`` ->
  ``headgeom/<reading>_sum/<rest>`` (the H_eff numbers of one loss-Hessian reading; ``<rest>`` is the
  :class:`~headgeom.tracking.record.HeffReading` field, ``op_<field>`` for the Lanczos estimate on the
  whole coupled operator);
- the representation statistics (:class:`~headgeom.tracking.record.Statistics`, and the reference
  spread a collapse level is calibrated against) -> ``headgeom/stats/<key>``;
- the relative updates (:class:`~headgeom.tracking.record.Updates`) -> ``headgeom/updates/<key>``;
- every other key (``loss``, ``lr``, ``epoch``, ``grad_norm_head``, ``grad_norm_backbone``, the
  method's own logs) -> ``train/<key>``.

:func:`table_markdown` renders the table of docs/logging.md (tests/test_tags.py checks the page
against it, so the page cannot drift from the code).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from headgeom.geometry.engine.readings import READINGS
from headgeom.tracking.record import REDUCTIONS, HeffReading, Statistics, Updates

__all__ = ["HEFF_FIELDS", "OPERATOR_ONLY", "STATISTICS", "TRAIN_KEYS", "UPDATES", "tag", "table_markdown", "tagged"]

HEFF_FIELDS = tuple(f.name for f in fields(HeffReading) if f.name not in ("reading", "reduction", "source"))
STATISTICS = (*(f.name for f in fields(Statistics)), "spread_reference")  # spread_reference: headgeom.train.cells
UPDATES = tuple(f.name for f in fields(Updates))
OPERATOR_ONLY = ("converged", "iterations")  # the Lanczos run's own numbers: written as op_<field> only
TRAIN_KEYS = ("loss", "lr", "epoch", "grad_norm_head", "grad_norm_backbone")  # what the loop logs itself


def _reading_part(reading: str, reduction: str) -> str:
    return reading if reduction == "mean" else f"{reading}_{reduction}"


def tag(key: str) -> str:
    """The shared tag of the metrics.jsonl key ``key`` (the module docstring's rule)."""
    for reading in READINGS:
        for reduction in REDUCTIONS:
            prefix = f"heff_{reading}_{reduction}_"
            if key.startswith(prefix) and len(key) > len(prefix):
                return f"headgeom/{_reading_part(reading, reduction)}/{key[len(prefix):]}"
    if key in STATISTICS:
        return f"headgeom/stats/{key}"
    if key in UPDATES:
        return f"headgeom/updates/{key}"
    return f"train/{key}"


def tagged(scalars: dict[str, Any]) -> dict[str, float]:
    """``{tag(key): float(value)}`` of the numeric entries of a metrics.jsonl record (``step``,
    strings, None and booleans left out)."""
    out: dict[str, float] = {}
    for key, value in scalars.items():
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[tag(key)] = float(value)
    return out


def _monitor_names() -> dict[str, str]:
    """metrics.jsonl field -> the key GeometryMonitor.measure() returns for it."""
    from headgeom.integrations.monitor import HEFF_NAMES, STATISTICS_NAMES  # the monitor's own table

    return {**HEFF_NAMES, **STATISTICS_NAMES}


def table_markdown() -> str:
    """The tag table of docs/logging.md: one row per quantity, with its metrics.jsonl key and its
    name in what GeometryMonitor.measure() returns ("" where the monitor does not report it)."""
    monitor = _monitor_names()
    rows = [("metrics.jsonl key", "shared tag", "GeometryMonitor key")]
    rows += [(key, tag(key), "") for key in TRAIN_KEYS]
    rows.append(("<method log>", "train/<method log>", ""))
    for reduction in REDUCTIONS:
        for source, infix in (("blocks", ""), ("operator", "op_")):
            example = HeffReading.prefix("<reading>", reduction, source)
            rows.append((f"{example}<field>", f"headgeom/{_reading_part('<reading>', reduction)}/{infix}<field>", ""))
    for f in HEFF_FIELDS:
        name = f"op_{f}" if f in OPERATOR_ONLY else f
        rows.append((f"heff_<reading>_mean_{name}", f"headgeom/<reading>/{name}", monitor.get(f, "")))
    rows += [(k, tag(k), monitor.get(k, "")) for k in STATISTICS]
    rows += [(k, tag(k), "") for k in UPDATES]
    lines = [f"| {' | '.join(rows[0])} |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(f"`{c}`" if c else "" for c in row) + " |" for row in rows[1:]]
    return "\n".join(lines)

"""One name per logged quantity: the shared tag scheme of every logger headgeom writes to.

A native run's ``metrics.jsonl`` keeps its keys (the on-disk schema :mod:`headgeom.tracking.record`
writes and every reader of a run parses); everything that leaves the run folder for a tracking
tool (TensorBoard, MLflow, W&B from ``headgeom train --logger``, the Lightning callback, the
framework-free :class:`headgeom.integrations.GeometryMonitor`'s ``measure()``) names the same
quantity by the one tag :func:`tag` gives its metrics.jsonl key. The rule, said once:

- ``heff_<reading>_mean_<rest>`` -> ``headgeom/<reading>/<rest>``, ``heff_<reading>_sum_<rest>`` ->
  ``headgeom/<reading>_sum/<rest>`` (the H_eff numbers of one loss-Hessian reading; ``<rest>`` is the
  :class:`~headgeom.tracking.record.HeffReading` field, ``op_<field>`` for the Lanczos estimate on the
  whole coupled operator);
- the representation statistics (:class:`~headgeom.tracking.record.Statistics`, and the reference
  spread a collapse level is calibrated against) -> ``headgeom/stats/<key>``;
- the relative updates (:class:`~headgeom.tracking.record.Updates`) -> ``headgeom/updates/<key>``;
- every other key (``loss``, ``lr``, ``epoch``, ``grad_norm_head``, ``grad_norm_backbone``, the
  method's own logs) -> ``train/<key>``.

The monitor's name table lives here too: ``MONITOR_HEFF`` and ``MONITOR_STATISTICS`` are the
record fields GeometryMonitor reports (under their tags), each with the key its ``measure()``
returned before 0.3, still read for one release with a DeprecationWarning.

:func:`table_markdown` renders the table of docs/logging.md (tests/test_tags.py checks the page
against it, so the page cannot drift from the code).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from headgeom.geometry.engine.readings import READINGS
from headgeom.tracking.record import REDUCTIONS, HeffReading, Statistics, Updates

__all__ = ["HEFF_FIELDS", "MONITOR_HEFF", "MONITOR_STATISTICS", "OPERATOR_ONLY", "STATISTICS", "TRAIN_KEYS",
           "UPDATES", "tag", "table_markdown", "tagged"]

HEFF_FIELDS = tuple(f.name for f in fields(HeffReading) if f.name not in ("reading", "reduction", "source"))
STATISTICS = (*(f.name for f in fields(Statistics)), "spread_reference")  # spread_reference: headgeom.train.cells
UPDATES = tuple(f.name for f in fields(Updates))
OPERATOR_ONLY = ("converged", "iterations")  # the Lanczos run's own numbers: written as op_<field> only
TRAIN_KEYS = ("loss", "lr", "epoch", "grad_norm_head", "grad_norm_backbone")  # what the loop logs itself

# GeometryMonitor reports these record fields (HeffReading's and Statistics'), under their tags; the
# value is the key its measure() returned for the field before 0.3 (deprecated, read for one release).
# The monitor's head is the projector: its spread_head is a native run's spread_projector, and the
# engine's float64 head-output spread (Statistics.spread_head) would repeat it, so it is left out.
MONITOR_HEFF = {
    "lambda_min": "lambda_min", "lambda_max": "lambda_max", "n_negative": "n_negative",
    "frac_samples_negative": "frac_samples_negative", "floor": "floor", "operand_scale": "operand_scale",
    "M_ratio_fro": "m_ratio_fro", "M_ratio_spectral": "m_ratio", "power_lambda_min": "power_lambda_min",
    "power_shift": "power_shift", "converged": "lanczos_converged", "iterations": "lanczos_iterations",
}
MONITOR_STATISTICS = {
    "spread_z": "spread", "spread_projector": "spread_head", "cov_condition_z": "cov_condition",
    "cov_rank_z": "cov_rank", "rankme_z": "rankme", "cov_condition_projector": "cov_condition_head",
    "cov_rank_projector": "cov_rank_head", "rankme_projector": "rankme_head",
}


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


def table_markdown() -> str:
    """The tag table of docs/logging.md: one row per quantity, with its metrics.jsonl key, its shared
    tag and, where GeometryMonitor reports it, the key the monitor's measure() returned for it
    before 0.3 (deprecated; "" where the monitor does not report it)."""
    monitor = {**MONITOR_HEFF, **MONITOR_STATISTICS}
    rows = [("metrics.jsonl key", "shared tag", "GeometryMonitor key before 0.3 (deprecated)")]
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

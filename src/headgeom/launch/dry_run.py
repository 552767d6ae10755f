"""``headgeom reproduce --dry-run``: what a run would do, and what it would cost, without doing it.

Per selected experiment: its cells; its key settings against the paper's
(each experiment's ``protocol``, :class:`headgeom.report.paper_protocol.PaperProtocol`), with a
"differs from the paper because …" column;
each cell's resources (the preset's, with the command line's overrides) and the GPU-hours (or CPU
core-hours) they add up to. Nothing is run, written or submitted: the caller resolves the
experiments' presets and cells (``headgeom.experiments.runner.plan_experiments``), this prints them.
"""
from __future__ import annotations

from typing import Any

from headgeom.launch.resources import Resources, with_overrides
from headgeom.report.paper_protocol import SECTION, as_set, preset_settings, show

__all__ = ["TRAIN_KEYS", "cost", "dry_run", "settings_rows"]

# what the dry run shows for every training experiment, in this order (then the protocol's other keys)
TRAIN_KEYS = ("dataset", "backbone", "method", "head", "predictor", "epochs", "batch_size", "optimizer", "lr",
              "augmentation", "seeds")
HEADER = ("setting", "this preset", f"the paper ({SECTION})", "differs from the paper because …")


def settings_rows(exp: Any, config: Any, cells: list[dict[str, Any]], n_seeds: int, preset: str,
                  seeds_given: bool = False) -> list[tuple[str, str, str, str]]:
    """(setting, this preset's value, the paper's, why they differ) for the experiment's key settings;
    the last column is empty where they agree."""
    protocol = exp.protocol.settings if exp.protocol is not None else {}
    keys = list(TRAIN_KEYS if exp.train_config else ()) + [k for k in protocol if k not in TRAIN_KEYS]
    ours = preset_settings(exp, config, cells, n_seeds, keys)
    listed = exp.protocol.differences if exp.protocol is not None and preset == "paper" else {}
    rows = []
    for key in keys:
        if key not in ours:
            continue
        paper = show(protocol[key]) if key in protocol else "not stated"
        why = ""
        if key == "seeds" and seeds_given:
            why = "--seeds on the command line"
        elif key in protocol and as_set(protocol[key]) != as_set(ours[key]):
            why = listed.get(key) or (f"the {preset} preset is scaled down (the paper preset follows the paper)"
                                      if preset != "paper" else "NOT LISTED in the experiment's protocol differences")
        rows.append((key, show(ours[key]), paper, why))
    return rows


def cost(res: Resources, n_cells: int) -> dict[str, float | None]:
    """Accelerator or CPU-core hours of ``n_cells`` cells on ``res``: expected (from
    ``res.expected_min``; None when unknown) and at most (every cell running to its time limit)."""
    units = res.gpus if res.gpus else res.cpus
    expected = n_cells * units * res.expected_min / 60 if res.expected_min is not None else None
    return {"expected": expected, "limit": n_cells * units * res.time_min / 60}


def _hours(h: float | None) -> str:
    return "unknown" if h is None else f"{h:.1f}" if h >= 0.95 else f"{h:.2f}"


def _limit(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def _resources_line(res: Resources, n_cells: int) -> str:
    parts = [f"{res.gpus} GPU" + ("s" if res.gpus != 1 else "") if res.gpus else "no GPU",
             f"{res.cpus} CPU" + ("s" if res.cpus != 1 else ""),
             f"{res.mem_gb:g} GB" if res.mem_gb is not None else "memory: the cluster's default",
             f"time limit {_limit(res.time_min)}"]
    if res.processes > 1:
        parts.append(f"DDP over {res.processes} processes")
    if res.partition:
        parts.append(f"partition {res.partition}")
    if res.account:
        parts.append(f"account {res.account}")
    parts += [f"--{k}={v}" for k, v in res.options]
    c = cost(res, n_cells)
    unit = "GPU-hours" if res.gpus else "CPU core-hours"
    expected = (f"expected {res.expected_min:g} min per cell → {_hours(c['expected'])} {unit}"
                if res.expected_min is not None else "expected time unknown")
    return f"  resources per cell: {', '.join(parts)}; {expected} (at most {_hours(c['limit'])} {unit} by the limits)"


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["  | " + " | ".join(HEADER) + " |", "  |" + "---|" * len(HEADER)]
    lines += ["  | " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    return lines


def _axes(cells: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
    """{key: its distinct values} when ``cells`` are exactly the product of them, else None."""
    keys = list(cells[0]) if cells else []
    if any(list(c) != keys for c in cells):
        return None
    axes = {k: sorted({c[k] for c in cells}, key=repr) for k in keys}
    n = 1
    for values in axes.values():
        n *= len(values)
    return axes if n == len(cells) and len({tuple(c.values()) for c in cells}) == n else None


def _cells_lines(cells: list[dict[str, Any]]) -> list[str]:
    """The cells in a few lines: the product of their keys' values when they form one, else the
    distinct settings (× the seeds when every setting has the same seeds), one per line."""
    def name(c: dict[str, Any]) -> str:
        return " ".join(f"{k}={show(v)}" for k, v in c.items())

    axes = _axes(cells)
    if axes is not None:
        return ["    " + " × ".join(f"{k} ∈ {{{show(tuple(v))}}}" for k, v in axes.items())]
    settings: dict[str, set] = {}
    for c in cells:
        settings.setdefault(name({k: v for k, v in c.items() if k != "seed"}), set()).add(c.get("seed"))
    seeds = {frozenset(v) for v in settings.values()}
    if len(seeds) == 1 and None not in next(iter(seeds)):
        head = [f"    {len(settings)} settings × seed ∈ {{{show(tuple(next(iter(seeds))))}}}:"]
        return head + [f"      {s}" for s in settings]
    return [f"    {name(c)}" for c in cells]


def dry_run(plan: list[tuple[Any, Any, list[dict[str, Any]], int, list[str]]], load_errors: dict[str, str],
            preset: str = "quick", seeds: int | None = None, launcher: str = "local", **overrides: Any) -> str:
    """The dry run's text (module docstring) of ``plan`` and ``load_errors`` (what
    ``headgeom.experiments.runner.plan_experiments`` returns for ``preset`` and ``seeds``); ``overrides``:
    those of :func:`headgeom.launch.resources.with_overrides` (partition, account, gpus, time, options).
    Raises ValueError for a bad --time."""
    lines = [f"dry run of --preset {preset} on --launcher {launcher}: {len(plan)} experiment(s); nothing is run, "
             "written or submitted"]
    if launcher == "local":
        lines.append("(the resources below are what --launcher slurm asks SLURM for; --launcher local runs every cell "
                     "as one process on this machine)")
    totals = {"cells": 0, "gpu": 0.0, "gpu_limit": 0.0, "cpu": 0.0, "cpu_limit": 0.0, "unknown": []}
    for exp, config, cells, n_seeds, notes in plan:
        res = with_overrides(exp.cell_resources(preset), **overrides)
        kind = "training" if exp.train_config else "theory" if exp.theory else "measurement"
        lines += ["", f"{exp.id} ({kind}): {exp.title}"] + [f"  note: {n}" for n in notes]
        lines += [f"  {len(cells)} cells:"] + _cells_lines(cells)
        lines.append(_resources_line(res, len(cells)))
        rows = settings_rows(exp, config, cells, n_seeds, preset, seeds_given=seeds is not None)
        if rows:
            lines += _table(rows)
        else:
            lines.append(f"  {SECTION} states no setting for this experiment beyond its claim (a check of the theory "
                         "on constructed problems); its settings are the config in results.json")
        c = cost(res, len(cells))
        key = "gpu" if res.gpus else "cpu"
        totals["cells"] += len(cells)
        totals[f"{key}_limit"] += c["limit"]
        if c["expected"] is None:
            totals["unknown"].append(exp.id)
        else:
            totals[key] += c["expected"]
    lines += ["", f"total: {totals['cells']} cells; expected {_hours(totals['gpu'])} GPU-hours and "
                  f"{_hours(totals['cpu'])} CPU core-hours (at most {_hours(totals['gpu_limit'])} GPU-hours and "
                  f"{_hours(totals['cpu_limit'])} CPU core-hours by the time limits)"
              + (f"; expected time unknown for {', '.join(totals['unknown'])}" if totals["unknown"] else "")]
    if load_errors:
        lines.append(f"experiment modules that failed to import (not listed): {load_errors}")
    return "\n".join(lines)

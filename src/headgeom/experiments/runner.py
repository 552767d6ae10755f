"""Run registered experiments cell by cell into run directories, then write the claims report.

``headgeom reproduce`` and ``headgeom theory`` call :func:`run_experiments`. Layout of ``OUT``::

    OUT/runs/<ID>/<cell-key>/config.json    resolved config, cell, preset, git revision, versions, start
    OUT/runs/<ID>/<cell-key>/metrics.jsonl  curves a cell logs (log_metrics), the runs schema {"step", ...}
    OUT/runs/<ID>/<cell-key>/done.json      written atomically LAST: the cell is finished
    OUT/runs/<ID>/<cell-key>/error.json     the traceback of a cell that raised
    OUT/figures/<ID>_<name>.png             figures of the summaries
    OUT/results.json                        {"preset", "seeds", "experiments", "claims", "bottom_lines", ...}
    OUT/report.md                           readable on its own; the claims table leads
    OUT/report.html                         the same as one self-contained page: figures embedded, filters

A cell key is readable and deterministic: ``head=silu_seed=0-<hash>``, the hash (8 hex digits of
SHA-1) covering the cell and the resolved config without its ``seeds`` field (which only sets
how many cells there are). A changed setting therefore gets a new directory instead of reusing
stale results, while raising ``--seeds`` reuses the seeds already run. A re-run skips every cell
whose ``done.json`` exists and reads its metrics from there (nanoGPT-style: a run's log carries
its own config, code version and environment).

The runner alone runs a cell's ``run_cell``: with the torch thread count of the config's
``num_threads`` field (:func:`call_cell`), timed (``elapsed_s``, wall, and ``cpu_s``, this process's CPU
time, in done.json; their sums per experiment in results.json).
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import re
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary, experiment_modules, load_all
from headgeom.io import atomic_write_json, json_safe
from headgeom.launch.cells import DONE, CellTask
from headgeom.launch.cost import CellWork, after_shared, cell_work, folder_records, training_steps
from headgeom.launch.flops import forward_flops
from headgeom.launch.local import LocalLauncher
from headgeom.launch.progress import CellItem, ProgressDisplay, Tracker, cell_label, progress_mode
from headgeom.launch.status import cell_states, format_status
from headgeom.overrides import apply_overrides, cells_ignoring
from headgeom.claims.bottom_line import bottom_lines
from headgeom.claims.row import Row
from headgeom.claims.sources import ours
from headgeom.report.markdown import count_noun
from headgeom.runs import RunLock, RunLockedError
from headgeom.runs.cell import TRAINED_NAME, following_cell, running_cell
from headgeom.runs.store import STORE_NAME, lineage_key
from headgeom.runs.metrics import METRICS_NAME
from headgeom.runs.provenance import environment, utc_now
from headgeom.threads import torch_threads
from headgeom.train.ddp import job_layout
from headgeom.train.config import TrainConfig
from headgeom.train.recipes import CELL_FIELDS



# ----------------------------------------------------------------------------- JSON and keys
jsonable = json_safe
"""Results of ``run_cell`` as JSON: :func:`headgeom.io.json_safe` (the name experiments import)."""


def config_dict(config: Any) -> Any:
    """The resolved config as JSON (``dataclasses.asdict`` for the usual frozen dataclass)."""
    return jsonable(dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config)


def cell_key(cell: dict[str, Any], config: Any = None) -> str:
    """Filesystem-safe, deterministic directory name: ``k=v_k=v-<8 hex digits>``.

    The readable part is cut to 80 characters; the hash covers the whole cell and the config
    (without ``seeds``), so distinct cells or settings never share a directory."""
    cfg = config_dict(config) if config is not None else None
    if isinstance(cfg, dict):
        cfg = {k: v for k, v in cfg.items() if k != "seeds"}
    blob = json.dumps(jsonable({"cell": cell, "config": cfg}), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha1(blob.encode("utf-8")).hexdigest()[:8]
    parts = []
    for k, v in cell.items():
        v = json.dumps(jsonable(v), sort_keys=True) if not isinstance(v, str) else v
        parts.append(f"{k}={v}")
    slug = re.sub(r"[^A-Za-z0-9=.+-]+", "_", "_".join(parts)).strip("_.")[:80] or "cell"
    return f"{slug}-{digest}"


# ----------------------------------------------------------------------------- selection
def _natural(key: str) -> list[Any]:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", key)]


def _load() -> dict[str, str]:
    """Import every experiment module; returns {module: error} for those that failed to import,
    so one broken module does not stop the others from running."""
    try:
        load_all()
        return {}
    except Exception:  # noqa: BLE001 - fall back to importing module by module
        errors = {}
        for name in experiment_modules():
            try:
                importlib.import_module(f"headgeom.experiments.{name}")
            except Exception as err:  # noqa: BLE001
                errors[name] = f"{type(err).__name__}: {err}"
        return errors


def select_experiments(ids: list[str] | None, theory_only: bool = False) -> list[Experiment]:
    """Registered experiments by id (case-insensitive, in the given order), or all of them in
    id order; ``theory_only`` keeps those with ``theory=True``. Raises ValueError when an id is
    unknown or nothing is left to run."""
    pool = {k: e for k, e in EXPERIMENTS.items() if e.theory or not theory_only}
    what = "theory experiment (theory=True)" if theory_only else "experiment"
    if not pool:
        raise ValueError(f"no {what} is registered; experiment modules live in "
                         "src/headgeom/experiments/cN_name.py and call register(EXPERIMENT)")
    if not ids:
        return [pool[k] for k in sorted(pool, key=_natural)]
    by_upper = {k.upper(): k for k in pool}
    chosen: list[str] = []
    for raw in ids:
        i = raw.strip()
        if not i:
            continue
        if i.upper() not in by_upper:
            extra = (f" ({i!r} is registered but is not a theory experiment)"
                     if theory_only and i.upper() in {k.upper() for k in EXPERIMENTS} else "")
            raise ValueError(f"unknown {what} id {i!r}{extra}; registered: {', '.join(sorted(pool, key=_natural))}")
        if by_upper[i.upper()] not in chosen:
            chosen.append(by_upper[i.upper()])
    if not chosen:
        raise ValueError(f"no experiment selected from {ids!r}; registered: {', '.join(sorted(pool, key=_natural))}")
    return [pool[k] for k in chosen]


def resolve_config(exp: Experiment, preset: str, seeds: int | None,
                   overrides: tuple[str, ...] = ()) -> tuple[Any, int, list[str]]:
    """(config, number of seeds, notes): the preset's config with the ``KEY=VALUE`` ``overrides``
    applied (``--set``, nested keys with dots: :mod:`headgeom.overrides`), then ``seeds`` replaced when given."""
    config = exp.config(preset)
    try:
        config = apply_overrides(config, overrides, cell_keys(exp, config))
    except ValueError as err:
        raise ValueError(f"experiment {exp.id}: {err}") from err
    notes: list[str] = []
    has_seeds = dataclasses.is_dataclass(config) and any(f.name == "seeds" for f in dataclasses.fields(config))
    if seeds is not None:
        if has_seeds:
            config = dataclasses.replace(config, seeds=seeds)
        else:
            notes.append(f"--seeds {seeds} was given but the config of {exp.id} has no `seeds` field; "
                         f"its cells are enumerated with n_seeds={seeds}")
    n_seeds = int(config.seeds) if has_seeds else (seeds if seeds is not None else 1)
    if overrides and exp.train_config is not None:  # a --set key the cells replace would be silently ignored
        instead = (f"change the settings the cells are built from instead (headgeom reproduce --only {exp.id} "
                   "--dry-run shows the cells and their training settings)")
        try:
            notes += cells_ignoring(config, overrides, [(c, exp.train_config(config, c))
                                                        for c in exp.cells(config, n_seeds)], instead)
        except ValueError as err:
            raise ValueError(f"experiment {exp.id}: {err}") from err
    return config, n_seeds, notes


def cell_keys(exp: Experiment, config: Any) -> dict[str, str]:
    """The config keys every cell of ``exp`` sets itself, each with what to set instead: the experiment's
    ``cell_keys`` and, in a training experiment, the head and seed of its nested TrainConfig (CELL_FIELDS)."""
    keys: dict[str, str] = {}
    if exp.train_config is not None and dataclasses.is_dataclass(config):
        for f in dataclasses.fields(config):
            if isinstance(getattr(config, f.name), TrainConfig):
                keys.update({f"{f.name}.{k}": v for k, v in CELL_FIELDS.items()})
    return {**keys, **exp.cell_keys}


# ----------------------------------------------------------------------------- one cell
def cell_threads(config: Any) -> int | None:
    """The torch intra-op thread count a cell runs with: the config's ``num_threads`` field (None, or
    a config without the field: torch's setting as it is, e.g. the local launcher's share of the cores)."""
    return getattr(config, "num_threads", None)


def call_cell(exp: Experiment, config: Any, cell: dict[str, Any]) -> Any:
    """``exp.run_cell(config, cell)`` with :func:`cell_threads` torch threads, restored afterwards: the
    one place a cell's thread count is applied (the runner also times the cell, as ``elapsed_s``)."""
    with torch_threads(cell_threads(config)):
        return exp.run_cell(config, cell)


def run_one_cell(exp: Experiment, config: Any, cell: dict[str, Any], run_dir: Path, preset: str,
                 env: dict[str, Any], train_logger: str = "jsonl", store: Path | None = None,
                 stops: dict[str, tuple[int | None, ...]] | None = None) -> dict[str, Any]:
    """Run (or reuse) one cell in ``run_dir``; returns {"status": "done"|"reused"|"failed", ...}.
    ``train_logger``: TrainConfig.logger of the training runs inside the cell (it changes where
    they log, never what they compute, so it is not part of the cell key). ``store``: the run's
    trained-model store (headgeom.runs.store; None: a training cell trains in its own folder) and
    ``stops``: the max_steps the plan needs of the cell's trajectory ({lineage key: stops}).

    ``run_dir`` is locked meanwhile (:class:`headgeom.runs.RunLock`): a cell that another process
    is running (a second ``reproduce`` on the same ``--out``) is reported failed, its files untouched.
    In a cell of several processes (a SLURM job step with several tasks, whose training joins one
    DDP job: headgeom.train.ddp) only rank 0 does this; the other ranks run the same cell through
    :func:`follow_cell`, which writes nothing (and takes no lock)."""
    layout = job_layout(os.environ)
    if layout is not None and int(layout["rank"]) != 0:
        return follow_cell(exp, config, cell, run_dir, train_logger)
    if layout is not None:  # rank 0 of several: the ranks of one cell train in lockstep in the cell's own folder
        store = None
    lock = RunLock(run_dir)
    try:
        lock.acquire()
    except RunLockedError as err:
        return {"status": "failed", "error": f"RunLockedError: {err}", "elapsed_s": None}
    try:
        return _run_locked_cell(exp, config, cell, run_dir, preset, env, train_logger, store, stops)
    finally:
        lock.release()


def _run_locked_cell(exp: Experiment, config: Any, cell: dict[str, Any], run_dir: Path, preset: str,
                     env: dict[str, Any], train_logger: str, store: Path | None = None,
                     stops: dict[str, tuple[int | None, ...]] | None = None) -> dict[str, Any]:
    done = run_dir / "done.json"
    if done.exists():
        try:
            rec = json.loads(done.read_text(encoding="utf-8"))
            return {"status": "reused", "metrics": rec["metrics"], "elapsed_s": rec.get("elapsed_s"),
                    "cpu_s": rec.get("cpu_s")}
        except (OSError, ValueError, KeyError):
            pass  # unreadable done.json: run the cell again
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in ("error.json", METRICS_NAME, TRAINED_NAME):
        (run_dir / stale).unlink(missing_ok=True)
    atomic_write_json(run_dir / "config.json", {
        "experiment": exp.id, "preset": preset, "cell": jsonable(cell), "config": config_dict(config),
        "git_revision": env["git_revision"], "git_dirty": env["git_dirty"], "versions": env["versions"],
        "platform": env["platform"], "started": utc_now(),
    })
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        with running_cell(run_dir, train_logger, store, stops):
            metrics = call_cell(exp, config, cell)
        if not isinstance(metrics, dict):
            raise TypeError(f"run_cell of {exp.id} returned {type(metrics).__name__}; it must return a dict of metrics")
        metrics = jsonable(metrics)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    except Exception as err:  # noqa: BLE001 - a failing cell is reported, the run goes on
        elapsed = time.perf_counter() - t0
        atomic_write_json(run_dir / "error.json", {
            "experiment": exp.id, "cell": jsonable(cell), "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(), "elapsed_s": elapsed, "finished": utc_now(),
        })
        return {"status": "failed", "error": f"{type(err).__name__}: {err}", "elapsed_s": elapsed}
    atomic_write_json(done, {"experiment": exp.id, "cell": jsonable(cell), "metrics": metrics,
                             "elapsed_s": elapsed, "cpu_s": cpu, "finished": utc_now()})
    return {"status": "done", "metrics": metrics, "elapsed_s": elapsed, "cpu_s": cpu}


def follow_cell(exp: Experiment, config: Any, cell: dict[str, Any], run_dir: Path,
                train_logger: str = "jsonl") -> dict[str, Any]:
    """A rank other than 0 of a multi-process cell: run the cell alongside rank 0 (its training is
    one DDP job over the ranks; the cell's steps after training run again here, on files rank 0
    wrote), write nothing, and leave the cell's outcome to rank 0's files; returns {"status": "follower"}
    or {"status": "failed", ...} (rank 0's error.json is the one reported)."""
    if (run_dir / "done.json").exists():  # rank 0 reuses it too: nothing to join
        return {"status": "follower"}
    try:
        with following_cell(run_dir, train_logger):
            call_cell(exp, config, cell)
    except Exception as err:  # noqa: BLE001 - rank 0 reports the cell
        return {"status": "failed", "error": f"{type(err).__name__}: {err}", "elapsed_s": None}
    return {"status": "follower"}


# ----------------------------------------------------------------------------- summaries
CONVENTIONS_REQUIRED = True
"""Whether a ``test`` row that names no conventions (:meth:`headgeom.claims.row.Row.convention_gaps`) is an error of its experiment's summary (True: the run exits 1)
or a warning in its notes and on stderr (False, until every experiment's test rows carry theirs). The one line to
change to make it an error."""


def convention_check(exp_id: str, rows: list[Row]) -> tuple[str, str] | None:
    """(what is wrong, the rows that lack it) for the test rows of ``exp_id`` that name no conventions; None when
    none lack them."""
    gaps = [f"{r.name}: {'; '.join(r.convention_gaps())}" for r in rows if r.convention_gaps()]
    if not gaps:
        return None
    return (f"{count_noun(len(gaps), 'test row')} of {exp_id} without the conventions the verdict depends on "
            f"(docs/report.md#conventions-and-robustness)", " | ".join(gaps))


def _summarize(exp: Experiment, config: Any, results: list[tuple[dict, dict]], preset: str, out: Path,
               n_failed: int, n_cells: int) -> tuple[list[Row], list[tuple[str, str]], list[str], list[str], list[str]]:
    """(claim rows, tables as (title, markdown), figure paths relative to OUT, notes, errors) of one experiment."""
    from headgeom.report.figures import figure_file_name, make_figure, save_figure
    from headgeom.report.table import Table

    errors: list[str] = []
    if n_cells and not results:
        failed = "the only cell" if n_cells == 1 else f"all {n_cells} cells"
        return [], [], [], [f"{failed} failed: nothing to summarise"], []
    try:
        summary = exp.summarize(config, results)
    except Exception:  # noqa: BLE001
        return [], [], [], [], [f"summarize raised:\n{traceback.format_exc()}"]
    if not isinstance(summary, Summary):
        return [], [], [], [], [f"summarize of {exp.id} returned {type(summary).__name__}; it must return a Summary"]
    rows = []
    for entry in summary.claims:
        try:  # a Row was checked when made; a dict (an experiment written before the Row type) is checked here
            row = entry if isinstance(entry, Row) else Row.from_json(jsonable(entry))
        except (ValueError, TypeError) as err:
            errors.append(f"invalid claim entry: {err}")
            continue
        if row.source is None:  # headgeom's own runs; the authors' runs re-judged name their source
            row = row.replace(setting={**row.setting, "preset": preset}, source=ours(preset))
        row = row.replace(experiment=exp.id)
        if n_failed:
            row = row.replace(incomplete=f"{n_failed} of {count_noun(n_cells, 'cell')} failed; measured on the others")
        rows.append(row)
    gaps = convention_check(exp.id, rows)
    if gaps and CONVENTIONS_REQUIRED:
        errors.append(": ".join(gaps))
    elif gaps:
        print(f"warning: {gaps[0]}; the rows are named in the notes of report.md", file=sys.stderr, flush=True)
    figures: list[str] = []
    for name, build in summary.figures:
        try:
            rel = Path("figures") / figure_file_name(exp.id, name)
            save_figure(make_figure(build, results), out / rel)
            figures.append(rel.as_posix())
        except Exception:  # noqa: BLE001
            errors.append(f"figure {name!r} failed:\n{traceback.format_exc()}")
    tables = [(t.title, t.markdown()) for t in summary.tables if isinstance(t, Table)]
    if len(tables) < len(summary.tables):
        errors.append(f"Summary.tables must hold headgeom.report.table.Table objects; got "
                      f"{sorted({type(t).__name__ for t in summary.tables if not isinstance(t, Table)})}")
    notes = [str(n) for n in summary.notes] + ([f"warning: {': '.join(gaps)}"] if gaps and not CONVENTIONS_REQUIRED
                                               else [])
    return rows, tables, figures, notes, errors


def _command(ids: list[str] | None, preset: str, out: Path, seeds: int | None, theory_only: bool,
             train_logger: str = "jsonl", overrides: tuple[str, ...] = ()) -> str:
    parts = ["headgeom", "theory" if theory_only else "reproduce", "--preset", preset]
    if ids:
        parts += ["--only", ",".join(ids)]
    parts += ["--out", str(out)]
    if seeds is not None:
        parts += ["--seeds", str(seeds)]
    if train_logger != "jsonl":
        parts += ["--logger", train_logger]
    for assignment in overrides:
        parts += ["--set", shlex.quote(assignment)]
    return " ".join(parts)


# ----------------------------------------------------------------------------- the runner
class Plan(list):
    """The selected experiments as (exp, config, cells, n_seeds, notes); ``without_preset``: the ids of the
    experiments left out for want of the preset; ``skipped``: {experiment id: why not} for those left out
    because their inputs are absent (:attr:`Experiment.available`)."""

    def __init__(self, items: Any = (), without_preset: list[str] | None = None) -> None:
        super().__init__(items)
        self.without_preset: list[str] = list(without_preset or [])
        self.skipped: dict[str, str] = {}


def plan_experiments(ids: list[str] | None, preset: str, seeds: int | None,
                     theory_only: bool = False, overrides: tuple[str, ...] = ()) -> tuple[Plan, dict[str, str]]:
    """(the selected experiments with their resolved configs (``overrides``: :func:`resolve_config`) and
    cells, {module: import error}). Raises ValueError for an unknown preset/id, bad seeds, an override
    the config does not have, or nothing to run."""
    from headgeom.experiments.registry import PRESETS, SHARED_PRESETS

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise ValueError(f"seeds must be a positive integer; got {seeds!r}")
    load_errors = _load()
    try:
        selected = select_experiments(ids, theory_only=theory_only)
    except ValueError as err:
        if load_errors:
            raise ValueError(f"{err}\nexperiment modules that failed to import: {load_errors}") from err
        raise
    without = []
    if not ids:  # every experiment: those without the preset sit it out (--only names them: an error)
        without = [e.id for e in selected if preset not in e.presets]
        selected = [e for e in selected if preset in e.presets]
        if not selected:
            raise ValueError(f"no {'theory ' if theory_only else ''}experiment has the preset {preset!r}")
    plan = Plan(without_preset=without)
    for exp in selected:
        try:
            config, n_seeds, notes = resolve_config(exp, preset, seeds, tuple(overrides))
            reason = exp.available(config) if exp.available is not None else None
            if reason is not None:
                if ids or preset not in SHARED_PRESETS:  # asked for: absent inputs are an error
                    raise ValueError(f"experiment {exp.id}: {reason}")
                plan.skipped[exp.id] = reason
                continue
            cells = list(exp.cells(config, n_seeds))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError) as err:
            if not overrides or str(err).startswith(f"experiment {exp.id}: "):
                raise
            raise ValueError(_blame_overrides(exp.id, overrides, err)) from err
        plan.append((exp, config, cells, n_seeds, notes))
    return plan, load_errors


def _blame_overrides(exp_id: str, overrides: tuple[str, ...], err: BaseException) -> str:
    """One line for a preset that its own checks accepted with ``--set`` values but whose seeds or cells
    could not be formed from them (a value of the wrong type or range that no field check caught): the
    assignments, what failed, and where to see the preset's values."""
    what = " ".join(str(err).split()) or type(err).__name__
    return (f"experiment {exp_id}: --set {' '.join(repr(o) for o in overrides)}: its cells cannot be formed "
            f"with this value ({type(err).__name__}: {what}); headgeom reproduce --only {exp_id} --dry-run "
            f"shows the preset's values and their types")


def trajectories(plan: Plan) -> dict[tuple[str, str], str]:
    """{(experiment id, cell key): lineage key} of every training cell of the plan: the trajectory it
    trains (headgeom.runs.store.lineage_key of its TrainConfig without max_steps), shared by the cells
    whose models coincide up to where they stop."""
    out = {}
    for exp, config, cells, _, _ in plan:
        if exp.train_config is not None:
            for cell in cells:
                out[(exp.id, cell_key(cell, config))] = lineage_key(exp.train_config(config, cell).to_dict())
    return out


def plan_stops(plan: Plan) -> dict[str, tuple[int | None, ...]]:
    """{lineage key: the max_steps its cells stop at, shortest first (None, the whole schedule, last)}."""
    stops: dict[str, set[int | None]] = {}
    for exp, config, cells, _, _ in plan:
        if exp.train_config is not None:
            for cell in cells:
                tc = exp.train_config(config, cell)
                stops.setdefault(lineage_key(tc.to_dict()), set()).add(tc.max_steps)
    return {k: tuple(sorted(v, key=lambda s: float("inf") if s is None else s)) for k, v in stops.items()}


def cell_tasks(plan: Plan, out: Path, preset: str, env: dict[str, Any], train_logger: str = "jsonl") -> list[CellTask]:
    """One launcher task per cell, in plan order: ``run_one_cell`` into ``out/runs/<ID>/<cell-key>``
    (portable, i.e. runnable in another process, when the experiment has an importable address);
    ``train_logger`` is handed to every cell (TrainConfig.logger of its training runs). Training cells
    train into (or reuse) the trained-model store ``out/runs/trained`` (headgeom.runs.store), told the
    stops the plan needs of their trajectory, and carry the trajectory as their ``share``."""
    store = out / "runs" / STORE_NAME
    lineages, stops = trajectories(plan), plan_stops(plan)
    tasks = []
    for exp, config, cells, _, _ in plan:
        portable = exp.address() is not None
        for cell in cells:
            key = cell_key(cell, config)
            run_dir = out / "runs" / exp.id / key
            share = lineages.get((exp.id, key))
            tasks.append(CellTask(f"{exp.id}/{key}", exp.id, run_dir, run_one_cell,
                                  (exp, config, cell, run_dir, preset, env, train_logger, store,
                                   {share: stops[share]} if share is not None else {}),
                                  exp.cell_resources(preset), portable, share))
    return tasks


def cell_status(ids: list[str] | None, preset: str = "quick", out: Path = Path("reproduce-out"),
                seeds: int | None = None, theory_only: bool = False, overrides: tuple[str, ...] = ()) -> str:
    """Per-cell state of the run folder ``out`` (done, failed, pending, running, missing), with job
    ids, the error's last line and the log of failed cells; runs and submits nothing."""
    plan, _ = plan_experiments(ids, preset, seeds, theory_only, overrides)
    tasks = cell_tasks(plan, Path(out), preset, {})
    return format_status(tasks, cell_states(tasks), Path(out))


def _experiment_entry(exp: Experiment, config: Any, cells: list[dict[str, Any]], n_seeds: int, notes: list[str],
                      results: dict[Path, dict[str, Any]], out: Path, preset: str) -> tuple[dict, list[dict], int]:
    """(results.json entry, claims, failed cells + summary errors) of one experiment whose cells
    all have a result in ``results`` {run_dir: {"status": "done"|"reused"|"failed", ...}}."""
    t0 = time.perf_counter()
    ok, failed, reused, cell_time, cell_cpu = [], [], 0, 0.0, 0.0
    for cell in cells:
        key = cell_key(cell, config)
        run_dir = out / "runs" / exp.id / key
        res = results[run_dir]
        cell_time += float(res.get("elapsed_s") or 0.0)
        cell_cpu += float(res.get("cpu_s") or 0.0)
        if res["status"] == "failed":
            failed.append({"key": key, "cell": jsonable(cell), "error": res["error"],
                           "error_file": (run_dir / "error.json").relative_to(out).as_posix()})
        else:
            reused += res["status"] == "reused"
            ok.append((cell, res["metrics"]))
    rows, tables, figures, s_notes, errors = _summarize(exp, config, ok, preset, out, len(failed), len(cells))
    claims = [jsonable(r.to_json()) for r in rows]
    entry = {
        "title": exp.title, "statement": exp.statement, "theory": exp.theory, "config": config_dict(config),
        "seeds": n_seeds, "n_cells": len(cells), "n_failed": len(failed), "n_reused": reused,
        # cells may run side by side or on a cluster: the experiment's time is its cells' plus its summary's
        "elapsed_s": cell_time + time.perf_counter() - t0, "cells_elapsed_s": cell_time,
        "cells_cpu_s": cell_cpu, "tables": tables,
        "notes": notes + s_notes, "figures": figures, "failed_cells": failed, "errors": errors,
        "runs": (out / "runs" / exp.id).relative_to(out).as_posix(),
    }
    errs = f", {count_noun(len(errors), 'summary error')}" if errors else ""
    print(f"{exp.id}: {count_noun(len(cells), 'cell')} ({reused} reused, {len(failed)} failed), "
          f"{entry['elapsed_s']:.1f} s of cell time summed over cells{errs}; {rows_made(rows)}", file=sys.stdout,
          flush=True)
    return entry, claims, len(failed) + len(errors)


def rows_made(rows: list[Row]) -> str:
    """"rows for claims C8 (4), C4 (2); verdicts per claim at the end": what an experiment gave, without verdict
    counts, which are told once per claim over every experiment's rows (the report's and the terminal's summary)."""
    if not rows:
        return "no claim rows"
    per: dict[str, int] = {}
    for r in rows:
        per[r.id] = per.get(r.id, 0) + 1
    return ("rows for claim" + ("s " if len(per) > 1 else " ") + ", ".join(f"{c} ({n})" for c, n in per.items())
            + "; verdicts per claim at the end")


def trained_before(train: dict[str, Any], stops: tuple[int | None, ...], seen: bool) -> int:
    """The steps of a training cell's run that the progress estimate counts as trained by other cells: all
    of them when an earlier cell of the plan stops its trajectory at the same step (``seen``: it reuses
    that run), else those up to the trajectory's previous stop (``stops``: the plan's, shortest first),
    which the cells stopping there train."""
    if seen:
        return training_steps(train)
    shorter = [s for s in stops if s is not None and (train["max_steps"] is None or s < train["max_steps"])]
    return training_steps({**train, "max_steps": max(shorter)}) if shorter else 0


def cell_progress(plan: Plan, tasks: list[CellTask], out: Path, preset: str, launcher: Any,
                  enabled: bool = True) -> ProgressDisplay:
    """The run's progress on stderr (:mod:`headgeom.launch.progress`; off unless ``enabled``): every task
    weighed by the cost model (:mod:`headgeom.launch.cost`), calibrated by the cell times already in
    ``out``; time left over the local launcher's workers (SLURM: cells only)."""
    mode = progress_mode(enabled, sys.stderr)

    def work(exp: Experiment, preset_name: str, config: Any, train: Any) -> CellWork:
        expected = exp.cell_resources(preset_name).expected_min
        return cell_work(exp.id, config, train, forward_flops, None if expected is None else 60 * expected)

    def recorded(exp_id: str, record: Any, train: Any) -> CellWork | None:
        exp = EXPERIMENTS.get(exp_id)
        if exp is None or (exp.train_config is not None and train is None):
            return None
        return work(exp, str(record.get("preset", preset)), record.get("config") or {}, train)

    items = []
    if mode != "off":  # the FLOPs of every model are counted only for a display
        cells = {out / "runs" / exp.id / cell_key(cell, config): (exp, config, cell)
                 for exp, config, exp_cells, _, _ in plan for cell in exp_cells}
        stops, stops_seen = plan_stops(plan), set()
        for task in tasks:
            if task.run_dir not in cells:  # not one cell of the plan: weighed as a cell that trains nothing
                items.append(CellItem(task.run_dir, task.group, task.name, CellWork(task.group, task.group, False),
                                      (task.run_dir / DONE).exists(), task.portable))
                continue
            exp, config, cell = cells[task.run_dir]
            train = exp.train_config(config, cell).to_dict() if exp.train_config is not None else None
            cost = work(exp, preset, config_dict(config), train)
            if train is not None and task.share is not None:  # what of its model other cells train (the store)
                cost = after_shared(cost, train, trained_before(train, stops[task.share], (task.share, train["max_steps"])
                                                                in stops_seen))
                stops_seen.add((task.share, train["max_steps"]))
            items.append(CellItem(task.run_dir, exp.id, cell_label(cell), cost, (task.run_dir / DONE).exists(),
                                  task.portable))
    records = folder_records(out / "runs", recorded) if items else {}
    jobs = getattr(launcher, "jobs", 1) if getattr(launcher, "name", "local") == "local" else None
    return ProgressDisplay(Tracker(items, records, jobs, time.monotonic()), mode, sys.stderr)


def run_experiments(ids: list[str] | None, preset: str = "quick", out: Path = Path("reproduce-out"),
                    seeds: int | None = None, progress: bool = True, theory_only: bool = False,
                    launcher: Any = None, train_logger: str = "jsonl", overrides: tuple[str, ...] = ()) -> dict:
    """Run the selected experiments' cells, summarise them, write results.json, report.md and report.html.

    ``launcher`` (headgeom.launch; default: every cell in this process, one after another) decides
    where cells run; each experiment is summarised as soon as its last cell has a result. Returns
    the results.json content plus ``n_failed`` (failed cells + failed summaries or figures +
    experiment modules that did not import when everything was selected) and ``paths``; when the
    launcher left cells queued (SLURM without waiting) nothing is summarised and the return value
    is ``{"waiting": [cell names], "submitted": [(cell name, job id)], "command", "paths"}``.
    ``train_logger`` (``--logger``): TrainConfig.logger of every training run inside the cells.
    ``overrides`` (``--set KEY=VALUE``, nested keys with dots): applied to every selected preset.
    Raises ValueError for an unknown preset/id, bad seeds, or nothing to run."""
    from headgeom.report.figures import use_agg
    from headgeom.report.html import write_html
    from headgeom.report.markdown import write_report

    out = Path(out)
    launcher = LocalLauncher(jobs=1) if launcher is None else launcher
    use_agg()
    plan, load_errors = plan_experiments(ids, preset, seeds, theory_only, overrides)
    for exp_id, reason in plan.skipped.items():  # once each; the experiments without the preset are listed in results.json
        print(f"{exp_id} skipped: {reason}", file=sys.stdout, flush=True)
    env = environment()
    tasks = cell_tasks(plan, out, preset, env, train_logger)
    display = cell_progress(plan, tasks, out, preset, launcher, progress)
    by_id = {exp.id: (exp, config, cells, n_seeds, notes) for exp, config, cells, n_seeds, notes in plan}
    left = {exp.id: len(cells) for exp, _, cells, _, _ in plan}
    results: dict[Path, dict[str, Any]] = {}
    summaries: dict[str, tuple[dict, list[dict], int]] = {}

    def summarize(exp_id: str) -> None:
        with display.summarising(exp_id):
            summaries[exp_id] = _experiment_entry(*by_id[exp_id], results, out, preset)

    def on_result(task: CellTask, res: dict[str, Any]) -> None:
        results[task.run_dir] = res
        display.finished(task.run_dir, res)
        left[task.group] -= 1
        if left[task.group] == 0:
            summarize(task.group)

    with display, display.redirect():
        for exp_id in [e for e, n in left.items() if n == 0]:
            summarize(exp_id)
        outcome = launcher.run(tasks, on_result)
    paths = {"report": out / "report.md", "html": out / "report.html", "results": out / "results.json",
             "runs": out / "runs", "slurm": out / "slurm"}
    if outcome.waiting:
        return {"waiting": [t.name for t in outcome.waiting],
                "submitted": [(t.name, job) for t, job in outcome.submitted],
                "command": _command(ids, preset, out, seeds, theory_only, train_logger, overrides), "paths": paths}

    experiments: dict[str, Any] = {}
    all_claims: list[dict] = []
    n_failed_total = len(load_errors) if not ids else 0
    for exp, *_ in plan:
        entry, claims, n_failed = summaries[exp.id]
        experiments[exp.id] = entry
        all_claims += claims
        n_failed_total += n_failed
    results_json = {
        "preset": preset, "seeds": seeds,
        "command": _command(ids, preset, out, seeds, theory_only, train_logger, overrides),
        "launcher": launcher.describe(), "experiments": experiments, "claims": all_claims,
        # one per claim, by the rule of headgeom.claims.bottom_line from the rows just written (their indices)
        "bottom_lines": [b.to_json() for b in bottom_lines(Row.from_json(c) for c in all_claims)], "environment": env,
        "load_errors": load_errors, "skipped": plan.skipped, "without_preset": plan.without_preset,
        "finished": utc_now(),
    }
    atomic_write_json(out / "results.json", results_json)
    write_report(out / "report.md", results_json)
    write_html(out / "report.html", results_json)  # after the figures it embeds, as report.md links them
    figures = [out / f for e in experiments.values() for f in e["figures"]]
    return {**results_json, "n_failed": n_failed_total, "paths": {**paths, "figures": figures}}

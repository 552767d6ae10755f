"""An experiment's cells: the list of them (:func:`seeded_cells`, every setting × every seed, and
:func:`check_known` for the config entries they are made from), and the cell being run: which run
directory, which training logger, where its curves go.

A cell is one setting × one seed, JSON-able parameters (``{"run": "collapsed-silu", "seed": 0}``);
the experiments and the code below them that makes cells (e.g. a theory system's regimes) build
their lists here, so the seed count is checked and the keys ordered (the seed last) in one place.

``headgeom reproduce`` runs each cell of an experiment into its own directory
(:mod:`headgeom.experiments.runner`); while a cell runs, code below the experiments (the training
cells of :mod:`headgeom.train.cells`) asks here where that directory is, instead of importing the
runner. The runner enters :func:`running_cell` (rank 0: it writes the cell's files) or
:func:`following_cell` (another rank of a multi-process cell: it runs the cell and writes nothing).
Outside both (a test calling ``run_cell`` directly) every query answers None.

The runner also says where the run's trained-model store is (:mod:`headgeom.runs.store`: training
cells train into it and reuse what it holds) and which stops (``max_steps``) of each trajectory the
run's plan needs, so a cell training a trajectory stops at each on its way (:func:`planned_stops`);
a cell lists the models it used in its ``trained.json`` (:func:`record_trained_model`).
"""
from __future__ import annotations

import contextlib
import contextvars
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from headgeom.io import atomic_write_json
from headgeom.runs.metrics import METRICS_NAME, MetricsRecord
from headgeom.runs.store import ModelStore

__all__ = ["TRAINED_NAME", "Cell", "check_known", "current_run_dir", "current_store", "current_train_logger",
           "following_cell", "log_metrics", "planned_stops", "record_trained_model", "running_cell", "seeded_cells"]

TRAINED_NAME = "trained.json"
"""A cell's record of the trained models it used (:func:`record_trained_model`)."""

# the metrics.jsonl of the cell being run (log_metrics appends to it)
_LOG_FILE: contextvars.ContextVar[Path | None] = contextvars.ContextVar("headgeom_cell_log", default=None)
# TrainConfig.logger of the training runs inside the cell being run (headgeom reproduce --logger)
_TRAIN_LOGGER: contextvars.ContextVar[str | None] = contextvars.ContextVar("headgeom_cell_train_logger", default=None)
# the cell directory of a process that is not rank 0 of a multi-process cell (it runs the cell, writes nothing)
_FOLLOWED: contextvars.ContextVar[Path | None] = contextvars.ContextVar("headgeom_followed_cell", default=None)
# the run's trained-model store, and {lineage key: the max_steps the plan needs of that trajectory}
_STORE: contextvars.ContextVar[ModelStore | None] = contextvars.ContextVar("headgeom_cell_store", default=None)
_STOPS: contextvars.ContextVar[dict[str, tuple[int | None, ...]]] = contextvars.ContextVar("headgeom_cell_stops",
                                                                                         default={})


Cell = dict[str, Any]


def seeded_cells(experiment: str, settings: Iterable[Cell], seeds: int | None, *, default: int,
                 seed_major: bool = False) -> list[Cell]:
    """One cell per setting × seed: each setting's parameters followed by ``"seed"`` (0 … n-1), every
    seed of a setting together (``seed_major``: every setting of seed 0 first). n is ``seeds`` when
    given (``headgeom reproduce --seeds``), else ``default`` (the config's ``seeds``). Raises
    ValueError naming ``experiment`` when n is not a whole number >= 1."""
    n = default if seeds is None else seeds
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{experiment} needs at least one seed; got {n!r}: give seeds >= 1 "
                         f"(headgeom reproduce --seeds N, or --set seeds=N)")
    settings = list(settings)
    if seed_major:
        return [{**setting, "seed": s} for s in range(n) for setting in settings]
    return [{**setting, "seed": s} for setting in settings for s in range(n)]


def check_known(what: str, entries: Iterable[Any], known: Iterable[Any]) -> None:
    """Raise ValueError naming the entries of ``what`` (a config field, e.g. "C8 config runs") that
    are not among ``known``, and the choices."""
    known = tuple(known)
    bad = [e for e in entries if e not in known]
    if bad:
        raise ValueError(f"{what} has unknown entries {bad}; choose from {known}")


@contextlib.contextmanager
def running_cell(run_dir: Path, train_logger: str | None, store: Path | None = None,
                 stops: dict[str, tuple[int | None, ...]] | None = None) -> Iterator[None]:
    """Inside the block, ``run_dir`` is the cell being run (its metrics.jsonl takes :func:`log_metrics`);
    its training runs live in the trained-model store at ``store`` (None: in the cell's own folder), and
    ``stops`` says which max_steps of each trajectory (by :func:`headgeom.runs.store.lineage_key`) the
    run needs."""
    tokens = (_LOG_FILE.set(Path(run_dir) / METRICS_NAME), _TRAIN_LOGGER.set(train_logger),
              _STORE.set(None if store is None else ModelStore(Path(store))), _STOPS.set(dict(stops or {})))
    try:
        yield
    finally:
        for var, token in zip((_LOG_FILE, _TRAIN_LOGGER, _STORE, _STOPS), tokens):
            var.reset(token)


@contextlib.contextmanager
def following_cell(run_dir: Path, train_logger: str | None) -> Iterator[None]:
    """Inside the block, ``run_dir`` is the cell this rank follows (:func:`log_metrics` writes nothing)."""
    token, logger_token = _FOLLOWED.set(Path(run_dir)), _TRAIN_LOGGER.set(train_logger)
    try:
        yield
    finally:
        _TRAIN_LOGGER.reset(logger_token)
        _FOLLOWED.reset(token)


def current_run_dir() -> Path | None:
    """The run directory of the cell being run (None outside the runner)."""
    current = _LOG_FILE.get()
    return _FOLLOWED.get() if current is None else current.parent


def current_store() -> ModelStore | None:
    """The trained-model store of the cell being run (None outside the runner, in a rank that follows
    a multi-process cell, and when the runner gave none)."""
    return _STORE.get()


def planned_stops(lineage: str) -> tuple[int | None, ...]:
    """The max_steps the run's plan needs of the trajectory ``lineage`` (empty when unknown)."""
    return tuple(_STOPS.get().get(lineage, ()))


def record_trained_model(entry: dict[str, Any]) -> bool:
    """Append ``entry`` (which trained model the cell used: key, folder, how it was obtained) to the running
    cell's trained.json, written atomically; returns False (writes nothing) outside the runner."""
    current = _LOG_FILE.get()
    if current is None:
        return False
    path = current.parent / TRAINED_NAME
    try:
        models = json.loads(path.read_text(encoding="utf-8"))["models"]
    except (OSError, ValueError, KeyError, TypeError):
        models = []
    atomic_write_json(path, {"models": [*models, entry]})
    return True


def current_train_logger() -> str | None:
    """How the training runs of the cell being run log (headgeom.train.TrainConfig.logger, from
    ``headgeom reproduce --logger``); None outside the runner."""
    return _TRAIN_LOGGER.get()


def log_metrics(step: int, values: dict[str, Any]) -> bool:
    """Append ``{"step": step, **values}`` to the running cell's metrics.jsonl (created by the first
    call), in the one schema of a run's metrics.jsonl (:mod:`headgeom.runs.metrics`, read back with
    ``read_metrics(<cell>)``).

    Experiments call this from ``run_cell`` to log a curve (one line per step, epoch or
    evaluation); a training cell's run writes its own ``<cell>/train/metrics.jsonl``. The cell's
    result is done.json. Outside the runner (a test calling ``run_cell`` directly) it does nothing
    and returns False."""
    current = _LOG_FILE.get()
    if current is None:
        return False
    with open(current, "a", encoding="utf-8") as fh:
        fh.write(MetricsRecord(int(step), dict(values)).to_line() + "\n")
    return True

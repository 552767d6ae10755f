"""A training cell of the experiments (C8, the collapse grid, the activation ablation, C9, C11, C12).

It wires :func:`headgeom.train.train` and :class:`headgeom.tracking.GeometryTracker` into one
cell and reads the run's metrics.jsonl back as a typed trajectory
(:func:`headgeom.tracking.read_tracking`); the rules the verdicts apply to those trajectories
(negative-curvature fraction, collapse escape, dead head) are :mod:`headgeom.claims.training_verdicts`.

Where a cell trains: inside ``headgeom reproduce`` in the run's trained-model store
(:mod:`headgeom.runs.store`, ``OUT/runs/trained/<key>/steps-<n>/``, a ``headgeom train`` run folder:
config.json, metrics.jsonl, checkpoints), keyed by the training config and the tracker's settings, so
every cell that needs the same model reads the one run (train once, measure many), a killed cell
resumes its training, and ``headgeom eval`` works on it; the cell's ``trained.json`` says which run it
used. A cell trains a trajectory through every stop (max_steps) the run's plan needs of it on the way
to its own (:func:`headgeom.runs.cell.planned_stops`), so a shorter stop wanted by another cell is never
trained again from step 0. A cell that is one rank of a multi-process job trains in its own folder
(``<cell>/train``, the ranks in lockstep) and outside the runner (tests, direct calls) it trains into a
temporary directory that is removed.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from headgeom.runs.cell import current_run_dir, current_store, current_train_logger, planned_stops, record_trained_model
from headgeom.runs.store import ModelStore, lineage_key, model_key
from headgeom.tracking.record import combine
from headgeom.tracking.reference import reference_spread
from headgeom.tracking.tracker import GeometryTracker
from headgeom.tracking.trajectory import Trajectory, read_tracking

from .config import TrainConfig
from .loop import NonFiniteLossError, train

# ----------------------------------------------------------------------------- running a training cell
def cell_directory() -> Path | None:
    """The runner's directory of the cell being run (None outside ``headgeom reproduce``)."""
    return current_run_dir()


@contextlib.contextmanager
def training_directory() -> Iterator[tuple[Path, bool]]:
    """(directory for the cell's ``headgeom train`` run, resume?): ``<cell>/train`` under the runner
    (resumed when a previous attempt wrote its config.json), else a temporary directory."""
    cell = cell_directory()
    if cell is not None:
        path = cell / "train"
        yield path, (path / "config.json").exists()
        return
    with tempfile.TemporaryDirectory(prefix="headgeom-cell-") as tmp:
        yield Path(tmp) / "train", False


class Trackers:
    """Several GeometryTrackers called as one ``tracker(step, method, probe_views)``: their records
    merged into one (one HeffReading per reading; the shared statistics are the same numbers),
    logged as its metrics.jsonl keys. At step 0 it also logs ``spread_reference``, the spread of the
    same method with its pseudo-collapse ``alpha`` undone on the same probe batch
    (:func:`headgeom.tracking.reference.reference_spread`), which the escape rule calibrates against."""

    def __init__(self, trackers: Sequence[Any], alpha: float | None = None) -> None:
        if not trackers:
            raise ValueError("Trackers needs at least one GeometryTracker")
        self.trackers = list(trackers)
        self.alpha = alpha

    def __call__(self, step: int, method: torch.nn.Module, probe_views: Sequence[torch.Tensor]) -> dict[str, float]:
        out = combine([tracker.measure(step, method, probe_views) for tracker in self.trackers]).metrics()
        if step == 0:
            out["spread_reference"] = reference_spread(method, probe_views, self.alpha, self.trackers[0].head_mode)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Every tracker's state (checkpointed with the run, so a resumed run's update series go on)."""
        return {"trackers": [t.state_dict() for t in self.trackers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for tracker, sub in zip(self.trackers, state["trackers"], strict=True):
            tracker.load_state_dict(sub)


def run_training(config: Any, readings: Sequence[str], *, rel_floor: float = 1e-10, block_samples: int | None = 8,
                 after: Callable[[Path], dict[str, Any]] | None = None,
                 power_iterations: int | None = None) -> tuple[dict[str, Any], Trajectory, dict]:
    """Train ``config`` (a headgeom.train.TrainConfig) with H_eff tracking under each reading (none:
    no tracker; ``config.track_every`` sets the period), or reuse the run of the same model in the
    trained-model store (module docstring).

    Returns (done.json of the run, its tracked steps read back from the run's metrics.jsonl
    (:func:`headgeom.tracking.read_tracking`, step 0 first), ``after(run_dir)`` evaluated on the run's
    folder, which it must only read (or {})). A run stopped by a non-finite loss returns done =
    {"diverged": message, "final_loss": None}, its tracked steps up to the stop, and {} (``after`` is not
    called). Either way done["train_budget"] = {"steps", "batch"}: the steps the run was given (its stop
    step) and the global batch, which the experiments put in their cells' metrics for the verdict's
    budget (headgeom.claims.budget). ``power_iterations`` also tracks the paper's float32 shifted-power
    λ_min estimate beside the exact one (GeometryTracker's option of that name).
    The training run's metrics.jsonl is the one record of the steps (written once by the loop); under
    the runner the run logs as ``headgeom reproduce --logger`` says (TrainConfig.logger; outside it,
    as ``config``)."""
    logger = current_train_logger()
    if logger is not None:
        config = dataclasses.replace(config, logger=logger)

    def tracker() -> Trackers | None:  # a fresh one per training session
        if not readings:
            return None
        return Trackers([GeometryTracker(every=1, reading=r, rel_floor=rel_floor, block_samples=block_samples,
                                         power_iterations=power_iterations) for r in readings], config.pseudo_collapse)

    store = current_store()
    if store is not None:
        tracking = ({"readings": list(readings), "rel_floor": rel_floor, "block_samples": block_samples,
                     "power_iterations": power_iterations} if readings else None)
        run_dir, done = stored_run(store, config, tracking, tracker)
        return _read_back(run_dir, done, config, after)
    with training_directory() as (run_dir, resume):
        done = _train_or_diverge(config, run_dir, resume, tracker())
        return _read_back(run_dir, done, config, after)


def _train_or_diverge(config: TrainConfig, run_dir: Path, resume: bool, tracker: Trackers | None) -> dict[str, Any]:
    """train() into ``run_dir`` (resumed when ``resume``; an attempt killed before its first checkpoint
    starts again from step 0); a diverged run is a result (e.g. lr 0.5 in the grid), not a crash."""
    try:
        return train(config, run_dir, resume_or_start=resume, tracker=tracker)
    except NonFiniteLossError as err:
        return {"diverged": str(err), "final_loss": None}


def _read_back(run_dir: Path, done: dict[str, Any], config: TrainConfig,
               after: Callable[[Path], dict[str, Any]] | None) -> tuple[dict[str, Any], Trajectory, dict]:
    """(done with its train_budget, the tracked steps, ``after(run_dir)`` unless the run diverged)."""
    planned = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    done = {**done, "train_budget": {"steps": int(planned["stop_step"]), "batch": int(config.batch_size)}}
    tracked = read_tracking(run_dir, strict=True)
    extra = after(run_dir) if after is not None and not done.get("diverged") else {}
    return done, tracked, extra


def stored_run(store: ModelStore, config: TrainConfig, tracking: dict[str, Any] | None,
               tracker: Callable[[], Trackers | None]) -> tuple[Path, dict[str, Any]]:
    """(the store's run folder of ``config`` with ``tracking``, its done dict): reused when finished, else
    trained under the key's lock, through every stop the plan needs of the trajectory below
    ``config.max_steps`` (each continued from the one before). The cell's trained.json records it."""
    form = config.to_dict()
    key = model_key(form, tracking)
    own = config.max_steps
    order = (lambda s: float("inf") if s is None else float(s))
    stops = sorted({s for s in planned_stops(lineage_key(form)) if order(s) < order(own)} | {own}, key=order)
    folder = store.folder(key, own)
    how = "reused"
    if not store.finished(folder):
        with store.hold(key, store.key_form(form, tracking)):
            for steps in stops:  # another process may have finished some meanwhile: each is checked under the lock
                how = _train_stop(store, key, dataclasses.replace(config, max_steps=steps), tracker)
    diverged = store.diverged(folder)
    done = ({"diverged": diverged, "final_loss": None} if diverged is not None
            else json.loads((folder / "done.json").read_text(encoding="utf-8")))
    cell = current_run_dir()
    record_trained_model({"key": key, "folder": os.path.relpath(folder, cell) if cell is not None else str(folder),
                          "max_steps": own, "how": how, "config": form, "tracking": tracking})
    return folder, done


def _train_stop(store: ModelStore, key: str, config: TrainConfig, tracker: Callable[[], Trackers | None]) -> str:
    """Make the stop folder of ``config.max_steps`` finished (the key's lock held); returns how: "reused"
    (finished already), "resumed" (a killed attempt), "continued from steps-N" or "trained"."""
    folder = store.folder(key, config.max_steps)
    if store.finished(folder):
        return "reused"
    how = "resumed"
    if not folder.exists():
        base = store.base(key, config.max_steps)
        how = "trained" if base is None else f"continued from {base.name}"
        if base is not None:
            store.continue_from(base, folder)
    done = _train_or_diverge(config, folder, folder.exists(), tracker())
    if done.get("diverged"):
        store.mark_diverged(folder, done["diverged"])
    return how

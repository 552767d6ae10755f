"""A training cell of the experiments (C8, the collapse grid, the activation ablation, C9, C11, C12).

It wires :func:`headgeom.train.train` and :class:`headgeom.tracking.GeometryTracker` into one
cell and reads the run's metrics.jsonl back as a typed trajectory
(:func:`headgeom.tracking.read_tracking`); the rules the verdicts apply to those trajectories
(negative-curvature fraction, collapse escape, dead head) are :mod:`headgeom.claims.training_verdicts`.

Where a cell trains: inside ``headgeom reproduce`` the run directory of the cell (the runner's
``<cell-key>/``) gets a ``train/`` sub-directory holding the ``headgeom train`` run (config.json,
metrics.jsonl, checkpoints), so a killed cell resumes its training and ``headgeom eval`` works on
it; outside the runner (tests, direct calls) it trains into a temporary directory that is removed.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from headgeom.runs.cell import current_run_dir, current_train_logger
from headgeom.tracking.record import combine
from headgeom.tracking.reference import reference_spread
from headgeom.tracking.tracker import GeometryTracker
from headgeom.tracking.trajectory import Trajectory, read_tracking

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


def run_training(config: Any, readings: Sequence[str], *, rel_floor: float = 1e-10, block_samples: int | None = 8,
                 after: Callable[[Path], dict[str, Any]] | None = None,
                 power_iterations: int | None = None) -> tuple[dict[str, Any], Trajectory, dict]:
    """Train ``config`` (a headgeom.train.TrainConfig) with H_eff tracking under each reading (none:
    no tracker; ``config.track_every`` sets the period).

    Returns (done.json of the run, its tracked steps read back from the run's metrics.jsonl
    (:func:`headgeom.tracking.read_tracking`, step 0 first), ``after(run_dir)`` evaluated while the
    run directory exists (or {})). A run stopped by a non-finite loss returns done = {"diverged":
    message, "final_loss": None}, its tracked steps up to the stop, and {} (``after`` is not called).
    Either way done["train_budget"] = {"steps", "batch"}: the steps the run was given (its stop step)
    and the global batch, which the experiments put in their cells' metrics for the verdict's budget
    (headgeom.claims.budget). ``power_iterations`` also tracks the paper's float32 shifted-power
    λ_min estimate beside the exact one (GeometryTracker's option of that name).
    The training run's metrics.jsonl is the one record of the steps (written once by the loop); under
    the runner the run logs as ``headgeom reproduce --logger`` says (TrainConfig.logger; outside it,
    as ``config``)."""
    logger = current_train_logger()
    if logger is not None:
        config = dataclasses.replace(config, logger=logger)
    trackers = [GeometryTracker(every=1, reading=r, rel_floor=rel_floor, block_samples=block_samples,
                                power_iterations=power_iterations) for r in readings]
    with training_directory() as (run_dir, resume):
        try:  # an attempt killed before its first checkpoint starts again from step 0
            done = train(config, run_dir, resume_or_start=resume,
                         tracker=Trackers(trackers, config.pseudo_collapse) if trackers else None)
        except NonFiniteLossError as err:  # a diverged run is a result (e.g. lr 0.5 in the grid), not a crash
            done = {"diverged": str(err), "final_loss": None}
        planned = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        done["train_budget"] = {"steps": int(planned["stop_step"]), "batch": int(config.batch_size)}
        tracked = read_tracking(run_dir, strict=True)
        extra = after(run_dir) if after is not None and not done.get("diverged") else {}
    return done, tracked, extra

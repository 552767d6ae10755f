"""What a cell of ``headgeom reproduce`` costs, in seconds: a prior from its config, calibrated by cell times.

The progress display (:mod:`headgeom.launch.progress`) weighs cells by this cost instead of counting
them, so C4's hundreds of sub-second cells no longer decide the estimate while C11's few cells train
for minutes. Everything here is a pure function of plain data (a cell's config as JSON); the
per-image FLOPs of a training cell's model come from :func:`headgeom.launch.flops.forward_flops`.

The prior (:func:`prior_seconds`), in seconds on one core of the 2-core reference machine:

- a training cell: ``steps × batch × views × 3 × forward FLOPs`` (forward and backward of each
  view) at :data:`TRAIN_FLOPS_PER_S`, plus the images it evaluates (``eval_train`` + ``eval_test``
  of the experiment's config: features and kNN) at :data:`EVAL_S_PER_IMAGE` and, where the config
  fits linear probes on them (it has ``probe_max_iter``), :data:`PROBE_S_PER_IMAGE` more, plus
  :data:`TRACK_S` per tracking point (``track_every``) and :data:`TRAINING_OVERHEAD_S` (data,
  model, checkpoints, the cell's other measurements);
- any other cell (theory, measurement): :data:`CELL_S`;
- a cell whose experiment declares ``Resources.expected_min`` for the preset (the paper preset's
  planning figure, on its GPU allocation): that figure.

The constants are rough fits to the quick preset's cell times of a full run on the 2-core machine
(``benchmarks/bench_progress.py`` replays one and prints true / prior per group); they order cells,
not predict them: the prior is within about 2× of the measured cell times of the quick training
experiments except C9's ViT-Tiny cells (about 6× longer than the prior: not its training steps, which
cost what the ResNet's do, but something in its measurements), and theory cells range from 0.02 s
(C4) to 1 s (C5).

Calibration (:func:`calibrate`) corrects the prior with recorded cell times: the cells finished in
this run and earlier runs in the same output folder (each ``done.json`` holds ``elapsed_s``). A cell's
estimate is its prior times the ratio (recorded seconds / prior seconds, summed) of the first level
that has records: its own group (experiment and backbone, e.g. ``C9/vit_tiny``), its experiment, its
kind (training or not), else 1.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from headgeom.launch.cells import DONE, read_json

__all__ = ["CELL_S", "EVAL_S_PER_IMAGE", "PROBE_S_PER_IMAGE", "TRACK_S", "TRAINING_OVERHEAD_S", "TRAIN_FLOPS_PER_S", "Calibration",
           "CellWork", "Record", "after_shared", "calibrate", "cell_work", "folder_records", "makespan", "prior_seconds",
           "training_steps"]

TRAIN_FLOPS_PER_S = 40e9
"""Training FLOPs per second of one core (quick ResNet-18 cells: C8, C9, ABLATION ran at 40-45 GFLOP/s)."""
EVAL_S_PER_IMAGE = 1e-3
"""Seconds per evaluated image: its features and the kNN vote (ABLATION's 1536 images: about 1 s)."""
PROBE_S_PER_IMAGE = 1e-2
"""Seconds per evaluated image when linear probes are fitted on them (C11, C12: about 30 s on 3072 images)."""
TRACK_S = 0.2
"""Seconds per tracking point of H_eff (C8 and ABLATION track 11 points in a cell of about 8 s)."""
TRAINING_OVERHEAD_S = 2.0
"""Seconds a training cell spends outside its steps (data, model, checkpoints, its own measurements)."""
CELL_S = 0.1
"""Seconds of a cell that trains nothing (theory cells: 0.02 s in C4 to about 1 s in C5)."""
DEFAULT_FLOPS = 20e6
"""Forward FLOPs per image when the model cannot be counted (a quick ResNet-18 at width 0.125: 18 MFLOP)."""
VIEWS = 2
"""Augmented views per image in a training step (every method of headgeom.methods trains on two)."""
DATASET_SIZE = {"cifar10": 50_000, "cifar100": 50_000}
"""Training images of the datasets whose size is not in the config (shapes: its ``n`` option)."""


@dataclass(frozen=True)
class CellWork:
    """What a cell does, in the numbers the prior reads.

    group: calibration group (``C9/vit_tiny`` for a training cell, the experiment id otherwise);
    samples: training image passes (steps × batch × views); flops: forward FLOPs of one image
    through the model; eval_images: images the cell evaluates; probe_images: those of them linear
    probes are fitted on; track_points: H_eff tracking
    points; declared_s: the experiment's own expected seconds per cell (None: not declared)."""

    experiment: str
    group: str
    training: bool
    samples: int = 0
    flops: float = 0.0
    eval_images: int = 0
    probe_images: int = 0
    track_points: int = 0
    declared_s: float | None = None

    @property
    def kind(self) -> str:
        return "training" if self.training else "other"


def dataset_size(train: Mapping[str, Any]) -> int | None:
    """Training images of the run's dataset (shapes: its ``n``; CIFAR: 50,000; else None)."""
    options = train.get("data_options") or {}
    if train.get("data") == "shapes":
        return int(options.get("n") or 0) or None
    return DATASET_SIZE.get(str(train.get("data")))


def training_steps(train: Mapping[str, Any]) -> int:
    """Optimiser steps of a run (a ``TrainConfig.to_dict()``): ``epochs × steps per epoch`` (last partial
    batch dropped), capped by ``max_steps``; ``max_steps`` alone when the dataset's size is unknown."""
    batch = max(1, int(train.get("batch_size") or 1))
    n = dataset_size(train)
    cap = train.get("max_steps")
    if n is None:
        return int(cap) if cap else int(train.get("epochs") or 1) * max(1, 50_000 // batch)
    steps = int(train.get("epochs") or 1) * max(1, n // batch)
    return min(steps, int(cap)) if cap else steps


def _eval_images(config: Mapping[str, Any], train: Mapping[str, Any]) -> int:
    """Images the cell evaluates: the experiment config's ``eval_train`` + ``eval_test`` (None: the
    whole training set, and as many again for the test split, an upper bound)."""
    total = 0
    for key in ("eval_train", "eval_test"):
        if key in config:
            total += int(config[key]) if config[key] is not None else (dataset_size(train) or 10_000)
    return total


def cell_work(experiment: str, config: Mapping[str, Any], train: Mapping[str, Any] | None,
              flops: Callable[[Mapping[str, Any]], float | None], declared_s: float | None = None) -> CellWork:
    """The :class:`CellWork` of one cell of ``experiment``: ``config`` is the experiment's config as JSON,
    ``train`` the cell's ``TrainConfig.to_dict()`` (None: a cell that trains nothing), ``flops`` counts a
    run's forward FLOPs per image (:func:`headgeom.launch.flops.forward_flops`)."""
    if train is None:
        return CellWork(experiment, experiment, False, declared_s=declared_s)
    steps = training_steps(train)
    evaluated = _eval_images(config, train)
    every = int(train.get("track_every") or 0)
    per_image = flops(train)
    return CellWork(experiment, f"{experiment}/{train.get('backbone')}", True,
                    samples=steps * int(train.get("batch_size") or 1) * VIEWS,
                    flops=float(per_image) if per_image else DEFAULT_FLOPS,
                    eval_images=evaluated, probe_images=evaluated if "probe_max_iter" in config else 0,
                    track_points=(steps // every + 1) if every else 0, declared_s=declared_s)


def after_shared(work: CellWork, train: Mapping[str, Any], trained_before: int) -> CellWork:
    """``work`` of a training cell whose run's first ``trained_before`` steps another cell trains (the run's
    trained-model store, headgeom.runs.store: a cell reusing a finished model trains none, one continuing a
    shorter stop trains the rest): its training samples and tracking points scaled to the steps it trains."""
    steps = training_steps(train)
    if not work.training or trained_before <= 0 or steps <= 0:
        return work
    share = max(0, steps - min(trained_before, steps)) / steps
    return dataclasses.replace(work, samples=round(work.samples * share), track_points=round(work.track_points * share))


def prior_seconds(work: CellWork) -> float:
    """The cell's seconds before any cell time is known (module docstring)."""
    if work.declared_s is not None:
        return float(work.declared_s)
    if not work.training:
        return CELL_S
    return (3 * work.samples * work.flops / TRAIN_FLOPS_PER_S + work.eval_images * EVAL_S_PER_IMAGE
            + work.probe_images * PROBE_S_PER_IMAGE + work.track_points * TRACK_S + TRAINING_OVERHEAD_S)


@dataclass(frozen=True)
class Record:
    """A cell time: the cell's work and the seconds it took."""

    work: CellWork
    seconds: float


@dataclass(frozen=True)
class Calibration:
    """Recorded seconds over prior seconds, summed, per group, experiment and kind (:func:`calibrate`)."""

    groups: Mapping[str, float]
    experiments: Mapping[str, float]
    kinds: Mapping[str, float]

    def factor(self, work: CellWork) -> float:
        """The ratio of the first level with records: group, experiment, kind; else 1."""
        for table, key in ((self.groups, work.group), (self.experiments, work.experiment), (self.kinds, work.kind)):
            if key in table:
                return table[key]
        return 1.0

    def seconds(self, work: CellWork) -> float:
        """The cell's calibrated estimate."""
        return prior_seconds(work) * self.factor(work)


def calibrate(records: Iterable[Record]) -> Calibration:
    """Ratios of recorded to prior seconds per group, experiment and kind (records with a time that is
    not finite and positive are left out)."""
    sums: dict[str, dict[str, list[float]]] = {"groups": {}, "experiments": {}, "kinds": {}}
    for r in records:
        if not (isinstance(r.seconds, (int, float)) and math.isfinite(r.seconds) and r.seconds > 0):
            continue
        prior = prior_seconds(r.work)
        for level, key in (("groups", r.work.group), ("experiments", r.work.experiment), ("kinds", r.work.kind)):
            acc = sums[level].setdefault(key, [0.0, 0.0])
            acc[0] += r.seconds
            acc[1] += prior
    ratios = {level: {k: s / p for k, (s, p) in table.items() if p > 0} for level, table in sums.items()}
    return Calibration(**ratios)


def makespan(pending: Iterable[float], running: Iterable[float], jobs: int) -> float:
    """Seconds until every cell is done when ``jobs`` workers take the ``pending`` cells (their seconds, in
    the order they are queued) as they free up, after the ``running`` cells' remaining seconds; the local
    launcher's process pool hands out cells in this order."""
    if jobs < 1:
        raise ValueError(f"makespan needs at least one worker; got jobs={jobs!r}")
    free = sorted(max(0.0, float(r)) for r in running)[:jobs]
    free += [0.0] * (jobs - len(free))
    heapq.heapify(free)
    end = max(free)
    for seconds in pending:
        start = heapq.heappop(free)
        heapq.heappush(free, start + max(0.0, float(seconds)))
        end = max(end, start + max(0.0, float(seconds)))
    return end


def folder_records(runs: Path, work_of: Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], CellWork | None]
                   ) -> dict[Path, Record]:
    """{cell directory: record} of every finished cell under ``runs`` (``OUT/runs/<ID>/<cell>/``): its
    ``done.json``'s ``elapsed_s``, and its work rebuilt by ``work_of(experiment id, its config.json, the
    training config of the model it used or None)`` (None: not known here, left out). Cells of earlier
    settings count too: the calibration compares each cell's time with its own prior."""
    found = {}
    for done in sorted(Path(runs).glob(f"*/*/{DONE}")):
        cell_dir = done.parent
        rec, conf = read_json(done), read_json(cell_dir / "config.json")
        if rec is None or conf is None or not isinstance(rec.get("elapsed_s"), (int, float)):
            continue
        train, before = _train_config_of(cell_dir)
        work = work_of(cell_dir.parent.name, conf, train if isinstance(train, dict) else None)
        if work is not None and isinstance(train, dict):
            work = after_shared(work, train, before)
        if work is not None:
            found[cell_dir] = Record(work, float(rec["elapsed_s"]))
    return found


def _train_config_of(cell_dir: Path) -> tuple[Any, int]:
    """(the TrainConfig as JSON of the model a finished cell used, the steps of it that other cells trained):
    the first model of its trained.json (the run's trained-model store: "reused", or "continued from
    steps-<n>"), else its own train/config.json (folders written before the store), else (None, 0)."""
    models = (read_json(cell_dir / "trained.json") or {}).get("models")
    if isinstance(models, list) and models and isinstance(models[0], dict):
        model = models[0]
        train, how = model.get("config"), str(model.get("how", ""))
        if how == "reused" and isinstance(train, dict):
            return train, training_steps(train)
        found = re.fullmatch(r"continued from steps-0*(\d+)", how)
        return train, int(found.group(1)) if found else 0
    return (read_json(cell_dir / "train" / "config.json") or {}).get("config"), 0

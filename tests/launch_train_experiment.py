"""A test experiment with one training cell that a test can stop at a chosen step, interrupt and resume.

Its module-level ``EXPERIMENT`` is what a new process imports (with tests/ on its PYTHONPATH);
tests register it and remove it afterwards. The cell trains a tiny SimSiam (ResNet-18 width
1/16, shapes n=40, batch 8) for ``steps`` updates with a checkpoint after every step, through
``training_directory`` like the real training experiments (``<cell>/train``, resumed when a
previous attempt started it).

The test synchronises with the cell through files in the output folder OUT (three levels above
the cell: OUT/runs/<ID>/<cell>), never through time: a :class:`Gate` tracker runs at every step
(after the step's update, before its checkpoint) and, while ``OUT/hold-at-<s>`` exists at step s,
writes ``OUT/held-at-<s>`` and waits for the hold file to go. A cell held at step s has its
checkpoint and metrics line of step s - 1 on disk and nothing of step s. Trackers run under a
forked RNG and return nothing here, so holding a step does not change the run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from headgeom.experiments.registry import Experiment, Summary
from headgeom.runs.cell import current_run_dir
from headgeom.runs.metrics import read_metrics
from headgeom.train import TrainConfig, train
from headgeom.train.cells import training_directory

ID = "LAUNCH_TRAIN"


@dataclass(frozen=True)
class Config:
    steps: int = 16


def train_config(config: Config) -> TrainConfig:
    return TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.0625},
                       head="d-16-16:relu:bn", predictor="d-8-16:relu", data="shapes", data_options={"n": 40},
                       epochs=4, batch_size=8, max_steps=config.steps, checkpoint_every=1, track_every=1,
                       probe_size=8, progress=False, device="cpu", seed=0)


def hold_file(out: Path, step: int) -> Path:
    """While this file exists, a cell under ``out`` that reaches ``step`` waits there."""
    return out / f"hold-at-{step}"


def held_file(out: Path, step: int) -> Path:
    """Written by a cell when it starts waiting at ``step``."""
    return out / f"held-at-{step}"


class Gate:
    """A tracker that holds the run at step s while ``hold_file(out, s)`` exists (``out`` None: never).

    It waits on the file's removal by the test (an event), polling its existence; how long that
    takes decides nothing."""

    def __init__(self, out: Path | None) -> None:
        self.out = out

    def __call__(self, step, method, probe_views) -> dict:
        if self.out is not None and hold_file(self.out, step).exists():
            held_file(self.out, step).touch()
            while hold_file(self.out, step).exists():
                time.sleep(0.05)
        return {}


def run_cell(config: Config, cell: dict) -> dict:
    cell_dir = current_run_dir()
    gate = Gate(cell_dir.parents[2] if cell_dir is not None else None)
    with training_directory() as (run_dir, resume):
        done = train(train_config(config), run_dir, resume_or_start=resume, tracker=gate)
        started = json.loads((run_dir / "config.json").read_text())
        logged = [r.step for r in read_metrics(run_dir, strict=True) if "loss" in r.values]
    return {"final_loss": done["final_loss"], "step": done["step"], "logged_steps": logged,
            "resumed_from_step": started["resumed_from_step"]}


def summarize(config: Config, results: list) -> Summary:
    return Summary(notes=[f"final loss {m['final_loss']}" for _, m in results])


EXPERIMENT = Experiment(
    id=ID, title="launcher test training", statement="a tiny run resumes exactly",
    presets={"quick": Config, "small": Config, "paper": Config},
    cells=lambda config, seeds: [{"run": 0}], run_cell=run_cell, summarize=summarize,
)

"""A test experiment with one training cell that can be interrupted and resumed.

Its module-level ``EXPERIMENT`` is what a new process imports (with tests/ on its PYTHONPATH);
tests register it and remove it afterwards. The cell trains a tiny SimSiam (ResNet-18 width
1/16, shapes n=40, batch 8) for ``steps`` updates with a checkpoint after every step, through
``training_directory`` like the real training experiments (``<cell>/train``, resumed when a
previous attempt started it). A tracker that only sleeps makes each step last at least
``step_sleep_s`` (1 s in the quick preset, 0 in the small one) so that a test can interrupt the
cell midway; trackers run under a forked RNG and return nothing here, so they do not change the run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from headgeom.experiments.registry import Experiment, Summary
from headgeom.train.cells import training_directory
from headgeom.runs.metrics import read_metrics
from headgeom.train import TrainConfig, train

ID = "LAUNCH_TRAIN"


@dataclass(frozen=True)
class Config:
    steps: int = 16
    step_sleep_s: float = 1.0


def train_config(config: Config) -> TrainConfig:
    return TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.0625},
                       head="d-16-16:relu:bn", predictor="d-8-16:relu", data="shapes", data_options={"n": 40},
                       epochs=4, batch_size=8, max_steps=config.steps, checkpoint_every=1, track_every=1,
                       probe_size=8, progress=False, device="cpu", seed=0)


class SleepTracker:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, step, method, probe_views) -> dict:
        time.sleep(self.seconds)
        return {}


def run_cell(config: Config, cell: dict) -> dict:
    with training_directory() as (run_dir, resume):
        done = train(train_config(config), run_dir, resume_or_start=resume, tracker=SleepTracker(config.step_sleep_s))
        started = json.loads((run_dir / "config.json").read_text())
        logged = [r.step for r in read_metrics(run_dir, strict=True) if "loss" in r.values]
    return {"final_loss": done["final_loss"], "step": done["step"], "logged_steps": logged,
            "resumed_from_step": started["resumed_from_step"]}


def summarize(config: Config, results: list) -> Summary:
    return Summary(notes=[f"final loss {m['final_loss']}" for _, m in results])


EXPERIMENT = Experiment(
    id=ID, title="launcher test training", statement="a tiny run resumes exactly",
    # small: the same training without the sleeps (the uninterrupted reference)
    presets={"quick": Config, "small": lambda: Config(step_sleep_s=0.0), "paper": Config},
    cells=lambda config, seeds: [{"run": 0}], run_cell=run_cell, summarize=summarize,
)

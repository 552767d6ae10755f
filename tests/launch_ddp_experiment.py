"""A test experiment whose one training cell is a 2-process DDP job (two SLURM tasks, CPU, gloo).

Its module-level ``EXPERIMENT`` is what a SLURM task imports (with tests/ on its PYTHONPATH); tests
register it and remove it afterwards. ``Resources(tasks=2)`` makes the cell one job of two tasks;
each task runs the cell, rank 0 through the runner's ``run_one_cell`` and rank 1 through
``follow_cell``, and the training inside joins one DDP job from SLURM's variables. For the test to
compare the ranks, each rank also saves its final weights to ``<cell>/rank<r>.pt`` (test only).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import torch

from headgeom.experiments.registry import Experiment, Summary
from headgeom.runs.cell import log_metrics
from headgeom.train.cells import training_directory
from headgeom.launch.resources import Resources
from headgeom.runs.metrics import read_metrics
from headgeom.train import TrainConfig, train
from headgeom.train.loop import build_method_from_config

ID = "LAUNCH_DDP"


@dataclass(frozen=True)
class Config:
    steps: int = 6


def train_config(config: Config) -> TrainConfig:
    return TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": 0.0625}, head="d-16-8:bn",
                       data="shapes", data_options={"n": 48, "size": 16}, epochs=2, batch_size=16,
                       max_steps=config.steps, optimizer="sgd", lr=0.1, progress=False, device="cpu", seed=0)


def run_cell(config: Config, cell: dict) -> dict:
    built = []

    def build(tc):
        built.append(build_method_from_config(tc))
        return built[-1]

    with training_directory() as (run_dir, resume):
        done = train(train_config(config), run_dir, resume=resume, build_method=build)
        rank = int(os.environ.get("SLURM_PROCID", "0"))
        torch.save({k: v.detach().clone() for k, v in built[0].state_dict().items()},
                   run_dir.parent / f"rank{rank}.pt")
        started = json.loads((run_dir / "config.json").read_text())
        logged = [r.step for r in read_metrics(run_dir, strict=True) if "loss" in r.values]
    log_metrics(0, {"processes": started["processes"]})  # every rank calls it; rank 0's line alone is written
    return {"final_loss": done["final_loss"], "step": done["step"], "processes": started["processes"],
            "logged_steps": logged}


def summarize(config: Config, results: list) -> Summary:
    return Summary(notes=[f"processes {m['processes']}" for _, m in results])


EXPERIMENT = Experiment(
    id=ID, title="launcher test: a 2-process DDP cell", statement="two tasks train one model",
    presets={"quick": Config, "small": Config, "paper": Config},
    cells=lambda config, seeds: [{"run": 0}], run_cell=run_cell, summarize=summarize,
    resources={"quick": Resources(cpus=2, tasks=2, time_min=15)},
)

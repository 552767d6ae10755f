"""A test experiment whose cells can run in other processes (local workers, SLURM jobs).

Its module-level ``EXPERIMENT`` is what a new process imports (with tests/ on its PYTHONPATH).
It is not registered on import: tests register it and remove it afterwards.

Cell {"seed": s}: v = 10 * (s + 1) (the tests' expected values are written from this formula),
plus the pid and torch thread count of the process that ran it. A cell fails while the output
folder OUT (three levels above the cell: OUT/runs/<ID>/<cell>) holds a file ``fail-seed-<s>``,
so a test can make one cell fail and then succeed without changing its config or cell key.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from headgeom.claims.robustness import sweep
from headgeom.claims.row import Row
from headgeom.claims.verdict import Verdict
from headgeom.experiments.registry import Experiment, Summary, measured
from headgeom.runs.cell import current_run_dir

ID = "LAUNCH_VALUES"


@dataclass(frozen=True)
class Config:
    seeds: int = 3
    sleep_s: float = 0.0


def run_cell(config: Config, cell: dict) -> dict:
    run_dir = current_run_dir()
    if run_dir is not None and (run_dir.parents[2] / f"fail-seed-{cell['seed']}").exists():
        raise RuntimeError(f"asked to fail at seed {cell['seed']}")
    time.sleep(config.sleep_s)
    return {"v": 10.0 * (cell["seed"] + 1), "pid": os.getpid(), "threads": torch.get_num_threads()}


def summarize(config: Config, results: list) -> Summary:
    vals = [m["v"] for _, m in results]

    def rule(floor: float) -> Verdict:  # its one convention, the floor v must clear (swept: a test row names it)
        return Verdict("supported" if vals and min(vals) > floor else "inconclusive", "v", f"min v against {floor:g}")

    claim = Row(id=ID, statement="v is positive", setting={"objective": "none", "head": "none"},
                measured={"v": measured(vals)}, verdict=rule(0.0).outcome, criterion="every v > 0", evidence="test",
                headline="v", conventions=("floor",), robustness={"floor": sweep(rule, 0.0, [0.0, 5.0])})
    return Summary(claims=[claim])


EXPERIMENT = Experiment(
    id=ID, title="launcher test values", statement="v is positive",
    presets={"quick": Config, "small": lambda: Config(sleep_s=1.0), "paper": Config},
    cells=lambda config, seeds: [{"seed": s} for s in range(seeds)],
    run_cell=run_cell, summarize=summarize,
)

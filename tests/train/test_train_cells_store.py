"""Train once, measure many: training cells of ``headgeom reproduce`` train into the run's trained-model
store (headgeom.runs.store) and share what coincides. Trainings are counted (train() sessions and the
steps they took, the store's folders), never timed."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary
from headgeom.runs.cell import running_cell
from headgeom.runs.store import lineage_key
from headgeom.train import TrainConfig
from headgeom.train import cells as cells_module
from headgeom.train.cells import run_training
from headgeom.train.checkpoint import load_checkpoint
from headgeom.train.loop import NonFiniteLossError

TINY = TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": 0.0625}, head="d-16-8",
                   data="shapes", data_options={"n": 32, "size": 16}, batch_size=8, epochs=3, device="cpu",
                   progress=False, seed=0)
SHARED = {"SHARE_A": 4, "SHARE_B": 2, "SHARE_C": 4}  # experiment: max_steps of its one cell, same model otherwise


@pytest.fixture
def sessions(monkeypatch):
    """Every train() session run_training starts: (max_steps, folder, steps it trained)."""
    seen = []
    real = cells_module.train

    def counting(config, out, **kwargs):
        done = real(config, out, **kwargs)
        seen.append((config.max_steps, Path(out), done["steps_this_session"]))
        return done
    monkeypatch.setattr(cells_module, "train", counting)
    return seen


@pytest.fixture
def shared_experiments():
    runner._load()
    for eid, steps in SHARED.items():
        def run_cell(config, cell, steps=steps):
            done, _, folder = run_training(dataclasses.replace(TINY, max_steps=steps), (), after=lambda d: {"folder": str(d)})
            return {"final_loss": done["final_loss"], **folder}
        EXPERIMENTS[eid] = Experiment(
            id=eid, title=eid, statement="-", presets={p: (lambda steps=steps: {"steps": steps}) for p in ("quick", "small", "paper")},
            cells=lambda config, seeds: [{"seed": 0}], run_cell=run_cell, summarize=lambda c, r: Summary(notes=["-"]),
            train_config=lambda config, cell, steps=steps: dataclasses.replace(TINY, max_steps=steps))
    yield
    for eid in SHARED:
        EXPERIMENTS.pop(eid, None)


def _cells(out: Path) -> dict[str, dict]:
    found = {}
    for eid in SHARED:
        (cell,) = (out / "runs" / eid).iterdir()
        (model,) = json.loads((cell / "trained.json").read_text())["models"]
        found[eid] = {"done": json.loads((cell / "done.json").read_text())["metrics"], "model": model,
                      "folder": (cell / model["folder"]).resolve()}
    return found


def _state(folder: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(folder / "checkpoints" / "last.pt")["method"]


def test_two_experiments_declaring_one_training_config_share_one_trained_run(shared_experiments, sessions, tmp_path):
    out = tmp_path / "o"
    runner.run_experiments(list(SHARED), "quick", out, progress=False)
    cells = _cells(out)
    # one trajectory, trained once: 0 -> 2 (the stop SHARE_B needs, on SHARE_A's way to 4), then 2 -> 4
    assert [(steps, n) for steps, _, n in sessions] == [(2, 2), (4, 2)]
    (key,) = [p for p in (out / "runs" / "trained").iterdir()]
    stops = sorted(p.name for p in key.iterdir() if p.is_dir())
    assert stops == ["steps-000002", "steps-000004"]
    started = [json.loads((key / s / "config.json").read_text())["resumed_from_step"] for s in stops]
    assert started == [None, 2]  # exactly one run trained from step 0
    assert cells["SHARE_A"]["model"]["how"] == "continued from steps-000002"
    assert cells["SHARE_B"]["model"]["how"] == cells["SHARE_C"]["model"]["how"] == "reused"
    assert cells["SHARE_A"]["folder"] == cells["SHARE_C"]["folder"] == key / "steps-000004"
    assert cells["SHARE_B"]["folder"] == key / "steps-000002"
    assert str(cells["SHARE_A"]["folder"]) == str(Path(cells["SHARE_A"]["done"]["folder"]).resolve())
    assert cells["SHARE_A"]["done"]["final_loss"] == cells["SHARE_C"]["done"]["final_loss"]

    sessions.clear()  # a rerun reuses every cell; new cells of the same model reuse the store
    again = runner.run_experiments(list(SHARED), "quick", out, progress=False)
    assert sessions == [] and all(e["n_reused"] == 1 for e in again["experiments"].values())


def test_a_stop_continued_from_a_shorter_one_is_the_uninterrupted_run(tmp_path):
    """Bit-identical on CPU: weights and every metrics line (tracked steps included: the trackers' state
    goes on across the stop), so a cell reading the shared run reads what its own run would hold."""
    config = dataclasses.replace(TINY, max_steps=5, track_every=2, probe_size=4)
    kept = {}

    def keep(name):
        def after(run_dir):
            kept[name] = {"state": _state(run_dir), "lines": (run_dir / "metrics.jsonl").read_text().splitlines()}
            return {}
        return after

    reading = dict(rel_floor=1e-10, block_samples=2)
    run_training(config, ("ambient",), after=keep("direct"), **reading)  # outside the runner: a temporary folder
    cell = tmp_path / "runs" / "X" / "cell"
    cell.mkdir(parents=True)
    with running_cell(cell, None, store=tmp_path / "runs" / "trained", stops={lineage_key(config.to_dict()): (3, 5)}):
        run_training(config, ("ambient",), after=keep("stored"), **reading)
    (model,) = json.loads((cell / "trained.json").read_text())["models"]
    assert model["how"] == "continued from steps-000003" and model["tracking"]["readings"] == ["ambient"]
    direct, stored = kept["direct"], kept["stored"]
    assert direct["lines"] == stored["lines"] and any("heff_ambient_mean_lambda_min" in x for x in direct["lines"])
    assert direct["state"].keys() == stored["state"].keys()
    assert all(torch.equal(direct["state"][k], stored["state"][k]) for k in direct["state"])


def test_a_diverged_run_is_a_result_the_store_keeps(tmp_path, monkeypatch):
    calls = []

    def diverging(config, out, **kwargs):
        calls.append(config.max_steps)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"stop_step": config.max_steps}))
        (out / "metrics.jsonl").write_text("")
        raise NonFiniteLossError("non-finite loss nan at step 1")
    monkeypatch.setattr(cells_module, "train", diverging)
    config = dataclasses.replace(TINY, max_steps=2)
    for name in ("one", "two"):
        cell = tmp_path / "runs" / "X" / name
        cell.mkdir(parents=True)
        with running_cell(cell, None, store=tmp_path / "runs" / "trained"):
            done, _, extra = run_training(config, (), after=lambda d: pytest.fail("after() of a diverged run"))
        assert done["diverged"] == "non-finite loss nan at step 1" and done["train_budget"]["steps"] == 2
    assert calls == [2]  # the second cell reads the stored divergence

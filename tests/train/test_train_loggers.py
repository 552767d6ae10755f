"""`headgeom train --logger tensorboard` (headgeom.train.loggers): the event files, read back with
TensorBoard's own reader, hold exactly the numbers of metrics.jsonl under their shared tags
(headgeom.tags; float32-rounded, at the same steps, each step once after a resume), the config as
text and the tracking figures as images; a missing tensorboard is one line before any work; and
`headgeom reproduce --logger` reaches the training run inside a cell."""
from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest

from headgeom.cli import main
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary
from headgeom.train.cells import run_training
from headgeom.train import TrainConfig
from headgeom.tags import tag
from headgeom.train.loggers import JsonlLogger, check_logger, open_loggers

pytest.importorskip("tensorboard", reason='TensorBoard logging needs the "tensorboard" extra: pip install -e ".[tensorboard]"')
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402 - optional extra

TINY = ("train --method simclr --backbone resnet18 --width 0.125 --head d-32-16 --data shapes "
        "--data-option n=32 --data-option size=16 --batch-size 8 --device cpu --quiet").split()
TRACKED = ["--track-every", "2", "--probe-size", "8", "--track-block-samples", "2"]


def jsonl_records(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def tensorboard_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), ...]} as TensorBoard shows them (earlier files purged by later ones)."""
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def expected_scalars(records: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """metrics.jsonl regrouped by the shared tag of each key, each value rounded to float32 as
    TensorBoard stores it."""
    out: dict[str, list[tuple[int, float]]] = {}
    for rec in records:
        for key, value in rec.items():
            if key != "step" and isinstance(value, (int, float)):
                out.setdefault(tag(key), []).append((rec["step"], float(np.float32(value))))
    return out


LAMBDA_MIN, LOSS = "headgeom/ambient/lambda_min", "train/loss"  # as docs/logging.md lists them


def test_tensorboard_scalars_are_the_metrics_and_a_resume_writes_each_step_once(tmp_path):
    run_dir = tmp_path / "run"
    assert main([*TINY, *TRACKED, "--max-steps", "2", "--logger", "tensorboard", "--out", str(run_dir)]) == 0
    assert json.loads((run_dir / "config.json").read_text())["config"]["logger"] == ["jsonl", "tensorboard"]
    got = tensorboard_scalars(run_dir / "tensorboard")
    want = expected_scalars(jsonl_records(run_dir))
    assert {LOSS, "train/lr", "train/epoch", LAMBDA_MIN, "headgeom/ambient/lambda_max",
            "train/grad_norm_head", "train/grad_norm_backbone", "headgeom/stats/rankme_z"} <= set(want)
    assert got == want
    assert [s for s, _ in got[LAMBDA_MIN]] == [0, 2] and [s for s, _ in got[LOSS]] == [1, 2]
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    figures = sorted((run_dir / "figures" / "tracking").glob("*.png"))
    assert figures and set(acc.Tags()["images"]) == {f"figures/tracking/{p.stem}" for p in figures}
    assert '"track_every": 2' in acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()

    # A kill after step 3 was logged but before its checkpoint: resume from the step-2 checkpoint.
    kept = tmp_path / "step2.pt"
    shutil.copy(run_dir / "checkpoints" / "last.pt", kept)
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "3"]) == 0
    shutil.copy(kept, run_dir / "checkpoints" / "last.pt")
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "4"]) == 0
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 3  # one file per session
    records = jsonl_records(run_dir)
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4]
    got = tensorboard_scalars(run_dir / "tensorboard")
    assert got == expected_scalars(records)  # step 3 once: the resumed session's file purged the older one
    assert [s for s, _ in got[LAMBDA_MIN]] == [0, 2, 4]


def test_resume_keeps_the_stored_logger_and_may_switch_it_on(tmp_path):
    run_dir = tmp_path / "run"
    assert main([*TINY, "--max-steps", "1", "--out", str(run_dir)]) == 0
    assert not (run_dir / "tensorboard").exists()  # jsonl, the default, writes no event files
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "2", "--logger", "tensorboard"]) == 0
    assert [s for s, _ in tensorboard_scalars(run_dir / "tensorboard")[LOSS]] == [2]  # from the resume on
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "3"]) == 0  # stored: tensorboard
    assert [s for s, _ in tensorboard_scalars(run_dir / "tensorboard")[LOSS]] == [2, 3]


def test_missing_tensorboard_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what an environment without the extra sees
    run_dir = tmp_path / "run"
    assert main([*TINY, "--max-steps", "1", "--logger", "tensorboard", "--out", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install -e ".[tensorboard]"' in err and "--logger tensorboard" in err
    assert not (run_dir / "config.json").exists() and not (run_dir / "metrics.jsonl").exists()
    out = tmp_path / "reproduce"
    assert main(["reproduce", "--only", "C8", "--logger", "tensorboard", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install -e ".[tensorboard]"' in err
    assert not (out / "runs").exists()


def test_jsonl_logger_writes_one_line_per_call_with_the_io_conventions(tmp_path):
    logger = JsonlLogger(tmp_path / "m.jsonl")
    logger.log(3, {"loss": 0.5, "a": float("nan"), "b": float("inf"), "c": -float("inf")})
    logger.close()
    line = (tmp_path / "m.jsonl").read_text()
    assert json.loads(line) == {"step": 3, "loss": 0.5, "a": None, "b": "inf", "c": "-inf"}
    with pytest.raises(ValueError, match="unknown logger 'comet' in --logger 'jsonl,comet'; choose from jsonl, "
                       "tensorboard, mlflow, wandb"):
        open_loggers("jsonl,comet", tmp_path, 0)
    with pytest.raises(ValueError, match="unknown logger 'comet'"):
        TrainConfig(method="simclr", logger="comet")


# ----------------------------------------------------------------------------- headgeom reproduce --logger
TB_CELL = "TB_CELL"


def _train_cell(config: TrainConfig, cell: dict) -> dict:
    done, _, _ = run_training(config, ())  # the path every training experiment takes
    return {"final_loss": done["final_loss"]}


@pytest.fixture
def training_experiment():
    runner._load()  # the real experiment modules first, so that none is imported mid-test
    tiny = TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": 0.125}, head="d-32-16",
                       data="shapes", data_options={"n": 32, "size": 16}, batch_size=8, max_steps=2,
                       device="cpu", progress=False)
    EXPERIMENTS[TB_CELL] = Experiment(
        id=TB_CELL, title="one training cell", statement="-",
        presets={p: (lambda: tiny) for p in ("quick", "small", "paper")},
        cells=lambda config, seeds: [{"seed": 0}], run_cell=_train_cell,
        summarize=lambda config, results: Summary(notes=["-"]))
    yield
    EXPERIMENTS.pop(TB_CELL, None)


def test_reproduce_logger_reaches_the_training_run_of_each_cell(training_experiment, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["reproduce", "--only", TB_CELL, "--logger", "tensorboard", "--out", str(out), "--quiet",
                 "--jobs", "1"]) == 0
    (cell,) = (out / "runs" / TB_CELL).iterdir()
    (model,) = json.loads((cell / "trained.json").read_text())["models"]
    train_dir = cell / model["folder"]  # the run in the trained-model store (headgeom.runs.store)
    assert json.loads((train_dir / "config.json").read_text())["config"]["logger"] == ["jsonl", "tensorboard"]
    assert tensorboard_scalars(train_dir / "tensorboard") == expected_scalars(jsonl_records(train_dir))
    assert "--logger jsonl,tensorboard" in json.loads((out / "results.json").read_text())["command"]
    # the logger is not part of the cell key: a jsonl rerun reuses the finished cell
    assert main(["reproduce", "--only", TB_CELL, "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    assert [p.name for p in (out / "runs" / TB_CELL).iterdir()] == [cell.name]
    assert "1 reused" in capsys.readouterr().out


def test_run_training_keeps_the_configs_logger_outside_the_runner(monkeypatch):
    seen = []

    def fake_train(config, run_dir, resume=False, tracker=None, **_):
        seen.append(config.logger)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "metrics.jsonl").write_text("")
        (run_dir / "config.json").write_text(json.dumps({"stop_step": 1}))  # what train() writes first
        return {"final_loss": 0.0}

    monkeypatch.setattr("headgeom.train.cells.train", fake_train)  # the name run_training calls
    run_training(TrainConfig(method="simclr", logger="tensorboard"), ())
    run_training(TrainConfig(method="simclr"), ())
    assert seen == [("jsonl", "tensorboard"), ("jsonl",)]


def test_logger_is_a_list_and_an_older_runs_single_name_still_loads():
    assert TrainConfig(method="simclr").logger == ("jsonl",)
    assert TrainConfig(method="simclr", logger="mlflow, tensorboard").logger == ("jsonl", "tensorboard", "mlflow")
    old = TrainConfig(method="simclr").to_dict() | {"logger": "tensorboard"}  # config.json before the list
    assert TrainConfig.from_dict(old).logger == ("jsonl", "tensorboard")
    assert TrainConfig.from_dict(TrainConfig(method="simclr", logger="wandb").to_dict()).logger == ("jsonl", "wandb")


def test_wandb_without_headgeoms_wandb_logger_is_one_clear_error(monkeypatch):
    pytest.importorskip("wandb", reason='the W&B logger needs the "wandb" extra: pip install -e ".[wandb]"')
    monkeypatch.setitem(sys.modules, "headgeom.train.wandb_logger", None)  # a headgeom without the module
    with pytest.raises(RuntimeError, match="this headgeom has no W&B logger"):
        check_logger("jsonl,wandb")

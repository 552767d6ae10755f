"""`headgeom train --logger jsonl,mlflow` (headgeom.train.mlflow_logger), read back through MLflow's
own client against the run folder's SQLite store: the resolved config as params, every
metrics.jsonl number under its shared tag (headgeom.tags) at its step with the same value (MLflow
stores float64), the tracking figures and the final checkpoint as artifacts; a resumed run
continues the same MLflow run, each step once. A missing mlflow, or an unknown logger name, is one
line and exit 2 before anything is written, for train, reproduce and theory alike."""
from __future__ import annotations

import json
import sys

import pytest

from headgeom.cli import main
from headgeom.tags import tag
from headgeom.train.loggers import check_logger, open_loggers

pytest.importorskip("mlflow", reason='MLflow logging needs the "mlflow" extra: pip install -e ".[mlflow]"')
from mlflow.tracking import MlflowClient  # noqa: E402 - optional extra

from headgeom.train.mlflow_logger import flatten_params  # noqa: E402 - imports mlflow

TINY = ("train --method simclr --backbone resnet18 --width 0.125 --head d-32-16 --data shapes "
        "--data-option n=32 --data-option size=16 --batch-size 8 --device cpu --quiet").split()
TRACKED = ["--track-every", "2", "--probe-size", "8", "--track-block-samples", "2"]


@pytest.fixture(autouse=True)
def default_store(monkeypatch):
    """The run folder's own store, whatever the environment says."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)


def expected(run_dir) -> dict[str, list[tuple[int, float]]]:
    """metrics.jsonl regrouped by shared tag: [(step, value)] in step order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)):
                out.setdefault(tag(key), []).append((record["step"], float(value)))
    return out


def logged(client: MlflowClient, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Every metric's full history in the MLflow run, as [(step, value)] in step order."""
    keys = client.get_run(run_id).data.metrics
    return {k: sorted((m.step, m.value) for m in client.get_metric_history(run_id, k)) for k in keys}


def test_mlflow_run_holds_params_metrics_figures_and_checkpoint_and_a_resume_continues_it(tmp_path):
    run_dir = tmp_path / "run"
    assert main([*TINY, *TRACKED, "--max-steps", "2", "--logger", "jsonl,mlflow", "--out", str(run_dir)]) == 0
    stored = json.loads((run_dir / "loggers.json").read_text())["mlflow"]
    assert stored["tracking_uri"] == f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=stored["tracking_uri"])
    (run,) = client.search_runs([client.get_experiment_by_name("headgeom").experiment_id])
    assert run.info.run_id == stored["run_id"] and run.info.status == "FINISHED"
    config = json.loads((run_dir / "config.json").read_text())["config"]
    params = run.data.params
    assert params["method"] == "simclr" and params["backbone_options.width"] == "0.125"
    assert params["max_steps"] == "2" and params["track_every"] == "2" and params["logger"] == "['jsonl', 'mlflow']"
    assert set(params) == set(flatten_params(config))

    want = expected(run_dir)
    assert {"train/loss", "train/lr", "headgeom/ambient/lambda_min", "headgeom/stats/rankme_z",
            "train/grad_norm_head"} <= set(want)
    assert logged(client, run.info.run_id) == want
    assert [s for s, _ in want["headgeom/ambient/lambda_min"]] == [0, 2]

    figures = sorted((run_dir / "figures" / "tracking").glob("*.png"))
    assert figures
    listed = client.list_artifacts(run.info.run_id, "figures/tracking")
    assert sorted((f.path, f.file_size) for f in listed) == [(f"figures/tracking/{p.name}", p.stat().st_size)
                                                              for p in figures]
    (checkpoint,) = client.list_artifacts(run.info.run_id, "checkpoints")
    assert checkpoint.path == "checkpoints/last.pt"
    assert checkpoint.file_size == (run_dir / "checkpoints" / "last.pt").stat().st_size
    assert (run_dir / "mlartifacts").is_dir()  # the run folder's store keeps its artifacts beside it

    # resumed: the same MLflow run, each step once, the final checkpoint replaced
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "4"]) == 0
    assert json.loads((run_dir / "loggers.json").read_text())["mlflow"] == stored
    (run,) = client.search_runs([run.info.experiment_id])
    assert run.info.run_id == stored["run_id"] and run.info.status == "FINISHED"
    assert run.data.params["max_steps"] == "2"  # MLflow params cannot change: the first session's
    history = logged(client, run.info.run_id)
    assert history == expected(run_dir)
    assert [s for s, _ in history["train/loss"]] == [1, 2, 3, 4]
    assert [s for s, _ in history["headgeom/ambient/lambda_min"]] == [0, 2, 4]
    (checkpoint,) = client.list_artifacts(run.info.run_id, "checkpoints")
    assert checkpoint.file_size == (run_dir / "checkpoints" / "last.pt").stat().st_size


def test_a_resumed_session_continues_the_stored_run_and_a_fresh_start_begins_a_new_one(tmp_path):
    loggers = open_loggers("mlflow", tmp_path, 0, params={"lr": 0.1, "options": {"n": 3}})
    (mlflow,) = loggers.others
    first = mlflow.run_id
    loggers.log(0, {"loss": 2.0, "heff_ambient_mean_lambda_min": -1.5, "note": "text"})
    loggers.close()
    client = MlflowClient(tracking_uri=mlflow.tracking_uri)
    resumed = open_loggers("jsonl,mlflow", tmp_path, 1, params={"lr": 0.2, "max_steps": 5})
    assert resumed.others[0].run_id == first
    assert client.get_run(first).info.status == "RUNNING"
    resumed.log(1, {"loss": 1.0})
    resumed.close()
    run = client.get_run(first)
    assert run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.1", "options.n": "3", "max_steps": "5"}  # the first value kept
    assert logged(client, first) == {"train/loss": [(0, 2.0), (1, 1.0)], "headgeom/ambient/lambda_min": [(0, -1.5)]}
    again = open_loggers("mlflow", tmp_path, 0)  # started again from step 0: a new MLflow run
    assert again.others[0].run_id != first
    again.close()
    assert json.loads((tmp_path / "loggers.json").read_text())["mlflow"]["run_id"] == again.others[0].run_id
    (tmp_path / "loggers.json").write_text("{not json")
    with pytest.raises(ValueError, match="loggers.json is not valid JSON"):
        open_loggers("mlflow", tmp_path, 1)


def test_after_a_hard_kill_each_step_is_recorded_once_whether_mlflow_holds_more_or_fewer(tmp_path):
    # more: a killed session logged steps 0..5, its last checkpoint was step 3, so the resumed run
    # keeps metrics.jsonl's steps 0..3 and trains 4, 5 again (bit for bit on CPU): MLflow skips them
    more, fewer = tmp_path / "more", tmp_path / "fewer"
    more.mkdir(), fewer.mkdir()
    killed = open_loggers("mlflow", more, 0)
    for step in range(6):
        killed.log(step, {"loss": float(step)})
    killed.close()
    lines = (more / "metrics.jsonl").read_text().splitlines()
    (more / "metrics.jsonl").write_text("\n".join(lines[:4]) + "\n")  # what the resume keeps
    resumed = open_loggers("mlflow", more, 4)
    assert resumed.others[0].first_step == 6
    for step in range(4, 8):
        resumed.log(step, {"loss": float(step)})
    resumed.close()
    client = MlflowClient(tracking_uri=resumed.others[0].tracking_uri)
    assert logged(client, resumed.others[0].run_id) == {"train/loss": [(s, float(s)) for s in range(8)]}

    # fewer: the run holds steps 0, 1 where metrics.jsonl holds 0..3: the resume replays 2 and 3
    killed = open_loggers("mlflow", fewer, 0)
    for step in range(4):
        killed.jsonl.log(step, {"loss": float(step), "heff_ambient_mean_lambda_min": "-inf" if step == 3 else -1.0})
        if step < 2:
            killed.others[0].log(step, {"train/loss": float(step)})
    resumed = open_loggers("mlflow", fewer, 4)  # killed: never closed
    assert resumed.others[0].first_step == 2
    resumed.log(4, {"loss": 4.0})
    resumed.close()
    history = logged(client := MlflowClient(tracking_uri=resumed.others[0].tracking_uri), resumed.others[0].run_id)
    (inf_step, minus_inf), *_ = history["headgeom/ambient/lambda_min"][1:]  # MLflow's SQL store keeps -inf as
    assert inf_step == 3 and minus_inf in (float("-inf"), -sys.float_info.max)  # -max float
    assert history == {"train/loss": [(s, float(s)) for s in range(5)],
                       "headgeom/ambient/lambda_min": [(2, -1.0), (3, minus_inf)]}
    assert client.get_run(resumed.others[0].run_id).info.status == "FINISHED"


def test_flatten_params():
    assert flatten_params({"a": {"b": 1, "c": {"d": None}}, "e": [1, 2], "f": {}, "g": "x"}) == {
        "a.b": "1", "a.c.d": "None", "e": "[1, 2]", "f": "{}", "g": "x"}


@pytest.mark.parametrize("command", [[*TINY, "--max-steps", "1"], ["reproduce", "--only", "C8", "--quiet"],
                                     ["theory", "--only", "C1", "--quiet"]])
@pytest.mark.parametrize("missing, logger", [("mlflow", "jsonl,mlflow"), ("sqlalchemy", "mlflow"),
                                             ("wandb", "tensorboard,wandb")])
def test_missing_package_is_one_line_naming_the_extra_before_anything_is_written(
        tmp_path, monkeypatch, capsys, command, missing, logger):
    monkeypatch.setitem(sys.modules, missing, None)  # what an environment without the extra sees
    out = tmp_path / "out"
    assert main([*command, "--logger", logger, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    extra = "wandb" if missing == "wandb" else "mlflow"
    assert err.count("\n") == 1 and f'pip install -e ".[{extra}]"' in err and f"--logger {extra}" in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("command", [[*TINY, "--max-steps", "1"], ["theory", "--only", "C1", "--quiet"]])
def test_unknown_logger_is_one_line_before_anything_is_written(tmp_path, capsys, command):
    out = tmp_path / "out"
    assert main([*command, "--logger", "jsonl,comet", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown logger 'comet'" in err and "jsonl, tensorboard, mlflow, wandb" in err
    assert not out.exists() or not any(out.iterdir())


def test_check_logger_names_the_sql_store_only_where_it_is_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    with pytest.raises(RuntimeError, match="needs the optional dependency sqlalchemy"):
        check_logger("mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://localhost:5000")  # a tracking server: no local store
    assert check_logger("mlflow") == ("jsonl", "mlflow")

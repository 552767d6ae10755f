"""`headgeom train --logger wandb` end to end (headgeom.train.loggers with
headgeom.train.wandb_logger): the offline W&B run, read back from its transaction logs
(tests/wandb_records.py), holds exactly the numbers of metrics.jsonl under the shared tags
(headgeom.tags; JSON doubles, so equal, not rounded), each step once after a resume, the config,
the tracking figures and the final checkpoint, in one W&B run whose id RUN/loggers.json keeps."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from headgeom.cli import main
from headgeom.train.loggers import open_loggers

pytest.importorskip("wandb", reason='W&B logging needs the "wandb" extra: pip install -e ".[wandb]"')
import wandb_records as records  # noqa: E402 - imports wandb

from headgeom.tags import tag  # noqa: E402

TINY = ("train --method simclr --backbone resnet18 --width 0.125 --head d-32-16 --data shapes "
        "--data-option n=32 --data-option size=16 --batch-size 8 --device cpu --quiet").split()
TRACKED = ["--track-every", "2", "--probe-size", "8", "--track-block-samples", "2"]
LAMBDA_MIN, LOSS = "headgeom/ambient/lambda_min", "train/loss"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for name in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_NAME", "WANDB_SILENT", "WANDB_CONSOLE", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB__DISABLE_STATS", "true")


def jsonl_rows(run_dir) -> dict[int, dict[str, float]]:
    """metrics.jsonl by step, each number under its shared tag."""
    rows: dict[int, dict[str, float]] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rows.setdefault(rec["step"], {}).update(
            {tag(k): v for k, v in rec.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)})
    return rows


def wandb_sessions(run_dir) -> tuple[str, list[list]]:
    run_id = json.loads((run_dir / "loggers.json").read_text())["wandb"]["run_id"]
    return run_id, [records.read_records(f) for f in records.run_files(run_dir / "wandb", run_id)]


def scalar_rows(sessions) -> list[tuple[int, dict]]:
    return [(step, {k: v for k, v in row.items() if not isinstance(v, dict)})
            for session in sessions for step, row in records.history(session)]


def test_wandb_holds_the_metrics_under_the_shared_tags_and_a_resume_writes_each_step_once(tmp_path):
    run_dir = tmp_path / "run"
    assert main([*TINY, *TRACKED, "--max-steps", "2", "--logger", "wandb", "--out", str(run_dir)]) == 0
    run_id, sessions = wandb_sessions(run_dir)
    assert len(sessions) == 1 and records.run_id(sessions[0]) == run_id
    want = jsonl_rows(run_dir)
    assert {LOSS, LAMBDA_MIN, "headgeom/stats/rankme_z"} <= {k for row in want.values() for k in row}
    assert [(s, {k: v for k, v in row.items() if v == v}) for s, row in scalar_rows(sessions)] == \
        [(s, {k: v for k, v in want[s].items() if v == v}) for s in sorted(want)]  # NaN != NaN: compared apart
    config = records.config(sessions[0])
    assert config["track_every"] == 2 and config["max_steps"] == 2

    figures = sorted((run_dir / "figures" / "tracking").glob("*.png"))
    images = {name: value for _, row in records.history(sessions[0])
              for name, value in row.items() if isinstance(value, dict)}
    assert figures and set(images) == {f"figures/tracking/{p.stem}" for p in figures}
    for p in figures:
        assert images[f"figures/tracking/{p.stem}"]["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
    (artifact,) = records.artifacts(sessions[0])
    (entry,) = artifact.manifest.contents
    last = run_dir / "checkpoints" / "last.pt"
    assert artifact.type == "model" and entry.path == "last.pt" and entry.size == last.stat().st_size

    # A kill after step 3 was logged but before its checkpoint: resume from the step-2 checkpoint.
    kept = tmp_path / "step2.pt"
    shutil.copy(run_dir / "checkpoints" / "last.pt", kept)
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "3"]) == 0
    shutil.copy(kept, run_dir / "checkpoints" / "last.pt")
    assert main(["train", "--out", str(run_dir), "--resume", "--max-steps", "4"]) == 0
    run_id_after, sessions = wandb_sessions(run_dir)
    assert run_id_after == run_id and len(sessions) == 3 and {records.run_id(s) for s in sessions} == {run_id}
    want = jsonl_rows(run_dir)
    got = scalar_rows(sessions)
    assert [s for s, _ in got] == sorted(want) == [0, 1, 2, 3, 4]  # step 3 once, from the killed session
    assert [(s, {k: v for k, v in row.items() if v == v}) for s, row in got] == \
        [(s, {k: v for k, v in want[s].items() if v == v}) for s in sorted(want)]  # CPU: bit-identical resume


def test_steps_a_killed_session_never_wrote_to_wandb_are_replayed_from_metrics_jsonl(tmp_path):
    # wandb writes its log in 32 KiB pieces, so a SIGKILL can lose steps metrics.jsonl holds: here
    # the W&B record stops at step 1 while metrics.jsonl (and the checkpoint) reached step 3
    killed = open_loggers("wandb", tmp_path, 0)
    for step in range(4):
        killed.jsonl.log(step, {"loss": float(step), "heff_ambient_mean_lambda_min": -float(step)})
        if step < 2:
            killed.others[0].log(step, {LOSS: float(step), LAMBDA_MIN: -float(step)})
    killed.close()
    resumed = open_loggers("jsonl,wandb", tmp_path, 4)
    assert resumed.others[0].first_step == 2
    resumed.log(4, {"loss": 4.0})
    resumed.close()
    _, sessions = wandb_sessions(tmp_path)
    assert scalar_rows(sessions) == [(s, {LOSS: float(s), LAMBDA_MIN: -float(s)}) for s in range(4)] + [(4, {LOSS: 4.0})]

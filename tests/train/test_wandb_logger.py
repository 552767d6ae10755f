"""headgeom.train.wandb_logger: a run and its resumed session, logged offline by WandbLogger and
read back from wandb's transaction logs (tests/wandb_records.py decodes them with the protobuf
definitions wandb ships): the scalars under the given names at their steps, each step once
across the sessions, the config, the images, the checkpoint artifacts, one run id. No network:
every run here is offline."""
from __future__ import annotations

import base64
import hashlib
import math
from pathlib import Path

import pytest
from PIL import Image

pytest.importorskip("wandb", reason='W&B logging needs the "wandb" extra: pip install -e ".[wandb]"')
import wandb_records as records  # noqa: E402 - imports wandb

from headgeom.io import atomic_write_bytes, json_safe  # noqa: E402
from headgeom.train.wandb_logger import WandbLogger, recorded_last_step  # noqa: E402

LAMBDA_MIN = "headgeom/ambient/lambda_min"
FIGURE = "headgeom/figures/lambda_min"
CONFIG = {"method": "simclr", "head": "d-32-16", "lr": 0.3, "max_steps": 8,
          "data_options": {"n": 32, "size": 16}, "out": Path("/runs/x"), "seeds": (0, 1)}


@pytest.fixture(autouse=True)
def wandb_env(tmp_path, monkeypatch):
    """wandb as a user who configured nothing, its own folders (config, cache, data) kept out of
    the home directory, and no system-metrics sampler (not needed here)."""
    for name in ("WANDB_MODE", "WANDB_PROJECT", "WANDB_NAME", "WANDB_SILENT", "WANDB_CONSOLE", "WANDB_DIR",
                 "WANDB_API_KEY", "WANDB_RUN_ID", "WANDB_RESUME"):
        monkeypatch.delenv(name, raising=False)
    for name, folder in (("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data")):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / folder))
    monkeypatch.setenv("WANDB__DISABLE_STATS", "true")


def png(path: Path, width: int, height: int, shade: int) -> Path:
    Image.new("RGB", (width, height), (shade, 255 - shade, 0)).save(path)
    return path


def lambda_min(step: int, session: int) -> float:
    return 0.5 + step / 16 + session / 1024  # which session logged a step shows in its value


def log_steps(logger: WandbLogger, steps: range, session: int) -> None:
    """Two calls per step, as the loop makes (loss, then the tracker's readings)."""
    for step in steps:
        logger.log(step, {"loss": 2.0 - step / 8, "lr": 0.3, "epoch": step // 4, "note": "text", "ok": True})
        logger.log(step, {LAMBDA_MIN: lambda_min(step, session)})


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def test_a_run_and_its_resumed_session_are_one_wandb_run_holding_each_step_once(tmp_path, capfd):
    run_dir = tmp_path / "run"
    ckpt = run_dir / "checkpoints" / "last.pt"
    first_ckpt = b"checkpoint at step 4"
    atomic_write_bytes(ckpt, first_ckpt)

    # session 1: steps 0-4, as if killed after the checkpoint of step 2 (it recorded steps 3 and 4)
    logger = WandbLogger(run_dir, first_step=0, run_id=None)
    run_id, first_dir = logger.run_id, logger.sync_dir
    assert logger.first_step == 0 and first_dir.parent == run_dir / "wandb" and first_dir.name.startswith("offline-run-")
    logger.log_params(CONFIG)
    log_steps(logger, range(0, 5), session=1)
    logger.log_figure(FIGURE, png(tmp_path / "a.png", 4, 3, 10))
    logger.log_artifact(ckpt)
    logger.close()
    logger.close()  # a second close does nothing

    # session 2 resumes from the checkpoint of step 2: first_step 3, but the run holds up to step 4
    atomic_write_bytes(ckpt, b"checkpoint at step 7, a new file")  # os.replace, as save_checkpoint does
    logger = WandbLogger(run_dir, first_step=3, run_id=run_id)
    assert logger.run_id == run_id and logger.first_step == 5 and logger.sync_dir != first_dir
    logger.log_params({**CONFIG, "max_steps": 12})
    log_steps(logger, range(3, 8), session=2)
    logger.log_figure(FIGURE, png(tmp_path / "b.png", 5, 2, 200))
    logger.log_artifact(ckpt)
    logger.close()

    files = records.run_files(run_dir / "wandb", run_id)
    assert [f.parent for f in files] == [first_dir, logger.sync_dir]
    sessions = [records.read_records(f) for f in files]
    assert [records.run_id(s) for s in sessions] == [run_id, run_id]
    assert {(records.run_record(s).project, records.run_record(s).display_name) for s in sessions} == {("headgeom", "run")}
    assert capfd.readouterr() == ("", "")  # wandb printed nothing

    # the scalars, under the names given, each step once and in order across the sessions
    rows = [(step, row, n) for n, session in enumerate(sessions, start=1) for step, row in records.history(session)]
    assert [step for step, _, _ in rows] == list(range(8))
    for step, row, session in rows:
        assert session == (1 if step <= 4 else 2)
        scalars = {name: value for name, value in row.items() if not isinstance(value, dict)}
        assert scalars == {"loss": 2.0 - step / 8, "lr": 0.3, "epoch": step // 4, LAMBDA_MIN: lambda_min(step, session)}

    # the config: the resolved one (as JSON), a resumed session's change on top
    assert records.config(sessions[0]) == json_safe(CONFIG)
    merged = {**records.config(sessions[0]), **records.config(sessions[1])}
    assert merged == {**json_safe(CONFIG), "max_steps": 12}

    # one image per session, at its last step, the PNG's bytes kept under the session's files/
    pngs = [tmp_path / "a.png", tmp_path / "b.png"]
    for session, sync_dir, source, size, step in zip(sessions, [first_dir, logger.sync_dir], pngs, [(4, 3), (5, 2)], [4, 7]):
        ((image_step, image),) = [(s, row[FIGURE]) for s, row in records.history(session) if FIGURE in row]
        assert image_step == step and image["_type"] == "image-file" and (image["width"], image["height"]) == size
        assert image["path"] in records.saved_files(session)
        stored = (sync_dir / "files" / image["path"]).read_bytes()
        assert image["sha256"] == hashlib.sha256(stored).hexdigest() == hashlib.sha256(source.read_bytes()).hexdigest()

    # the checkpoint of each session as a version of one "model" artifact, its bytes as logged
    for session, content in zip(sessions, [first_ckpt, ckpt.read_bytes()]):
        (artifact,) = records.artifacts(session)
        assert (artifact.type, artifact.name, artifact.run_id) == ("model", f"model-{run_id}", run_id)
        (entry,) = artifact.manifest.contents
        assert (entry.path, entry.size, entry.digest) == ("last.pt", len(content), md5_b64(content))
        assert Path(entry.local_path).read_bytes() == content  # what `wandb sync` uploads
        assert Path(entry.local_path).is_relative_to(run_dir / "wandb")


def test_a_resumed_session_starts_where_a_killed_sessions_log_ends(tmp_path):
    """A session killed before wandb-core wrote its last steps (simulated: its log cut after the
    record of step 2; a SIGKILL loses what wandb-core buffered) is resumed from the checkpoint of
    step 4: W&B lacks steps 3 and 4, so the logger takes them (a caller replays them from
    metrics.jsonl), drops step 2, and the run holds steps 0-7 once each."""
    run_dir = tmp_path / "run"
    logger = WandbLogger(run_dir, first_step=0)
    log_steps(logger, range(0, 6), session=1)
    logger.close()
    (path,) = records.run_files(run_dir / "wandb", logger.run_id)
    data = path.read_bytes()
    ends = [end for end, payload in records.record_spans(data) if _is_history(payload)]
    path.write_bytes(data[:ends[2]])

    resumed = WandbLogger(run_dir, first_step=5, run_id=logger.run_id)
    assert resumed.first_step == 3
    log_steps(resumed, range(2, 8), session=2)
    resumed.close()
    steps = [(step, row[LAMBDA_MIN]) for f in records.run_files(run_dir / "wandb", logger.run_id)
             for step, row in records.history(records.read_records(f))]
    assert steps == [(s, lambda_min(s, 1 if s <= 2 else 2)) for s in range(8)]

    # a run folder without the W&B logs (W&B knows nothing of the run here): the training's step
    elsewhere = WandbLogger(tmp_path / "copy", first_step=8, run_id=logger.run_id)
    assert elsewhere.first_step == 8
    elsewhere.close()


def _is_history(payload: bytes) -> bool:
    record = records.pb.Record()
    record.ParseFromString(payload)
    return record.WhichOneof("record_type") == "history"


def test_a_record_longer_than_a_block_is_read_back_whole(tmp_path):
    """A 100 kB config value is one record split over four 32 KiB blocks (FIRST, MIDDLE..., LAST);
    non-finite scalars stay what they were."""
    notes = "".join(chr(ord("a") + i % 26) for i in range(100_000))
    logger = WandbLogger(tmp_path / "run", first_step=0)
    logger.log_params({"notes": notes, "lr": 0.1})
    logger.log(0, {"loss": 1.5, "nan": float("nan"), "inf": float("inf"), "-inf": -float("inf")})
    logger.close()
    (path,) = records.run_files(tmp_path / "run" / "wandb", logger.run_id)
    assert max(len(p) for p in records.record_payloads(path.read_bytes())) > 3 * records.BLOCK
    session = records.read_records(path)
    assert records.config(session) == {"notes": notes, "lr": 0.1}
    ((step, row),) = records.history(session)
    assert step == 0 and row.pop("loss") == 1.5 and math.isnan(row.pop("nan"))
    assert row == {"inf": math.inf, "-inf": -math.inf}


def test_the_resume_scan_keeps_the_steps_before_a_torn_or_damaged_tail(tmp_path):
    """recorded_last_step on a transaction log cut at every record boundary (and one byte short
    of it), as a killed session leaves it, and on one with a damaged byte: the last step among
    the whole records before the cut or the damage."""
    logger = WandbLogger(tmp_path / "run", first_step=0)
    for step in range(6):
        logger.log(step, {"loss": 1.0 / (step + 1)})
    logger.close()
    (path,) = records.run_files(tmp_path / "run" / "wandb", logger.run_id)
    data = path.read_bytes()
    spans = records.record_spans(data)
    steps = []  # (end, step) of the history records
    for end, payload in spans:
        record = records.pb.Record()
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") == "history":
            steps.append((end, record.history.step.num))
    assert [step for _, step in steps] == list(range(6))

    cut_dir = tmp_path / "cut"
    (cut_dir / "session").mkdir(parents=True)
    cut_file = cut_dir / "session" / path.name
    for end, _ in spans:
        for cut in (end - 1, end):
            cut_file.write_bytes(data[:cut])
            whole = [step for step_end, step in steps if step_end <= cut]
            assert recorded_last_step(cut_dir, logger.run_id) == (max(whole) if whole else -1), cut

    (end_3, _), (end_4, _) = steps[2], steps[3]  # damage a byte inside the record of step 3
    damaged = bytearray(data)
    damaged[(end_3 + end_4) // 2] ^= 0xFF
    cut_file.write_bytes(bytes(damaged))
    assert recorded_last_step(cut_dir, logger.run_id) == 2
    assert recorded_last_step(cut_dir, "another-run") is None


def test_the_users_wandb_settings_win(tmp_path, monkeypatch):
    """WANDB_PROJECT and WANDB_NAME name the run; WANDB_MODE=disabled writes no run at all."""
    monkeypatch.setenv("WANDB_PROJECT", "my-project")
    monkeypatch.setenv("WANDB_NAME", "my-name")
    logger = WandbLogger(tmp_path / "named", first_step=0)
    logger.log(0, {"loss": 1.0})
    logger.close()
    (path,) = records.run_files(tmp_path / "named" / "wandb", logger.run_id)
    run = records.run_record(records.read_records(path))
    assert (run.project, run.display_name) == ("my-project", "my-name")

    monkeypatch.setenv("WANDB_MODE", "disabled")
    logger = WandbLogger(tmp_path / "disabled", first_step=0)
    assert isinstance(logger.run_id, str) and logger.run_id
    logger.log_params(CONFIG)
    logger.log(0, {"loss": 1.0})
    logger.log_figure(FIGURE, png(tmp_path / "a.png", 2, 2, 0))
    (tmp_path / "ckpt.pt").write_bytes(b"x")
    logger.log_artifact(tmp_path / "ckpt.pt")
    logger.close()
    assert not list((tmp_path / "disabled").rglob("*.wandb"))

"""How `headgeom train` starts in a folder (the table of headgeom.runs.folder), and the two bad
days it fixes through the real command: `--resume` before the first checkpoint (refused, metrics
untouched, unless --resume-or-start) and a run that failed on its first step (restarted in place
by the corrected command); `--overwrite` replaces a trained run."""
from __future__ import annotations

import json

import pytest

from headgeom.cli import main
from headgeom.runs.folder import claim_run_folder, inspect_run_folder, plan_start

TINY = ["--method", "simclr", "--backbone", "resnet18", "--width", "0.125", "--head", "d-16-8", "--data", "shapes",
        "--data-option", "n=32", "--data-option", "size=16", "--device", "cpu", "--quiet"]


def _folder(path, config=True, records=(), checkpoint=False):
    path.mkdir(parents=True)
    if config:
        (path / "config.json").write_text("{}")
    (path / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in records) + '{"step": 9')
    if checkpoint:
        (path / "checkpoints").mkdir()
        (path / "checkpoints" / "last.pt").write_bytes(b"x")
    return path


def test_the_start_table(tmp_path):
    missing = tmp_path / "missing"
    untrained = _folder(tmp_path / "untrained", records=[0])  # a step-0 tracking record is no training
    unsaved = _folder(tmp_path / "unsaved", records=[0, 1, 2])
    saved = _folder(tmp_path / "saved", records=[1, 2], checkpoint=True)
    assert inspect_run_folder(unsaved).trained_records == 2 and not inspect_run_folder(untrained).trained
    assert plan_start(missing).action == "start"
    assert plan_start(missing, resume_or_start=True).action == "start"
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        plan_start(missing, resume=True)
    start = plan_start(untrained)
    assert start.action == "restart" and "nothing was trained" in start.note
    with pytest.raises(ValueError, match="nothing to resume.*0 metrics record.*--resume-or-start"):
        plan_start(untrained, resume=True)
    with pytest.raises(FileExistsError, match="--resume to continue it, --overwrite to replace it"):
        plan_start(unsaved)
    with pytest.raises(ValueError, match="nothing to resume.*2 metrics record"):
        plan_start(unsaved, resume=True)
    start = plan_start(unsaved, resume=True, resume_or_start=True)
    assert start.action == "restart" and "2 metrics record(s) are discarded" in start.note
    with pytest.raises(FileExistsError):
        plan_start(saved)
    for flags in ({"resume": True}, {"resume_or_start": True}):
        assert plan_start(saved, **flags).from_checkpoint
    for folder in (missing, untrained, unsaved, saved):
        assert plan_start(folder, overwrite=True).action == "overwrite"
    with pytest.raises(ValueError, match="give one"):
        plan_start(saved, overwrite=True, resume=True)


def test_a_refused_claim_leaves_no_folder_behind_and_releases_the_lock(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        with claim_run_folder(tmp_path / "new", resume=True):
            pass
    assert not (tmp_path / "new").exists()
    unsaved = _folder(tmp_path / "unsaved", records=[1])
    with pytest.raises(FileExistsError):
        with claim_run_folder(unsaved):
            pass
    assert sorted(p.name for p in unsaved.iterdir()) == ["config.json", "metrics.jsonl"]  # kept, lock gone


def test_a_run_that_fails_before_writing_leaves_none_of_the_folders_it_created(tmp_path):
    out = tmp_path / "runs" / "a" / "run"
    with pytest.raises(RuntimeError, match="before anything was written"):
        with claim_run_folder(out) as start:
            assert start.action == "start" and out.is_dir()  # the lock created it (and runs/a/ above it)
            raise RuntimeError("failed before anything was written")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C while the data load, likewise
        with claim_run_folder(out):
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "runs").mkdir()
    with pytest.raises(RuntimeError):  # a failure after the run wrote a file keeps the folder and the file
        with claim_run_folder(out):
            (out / "config.json").write_text("{}")
            raise RuntimeError("failed after config.json")
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]
    (out / "config.json").unlink()
    with pytest.raises(RuntimeError):  # a folder that was there before is kept, empty
        with claim_run_folder(out):
            raise RuntimeError("failed")
    assert out.is_dir() and list(out.iterdir()) == []


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_resume_before_the_first_checkpoint_is_refused_and_keeps_the_metrics(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--batch-size", "8", "--max-steps", "2", "--out", str(out)]) == 0
    (out / "checkpoints" / "last.pt").unlink()  # as if killed before its first checkpoint
    (out / "done.json").unlink()
    before = (out / "metrics.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume"]) == 2
    line = _err_line(capsys)
    assert line.startswith("headgeom train: error: --resume: nothing to resume") and "--resume-or-start" in line
    assert (out / "metrics.jsonl").read_bytes() == before
    assert main(["train", "--out", str(out), "--resume-or-start", "--max-steps", "1"]) == 0
    assert "again from step 0" in capsys.readouterr().err
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1]


def test_a_run_that_failed_on_its_first_step_is_restarted_by_the_corrected_command(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, "--batch-size", "1", "--out", str(out)]) == 2  # SimCLR needs 2 samples
    assert "batch" in _err_line(capsys)
    assert (out / "config.json").exists() and not inspect_run_folder(out).trained
    assert main(["train", "--out", str(out), "--resume", "--batch-size", "8"]) == 2
    assert "nothing to resume" in _err_line(capsys)
    assert main(["train", *TINY, "--batch-size", "8", "--max-steps", "1", "--out", str(out)]) == 0
    assert "nothing was trained there" in capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["config"]["batch_size"] == 8
    # now a run was trained there: a fresh start is refused, --overwrite replaces it
    assert main(["train", *TINY, "--batch-size", "8", "--max-steps", "2", "--out", str(out)]) == 2
    assert "--overwrite" in _err_line(capsys)
    assert main(["train", *TINY, "--batch-size", "8", "--max-steps", "2", "--seed", "3", "--out", str(out),
                 "--overwrite"]) == 0
    assert "--overwrite: replaced the run" in capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["config"]["seed"] == 3
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing set aside is left

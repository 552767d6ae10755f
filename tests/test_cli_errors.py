"""The command line's error boundary: every command that writes (train, reproduce, theory, eval,
hessian --json, analyze, checkpoint --json) x every file-system failure (a read-only output, an
output under a regular file, a disk that fills up mid-write) ends in one line on stderr naming
the path and what to do, exit status 2, no traceback; the first two are refused before any work.
"""
from __future__ import annotations

import dataclasses
import errno
import io
import os
from pathlib import Path

import pytest

from headgeom.cli import main
from headgeom.commands import Command
from headgeom.commands.outputs import Output, OutputError, check_output, os_error_message
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary

pytestmark = pytest.mark.usefixtures("one_thread")

FAKE = "FAKE_CLI_ERRORS"
TINY_TRAIN = ["--method", "simclr", "--backbone", "resnet18", "--width", "0.125", "--head", "d-16-8",
              "--data", "shapes", "--data-option", "n=16", "--data-option", "size=16", "--batch-size", "8",
              "--max-steps", "1", "--device", "cpu", "--quiet"]


@dataclasses.dataclass(frozen=True)
class _FakeConfig:
    seeds: int = 1


@pytest.fixture
def fake_experiment():
    runner._load()  # the real experiment modules first, so that none is imported mid-test
    EXPERIMENTS[FAKE] = Experiment(
        id=FAKE, title="fake", statement="nothing", presets={p: _FakeConfig for p in ("quick", "small", "paper")},
        cells=lambda config, seeds: [{"seed": s} for s in range(seeds)],
        run_cell=lambda config, cell: {"v": 1.0}, summarize=lambda config, results: Summary())
    yield FAKE
    EXPERIMENTS.pop(FAKE, None)



# command -> argv writing to OUT (a folder or a file, per the command's vocabulary)
def _argv(command: str, out: Path, run: Path) -> list[str]:
    return {
        "train": ["train", *TINY_TRAIN, "--out", str(out)],
        "reproduce": ["reproduce", "--only", FAKE, "--quiet", "--out", str(out)],
        "theory": ["theory", "--only", "C7", "--quiet", "--out", str(out)],
        "eval": ["eval", str(run), "--k", "3", "--no-linear", "--no-rotation", "--device", "cpu", "--quiet",
                 "--json", str(out)],
        "hessian": ["hessian", "--head", "4-6-3:silu", "--objective", "mse", "--batch-size", "2", "--json", str(out)],
        "analyze": ["analyze", str(run), "--images", "2", "--steps", "2", "--families", "hue", "--boot", "10",
                    "--no-tangents", "--no-controls", "--device", "cpu", "--quiet", "--out", str(out)],
        "checkpoint": ["checkpoint", str(run), "--json", str(out)],
    }[command]


FOLDER_OUTPUTS = ("train", "reproduce", "theory", "analyze")
COMMANDS = ("train", "reproduce", "theory", "eval", "hessian", "analyze", "checkpoint")


def _target(command: str, parent: Path) -> Path:
    return parent / ("out" if command in FOLDER_OUTPUTS else "out.json")


def _one_line_error(command: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"headgeom {command}: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def no_work(monkeypatch):
    """Fails the test if a command's work starts (the output check must refuse first)."""
    def refuse(self, args):
        raise AssertionError(f"{self.target} ran although its output cannot be written")
    monkeypatch.setattr(Command, "__call__", refuse)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_read_only_output_is_refused_before_any_work(command, tmp_path, one_step_run, monkeypatch, capsys, no_work):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    real_access = os.access
    if os.geteuid() == 0:  # root writes anyway; report the folder as read-only, as a ro mount would
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == locked else real_access(p, mode))
    target = _target(command, locked / "sub")
    try:
        assert main(_argv(command, target, one_step_run)) == 2
    finally:
        locked.chmod(0o755)
    line = _one_line_error(command, capsys.readouterr().err)
    assert str(target) in line and "not writable" in line and ("--out" in line or "--json" in line)
    assert not (locked / "sub").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_under_a_regular_file_is_refused_before_any_work(command, tmp_path, one_step_run, capsys, no_work):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(_argv(command, _target(command, blocker / "sub"), one_step_run)) == 2
    line = _one_line_error(command, capsys.readouterr().err)
    assert str(blocker) in line and "regular file" in line
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("command", FOLDER_OUTPUTS)
def test_a_folder_output_that_is_a_file_is_refused(command, tmp_path, one_step_run, capsys, no_work):
    target = tmp_path / "out"
    target.write_text("x")
    assert main(_argv(command, target, one_step_run)) == 2
    assert "is a file, not a folder" in _one_line_error(command, capsys.readouterr().err)


class _FullDisk(io.RawIOBase):
    """A file whose every write fails as on a full disk (errno ENOSPC, no file name, like write(2))."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "theory"])
def test_a_disk_that_fills_up_is_one_line_naming_the_output(command, tmp_path, one_step_run, monkeypatch, capsys,
                                                            fake_experiment):
    """Every result file goes through headgeom.io's atomic writer (os.fdopen); make its writes fail."""
    real_fdopen = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode="r", *a, **kw:
                        _FullDisk(fd) if "w" in mode else real_fdopen(fd, mode, *a, **kw))
    target = _target(command, tmp_path / "results")
    assert main(_argv(command, target, one_step_run)) == 2
    line = _one_line_error(command, capsys.readouterr().err)
    assert "no space left" in line and str(target) in line
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers, leftovers


def test_the_output_check_itself(tmp_path):
    check_output(Output(tmp_path / "new" / "deeper", "dir", "--out"))  # created later, fine now
    check_output(Output(tmp_path / "r.json", "file", "--json"))
    with pytest.raises(OutputError, match="is a folder; give a file name"):
        check_output(Output(tmp_path, "file", "--json"))
    assert not (tmp_path / "new").exists()  # checking creates nothing


@pytest.mark.parametrize("code,words", [
    (errno.ENOSPC, "no space left"), (errno.EROFS, "read-only file system"), (errno.EACCES, "permission denied"),
    (errno.ENOTDIR, "regular file, not a folder"), (errno.EEXIST, "a file of that name exists")])
def test_os_errors_become_one_line_with_the_path(code, words):
    outs = [Output("o", "dir", "--out")]
    text = os_error_message(OSError(code, os.strerror(code), "/x/y"), outs)
    assert words in text and "/x/y" in text and "\n" not in text
    assert "under o" in os_error_message(OSError(code, os.strerror(code)), outs)  # no file name: the output
    assert os_error_message(FileNotFoundError("run directory r does not exist; pass ...")) == \
        "run directory r does not exist; pass ..."

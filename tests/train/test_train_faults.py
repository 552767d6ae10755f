"""Faults during `headgeom train`, each compared with an uninterrupted run of the same settings.

- SIGTERM / SIGINT mid-run: acknowledged at once from the handler (the step it will stop after),
  then a checkpoint of the last finished step, one line, exit 128 + signal; `--resume` ends
  bit-identical to the uninterrupted run, every metrics line once. The signal is sent while the run
  waits at a known step (tests/train_held_worker.py), or from inside a step (a method's
  on_step_end), never after a fixed time.
- a second Ctrl-C in the middle of a step: stops at once with one line naming the checkpoint it
  resumes from; the folder resumes to the uninterrupted run's end.
- a crash that cut the last line of metrics.jsonl: the resume drops it, says so in one line, and
  ends as the uninterrupted run.
- a disk that fills (a small tmpfs mounted here; skipped where mounting is not permitted) while a
  checkpoint or a metrics line is written: exit 2 with one line, the previous checkpoint intact and
  loadable, and once there is space again `--resume` ends as the uninterrupted run.

Every process trains on one thread (OMP_NUM_THREADS=1), so runs in different processes do the same
arithmetic.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import headgeom.train.cli as train_cli
import headgeom.train.loop as train_loop
from headgeom.cli import main
from headgeom.train import load_checkpoint
from headgeom.train.interrupt import StopSignals, _say_now

TESTS = Path(__file__).resolve().parents[1]
WORKER = TESTS / "train_held_worker.py"
TINY = ["--method", "simclr", "--backbone", "resnet18", "--width", "0.125", "--head", "d-16-8", "--data", "shapes",
        "--data-option", "n=32", "--data-option", "size=16", "--batch-size", "8", "--device", "cpu", "--quiet"]
EPOCHS = ["--epochs", "3"]  # 4 steps per epoch: 12 steps, a checkpoint at every epoch's end


def _env() -> dict[str, str]:
    src = str(TESTS.parent / "src")
    return {**os.environ, "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([src] + [p for p in [os.environ.get("PYTHONPATH")] if p])}


def _headgeom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "headgeom", *args], env=_env(), capture_output=True, text=True,
                          timeout=900)


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def assert_same_run(a: Path, b: Path, from_step: int = 0) -> None:
    """Same metrics lines from ``from_step`` on (every step once, equal floats) and bit-identical final state."""
    assert [r for r in _lines(a) if r["step"] >= from_step] == [r for r in _lines(b) if r["step"] >= from_step]
    ca, cb = load_checkpoint(a / "checkpoints" / "last.pt"), load_checkpoint(b / "checkpoints" / "last.pt")
    assert ca["step"] == cb["step"]
    for k, v in ca["method"].items():
        assert torch.equal(v, cb["method"][k]), k
    sa, sb = ca["optimizer"]["state"], cb["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for k in sa:
        for name, v in sa[k].items():
            assert torch.equal(v, sb[k][name]) if isinstance(v, torch.Tensor) else v == sb[k][name], (k, name)
    for k in ("data_generator", "aug_generator", "torch_rng"):
        assert torch.equal(ca[k], cb[k]), k


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run: 12 steps in one process."""
    run = tmp_path_factory.mktemp("reference") / "run"
    done = _headgeom("train", *TINY, *EPOCHS, "--out", str(run))
    assert done.returncode == 0, done.stderr
    assert [r["step"] for r in _lines(run)] == list(range(1, 13))
    return run


# ----------------------------------------------------------------------------- signals
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_run_checkpoints_the_last_step_and_resume_continues_exactly(signum, reference, tmp_path):
    run, held = tmp_path / "run", tmp_path / "held"
    # SIGINT as a terminal's foreground process has it, however pytest was started (a background job ignores it)
    proc = subprocess.Popen([sys.executable, str(WORKER), "6", str(held), "train", *TINY, *EPOCHS, "--out", str(run)],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while not held.exists():  # the run waits at step 6 (mid-epoch: no checkpoint of its own there)
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signal.Signals(signum).name
    what, again = ("Ctrl-C", "Ctrl-C again") if signum == signal.SIGINT else ("SIGTERM", "send SIGTERM again")
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err and err.splitlines() == [
        f"headgeom train: stopping after step 6 ({what}); {again} to stop now",  # from the handler, during step 6
        f"headgeom train: interrupted by {name}: stopped after step 6 of 12 with its checkpoint "
        f"{run / 'checkpoints' / 'last.pt'}; continue with: headgeom train --resume --out {run}"]
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == 6
    assert [r["step"] for r in _lines(run)] == list(range(1, 7)) and not (run / "done.json").exists()
    assert _lines(run) == _lines(reference)[:6]

    resumed = _headgeom("train", "--resume", "--out", str(run))
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr
    assert json.loads((run / "config.json").read_text())["resumed_from_step"] == 6
    assert_same_run(reference, run)


def test_stop_signals_ask_once_say_so_at_once_and_hand_a_second_signal_to_the_handler_before():
    seen, heard = [], []
    record = lambda signum, frame: seen.append(signum)  # noqa: E731
    before = signal.signal(signal.SIGTERM, record), signal.signal(signal.SIGINT, record)
    try:
        with StopSignals(say=heard.append) as stop:
            stop.starting(4)
            assert stop(4) is None
            signal.raise_signal(signal.SIGINT)  # while step 5 runs
            assert heard == ["headgeom train: stopping after step 5 (Ctrl-C); Ctrl-C again to stop now"]
            assert stop.received == signal.SIGINT and seen == []  # the first one is a request ...
            assert stop(5) == signal.SIGINT  # ... that the loop reads once step 5 is done
            signal.raise_signal(signal.SIGINT)
            assert seen == [signal.SIGINT] and len(heard) == 1  # the second reaches the handler that was there before
            assert signal.getsignal(signal.SIGTERM) is record  # and both are put back at once
        assert signal.getsignal(signal.SIGTERM) is record and signal.getsignal(signal.SIGINT) is record
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])


@pytest.mark.parametrize("finished,signum,said", [
    (None, signal.SIGTERM, "headgeom train: stopping after the first step (SIGTERM); send SIGTERM again to stop now"),
    (0, signal.SIGINT, "headgeom train: stopping after step 1 (Ctrl-C); Ctrl-C again to stop now"),
    (11, signal.SIGTERM, "headgeom train: stopping after step 12 (SIGTERM); send SIGTERM again to stop now"),
])
def test_the_acknowledgement_names_the_step_the_run_stops_after(finished, signum, said):
    # a signal while the session sets up, during step 1, or seen after step 11 was asked about (in its checkpoint)
    heard = []
    stop = StopSignals(say=heard.append)
    if finished is not None:
        stop.starting(finished)
    stop._handle(signum, None)  # the handler, called as Python calls it
    assert heard == [said] and stop(finished or 0) == signum


def test_the_acknowledgement_is_written_to_stderr_unbuffered(capfd):
    _say_now("headgeom train: stopping after step 3 (Ctrl-C); Ctrl-C again to stop now")
    assert capfd.readouterr().err == "headgeom train: stopping after step 3 (Ctrl-C); Ctrl-C again to stop now\n"


class SignalInStep:
    """``headgeom train``'s method, whose ``on_step_end`` (after the update of step ``at``, before its
    metrics line, counter and checkpoint) raises SIGINT ``times`` times and then reads stderr: the
    signal comes from inside the step, as a user's Ctrl-C does, at an exact point."""

    def __init__(self, monkeypatch, capfd, at: int, times: int) -> None:
        self.at, self.times, self.capfd, self.said_during_step = at, times, capfd, None
        real = train_loop.build_method_from_config

        def build(config):
            method = real(config)
            inner = method.on_step_end

            def on_step_end(step, total):
                inner(step, total)
                if step + 1 == self.at and self.said_during_step is None:
                    self.said_during_step = ""
                    for _ in range(self.times):
                        signal.raise_signal(signal.SIGINT)
                        self.said_during_step += capfd.readouterr().err
            method.on_step_end = on_step_end
            return method

        monkeypatch.setattr(train_loop, "build_method_from_config", build)


def test_ctrl_c_in_a_step_is_said_before_the_step_ends_and_stops_after_it(reference, tmp_path, capfd, monkeypatch):
    run = tmp_path / "run"
    step = SignalInStep(monkeypatch, capfd, at=6, times=1)
    with torch_one_thread(), default_sigint():
        code = main(["train", *TINY, *EPOCHS, "--out", str(run)])
    assert step.said_during_step == "headgeom train: stopping after step 6 (Ctrl-C); Ctrl-C again to stop now\n"
    assert code == 130 and _one_line(capfd.readouterr().err).startswith(
        "headgeom train: interrupted by SIGINT: stopped after step 6 of 12")
    assert load_checkpoint(run / "checkpoints" / "last.pt")["step"] == 6
    assert _lines(run) == _lines(reference)[:6]


def test_a_second_ctrl_c_mid_step_stops_at_once_and_leaves_a_folder_that_resumes(reference, tmp_path, capfd,
                                                                                  monkeypatch):
    run = tmp_path / "run"
    step = SignalInStep(monkeypatch, capfd, at=7, times=2)  # step 7 updated the parameters, wrote nothing yet
    with torch_one_thread(), default_sigint():
        code = main(["train", *TINY, *EPOCHS, "--out", str(run)])
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler from before, put back
    last = run / "checkpoints" / "last.pt"
    assert step.said_during_step == "headgeom train: stopping after step 7 (Ctrl-C); Ctrl-C again to stop now\n"
    assert code == 130 and _one_line(capfd.readouterr().err) == (
        f"headgeom train: stopped at once during step 7 (Ctrl-C again); its checkpoint of step 4 ({last}) is intact: "
        f"continue with: headgeom train --resume --out {run}")
    assert load_checkpoint(last)["step"] == 4 and sorted(p.name for p in last.parent.iterdir()) == ["last.pt"]
    assert [r["step"] for r in _lines(run)] == list(range(1, 7)) and not (run / "done.json").exists()

    monkeypatch.undo()
    with torch_one_thread():
        assert main(["train", "--resume", "--out", str(run)]) == 0
    assert capfd.readouterr().err == ""  # nothing to repair
    assert_same_run(reference, run)


class default_sigint:
    """Python's own SIGINT handler (KeyboardInterrupt) for the block, whatever pytest was started with."""

    def __enter__(self):
        self.before = signal.signal(signal.SIGINT, signal.default_int_handler)

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.before)


def test_a_signal_the_process_ignores_stays_ignored():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a background job of a script, or nohup
    try:
        with StopSignals() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
            assert stop(0) is None
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


# ----------------------------------------------------------------------------- a torn metrics line
def test_resume_repairs_a_half_written_last_metrics_line_and_says_so(reference, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run = tmp_path / "run"
    with torch_one_thread():
        assert main(["train", *TINY, *EPOCHS, "--max-steps", "4", "--out", str(run)]) == 0
    # as if killed while writing step 6's line: step 5's line is whole, step 6's cut in the middle, and
    # the last checkpoint is step 4's (checkpoints at epoch ends)
    whole = (reference / "metrics.jsonl").read_text().splitlines()
    with (run / "metrics.jsonl").open("a") as fh:
        fh.write(whole[4] + "\n" + whole[5][: len(whole[5]) // 2])
    capsys.readouterr()
    with torch_one_thread():
        assert main(["train", "--resume", "--max-steps", "12", "--out", str(run)]) == 0
    note = _one_line(capsys.readouterr().err)
    assert note == (f"note: {run / 'metrics.jsonl'} ended in a half-written line (the last session stopped while "
                    f"writing it); repaired: it holds the lines up to step 4, the checkpoint it resumes from")
    assert_same_run(reference, run)


class torch_one_thread:
    """The in-process runs on one thread, as the reference's process."""

    def __enter__(self):
        self.before = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.before)


# ----------------------------------------------------------------------------- a full disk
@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs mounted at tmp_path/disk for the test (10 checkpoints of this run fit)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({done.stderr.strip() or done.returncode}): the disk-full tests "
                    f"need root (CI runs as root)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def fill(disk: Path, leave_pages: int) -> Path:
    """Fill ``disk`` up, then free exactly ``leave_pages`` of its blocks; returns the filler file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for chunk in (1 << 20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * chunk)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
        page = os.statvfs(disk).f_bsize
        os.ftruncate(fd, os.fstat(fd).st_size - leave_pages * page)
    finally:
        os.close(fd)
    assert os.statvfs(disk).f_bavail == leave_pages
    return filler


class FillAt:
    """The tracker `headgeom train` builds (monkeypatched): at step ``step`` it waits for the previous
    checkpoint's writer thread, fills the disk leaving ``leave_pages`` free, and returns ``extra``
    (written into that step's metrics line); at other steps it measures nothing."""

    def __init__(self, disk: Path, step: int, leave_pages: int, extra: dict[str, float]) -> None:
        self.disk, self.step, self.leave_pages, self.extra = disk, step, leave_pages, extra

    def __call__(self, step, method, probe_views) -> dict[str, float]:
        if step != self.step:
            return {}
        for thread in threading.enumerate():
            if thread.name == "headgeom-checkpoint":
                thread.join()  # step - 1's checkpoint is whole on disk before the disk fills
        fill(self.disk, self.leave_pages)
        return self.extra


@pytest.mark.parametrize("what", ["checkpoint", "metrics"])
def test_a_disk_that_fills_keeps_the_previous_checkpoint_says_so_and_resumes_exactly(
        what, small_disk, tmp_path, capsys, monkeypatch):
    reference = tmp_path / "reference"
    with torch_one_thread():
        assert main(["train", *TINY, *EPOCHS, "--max-steps", "3", "--out", str(reference)]) == 0
    run = small_disk / "run"
    if what == "checkpoint":  # step 3's line fits in the two pages left, its checkpoint does not
        tracker = FillAt(small_disk, 3, leave_pages=2, extra={})
    else:  # step 3's line (over two pages) does not fit in the one page left: a torn line
        tracker = FillAt(small_disk, 3, leave_pages=1, extra={f"pad_{i:04d}": 0.0 for i in range(600)})
    monkeypatch.setattr(train_cli, "GeometryTracker", lambda **kwargs: tracker)
    capsys.readouterr()
    with torch_one_thread():
        code = main(["train", *TINY, *EPOCHS, "--max-steps", "3", "--checkpoint-every", "1", "--track-every", "1",
                     "--out", str(run)])
    assert code == 2
    last = run / "checkpoints" / "last.pt"
    written = last if what == "checkpoint" else run / "metrics.jsonl"
    assert _one_line(capsys.readouterr().err) == (
        f"headgeom train: error: no space left on the disk while writing {written}; the run stopped and its "
        f"checkpoint of step 2 ({last}) is intact: free some space, then continue with: headgeom train --resume "
        f"--out {run}")
    assert load_checkpoint(last)["step"] == 2  # intact and loadable
    assert sorted(p.name for p in last.parent.iterdir()) == ["last.pt"]  # no temporary file left
    assert not (run / "done.json").exists()
    torn = not (run / "metrics.jsonl").read_bytes().endswith(b"\n")
    assert torn == (what == "metrics")

    (small_disk / "filler").unlink()
    monkeypatch.setattr(train_cli, "GeometryTracker", None)  # not built: the resume tracks nothing
    with torch_one_thread():
        assert main(["train", "--resume", "--track-every", "0", "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert ("ended in a half-written line" in err) == torn
    assert _lines(run)[0] == {"step": 0}  # the (empty) tracking of step 0, which the reference did not track
    assert_same_run(reference, run, from_step=1)

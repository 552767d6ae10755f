"""The run-folder lock: one writer at a time, a second refused naming the first, a lock left by a
dead process taken over with a note, and two real `headgeom train` processes started together on
one --out leaving one consistent run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import headgeom.runs.lock as lock_module
from headgeom.cli import main
from headgeom.runs import LOCK_NAME, RunLock, RunLockedError

SRC = str(Path(__file__).resolve().parents[2] / "src")
TINY = ["--method", "simclr", "--backbone", "resnet18", "--width", "0.125", "--head", "d-16-8", "--data", "shapes",
        "--data-option", "n=32", "--data-option", "size=16", "--batch-size", "8", "--device", "cpu", "--quiet"]


def _python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_second_lock_is_refused_naming_the_holder_and_release_removes_the_file(tmp_path):
    folder = tmp_path / "run"
    with RunLock(folder):
        holder = json.loads((folder / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(RunLockedError, match=f"pid {os.getpid()} on host {socket.gethostname()}"):
            RunLock(folder).acquire()  # another open file description: flock refuses it too
    assert not (folder / LOCK_NAME).exists()
    notes = []
    with RunLock(folder, note=notes.append):  # free again, and nothing to take over
        pass
    assert notes == []


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_note(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": socket.gethostname(),
                                                "started": "2026-01-01T00:00:00+00:00", "command": "headgeom train"}))
    notes = []
    with RunLock(folder, note=notes.append):
        assert json.loads((folder / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert len(notes) == 1 and f"left by pid {pid} on host {socket.gethostname()}" in notes[0]
    assert "that process is gone" in notes[0]


def test_train_takes_over_the_lock_of_a_killed_run_with_a_note(tmp_path, capsys):
    out = tmp_path / "run"
    killed = _python("import sys, time; from headgeom.runs import RunLock\n"
                     "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)", str(out))
    assert killed.stdout.readline().strip() == "held"
    killed.kill()  # kill -9: no chance to remove its lock file
    killed.communicate()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == killed.pid
    assert main(["train", *TINY, "--max-steps", "1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"took over the lock of {out} left by pid {killed.pid}" in err and "that process is gone" in err
    assert (out / "done.json").exists() and not (out / LOCK_NAME).exists()


def test_emptying_a_locked_folder_is_one_rename_and_keeps_the_lock(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    with RunLock(folder) as lock:
        (folder / "checkpoints").mkdir()
        (folder / "checkpoints" / "last.pt").write_bytes(b"old")
        (folder / "config.json").write_text("{}")
        lock.empty_folder()
        assert sorted(p.name for p in folder.iterdir()) == [LOCK_NAME]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # the old contents are deleted
        with pytest.raises(RunLockedError):
            RunLock(folder).acquire()
        # a process that dies while deleting leaves the old run whole, set aside, never half of it in RUN
        (folder / "config.json").write_text("{}")
        import headgeom.runs.lock as lock_module
        monkeypatch.setattr(lock_module.shutil, "rmtree", lambda path: (_ for _ in ()).throw(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            lock.empty_folder()
    aside = [p for p in tmp_path.iterdir() if p.name != "run"]
    assert len(aside) == 1 and sorted(p.name for p in aside[0].iterdir()) == ["config.json"]
    assert sorted(p.name for p in folder.iterdir()) == []


def test_train_into_a_folder_another_process_writes_is_refused_in_one_line(tmp_path, capsys):
    out = tmp_path / "run"
    holder = _python("import sys; from headgeom.runs import RunLock\n"
                     "with RunLock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()",
                     str(out), stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["train", *TINY, "--max-steps", "1", "--out", str(out)]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith("headgeom train: error: ") and f"pid {holder.pid} on host" in line
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written
    finally:
        holder.communicate("")
    assert holder.returncode == 0


def test_a_refusal_between_the_holders_lock_and_its_name_waits_for_the_name(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    # a holder that has locked the file but not yet written its name (the window two writers started
    # together can land in); it writes its name when the test tells it to, once the refused writer
    # has read the empty file and is waiting (the wait's deadline is lifted: events decide, not time)
    holder = _python("import fcntl, json, os, sys\n"
                     "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); fcntl.flock(fd, fcntl.LOCK_EX)\n"
                     "print('locked', flush=True); sys.stdin.readline()\n"
                     "os.pwrite(fd, json.dumps({'pid': os.getpid(), 'host': 'h', 'started': 's', 'command': 'c'}).encode(), 0)\n"
                     "print('named', flush=True); sys.stdin.read()", str(folder / LOCK_NAME), stdin=subprocess.PIPE)
    reads = []

    def read_then_let_the_holder_name_itself(fd):
        found = real_read(fd)
        reads.append(found)
        if len(reads) == 1:  # the refusal saw the lock without a name: now the holder writes it
            holder.stdin.write("go\n")
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "named"
        return found

    real_read = lock_module._read
    monkeypatch.setattr(lock_module, "_read", read_then_let_the_holder_name_itself)
    monkeypatch.setattr(lock_module, "NAME_WAIT_S", 3600.0)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"pid {holder.pid} on host h"):
            RunLock(folder).acquire()
        assert reads[0] is None and reads[-1] is not None
    finally:
        holder.communicate("")


def test_a_refusal_names_no_holder_when_none_writes_its_name_in_time(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    holder = _python("import fcntl, os, sys\n"
                     "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644); fcntl.flock(fd, fcntl.LOCK_EX)\n"
                     "print('locked', flush=True); sys.stdin.read()", str(folder / LOCK_NAME), stdin=subprocess.PIPE)
    monkeypatch.setattr(lock_module, "NAME_WAIT_S", 0.0)  # one look at the file
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match="a process that has not written its name yet"):
            RunLock(folder).acquire()
    finally:
        holder.communicate("")


def test_two_train_processes_started_together_leave_one_consistent_run(tmp_path):
    out, gate = tmp_path / "run", tmp_path / "go"
    # both import everything first, then start at the same instant
    code = ("import sys, time, pathlib\nfrom headgeom.cli import main\nimport headgeom.train\n"
            "gate = pathlib.Path(sys.argv[1])\nprint('ready', flush=True)\n"
            "while not gate.exists(): time.sleep(0.002)\nsys.exit(main(sys.argv[2:]))")
    procs = [_python(code, str(gate), "train", *TINY, "--max-steps", "3", "--seed", str(seed), "--out", str(out))
             for seed in (0, 1)]
    assert [p.stdout.readline().strip() for p in procs] == ["ready", "ready"]
    gate.touch()
    results = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 2], results
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    line = _one_line(results[loser][1])
    # the loser names the winner, or finds its run; or, if the winner was descheduled between locking and
    # writing its name for longer than the loser waits for it (a loaded machine), says so
    assert (f"pid {procs[winner].pid} on host" in line or "already holds a run" in line
            or "a process that has not written its name yet" in line), line
    seed = winner  # the run folder is the winner's alone
    config = json.loads((out / "config.json").read_text())
    done = json.loads((out / "done.json").read_text())
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert config["config"]["seed"] == seed and [r["step"] for r in metrics] == [1, 2, 3]
    assert done["final_loss"] == metrics[-1]["loss"]
    assert not (out / LOCK_NAME).exists()

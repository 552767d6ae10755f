"""``--launcher slurm`` against a real SLURM (tools/local_slurm.sh start), and its install errors.

The cluster tests skip with the reason when submitit, sbatch or a SLURM controller is missing;
CI starts the local cluster, so they run there. Test experiments: tests/launch_values_experiment.py
(v = 10 * (seed + 1); a cell fails while OUT/fail-seed-<s> exists) and tests/launch_train_experiment.py
(one tiny training cell, a checkpoint every step, held at a step while a file the test makes exists).
"""
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import launch_ddp_experiment as ddp
import launch_train_experiment as training
import launch_values_experiment as values
from headgeom.cli import main
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS
from headgeom.launch.status import read_queue
from headgeom.runs.metrics import read_metrics
from headgeom.threads import torch_threads
from headgeom.train.checkpoint import load_checkpoint

TESTS = Path(__file__).resolve().parents[1]


def _no_cluster() -> str | None:
    try:
        importlib.import_module("submitit")
    except ImportError:
        return 'submitit is not installed: pip install -e ".[cluster]"'
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH: apt-get install -y slurm-wlm munge && tools/local_slurm.sh start"
    try:
        read_queue()
    except RuntimeError as err:
        return f"no SLURM controller answers ({err}): tools/local_slurm.sh start"
    return None


@pytest.fixture(scope="module")
def cluster():
    why = _no_cluster()
    if why is not None:
        pytest.skip(f"no SLURM cluster to test against: {why}")


@pytest.fixture
def test_experiments(cluster, monkeypatch):
    """The test experiments registered here, and tests/ on the jobs' PYTHONPATH (sbatch passes
    the environment on) so that a job can import their modules."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    runner._load()
    for exp in (values.EXPERIMENT, training.EXPERIMENT, ddp.EXPERIMENT):
        EXPERIMENTS[exp.id] = exp
    yield
    for exp in (values.EXPERIMENT, training.EXPERIMENT, ddp.EXPERIMENT):
        EXPERIMENTS.pop(exp.id, None)


def _slurm(out, *extra):
    return ["--out", str(out), "--quiet", "--launcher", "slurm", *extra]


def _cells(out, exp_id):
    return {json.loads((d / "config.json").read_text())["cell"].get("seed"): d
            for d in sorted((out / "runs" / exp_id).iterdir()) if (d / "config.json").exists()}


def _job(cell_dir):
    return json.loads((cell_dir / "slurm.json").read_text())["job_id"]


def _until(predicate, what, timeout=1800.0):
    """Wait for an event; the deadline only keeps a broken cluster from hanging the suite (it is far
    above any wait of a working one, however loaded the machine)."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; queue: {read_queue()}")
        time.sleep(0.2)


# ----------------------------------------------------------------------------- without a cluster
def test_missing_sbatch_is_one_line_naming_the_setup(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch there
    pytest.importorskip("submitit")
    assert main(["reproduce", "--only", "C2", *_slurm(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sbatch" in err and "tools/local_slurm.sh start" in err
    assert not (tmp_path / "runs").exists()


def test_missing_submitit_is_one_line_naming_the_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "headgeom.launch.slurm", raising=False)
    assert main(["reproduce", "--only", "C2", *_slurm(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "submitit" in err and 'pip install -e ".[cluster]"' in err


def test_slurm_options_need_the_slurm_launcher(tmp_path, capsys):
    assert main(["reproduce", "--only", "C2", "--out", str(tmp_path), "--partition", "gpu"]) == 2
    assert "--partition only apply to --launcher slurm" in capsys.readouterr().err
    assert main(["reproduce", "--only", "C2", "--out", str(tmp_path), "--launcher", "slurm", "--jobs", "2"]) == 2
    assert "--jobs applies to --launcher local" in capsys.readouterr().err


# ----------------------------------------------------------------------------- against SLURM
@pytest.mark.cluster
def test_slurm_gives_the_verdicts_and_values_of_the_local_launcher(cluster, tmp_path, capsys):
    only = ["reproduce", "--only", "C2,C7", "--preset", "quick", "--seeds", "1"]
    assert main([*only, "--out", str(tmp_path / "local"), "--quiet"]) == 0
    assert main([*only, *_slurm(tmp_path / "slurm", "--wait")]) == 0
    local = json.loads((tmp_path / "local" / "results.json").read_text())
    slurm = json.loads((tmp_path / "slurm" / "results.json").read_text())
    assert slurm["launcher"]["name"] == "slurm" and len(slurm["claims"]) == len(local["claims"]) >= 7
    for a, b in zip(local["claims"], slurm["claims"]):
        assert (a["id"], a["verdict"], a["setting"]) == (b["id"], b["verdict"], b["setting"])
        assert a["measured"].keys() == b["measured"].keys()
        for name, m in a["measured"].items():  # thread counts may differ on bigger machines: round-off only
            for k, v in m.items():
                w = b["measured"][name][k]
                assert (math.isclose(v, w, rel_tol=1e-9, abs_tol=1e-300) if isinstance(v, float) else v == w), \
                    (a["id"], name, k, v, w)
    for exp in ("C2", "C7"):
        for cell_dir in _cells(tmp_path / "slurm", exp).values():
            sub = json.loads((cell_dir / "slurm.json").read_text())
            assert Path(sub["stderr"]).is_file() and Path(sub["stderr"]).is_relative_to(tmp_path / "slurm" / "slurm")
    capsys.readouterr()
    assert main([*only, "--out", str(tmp_path / "slurm"), "--status"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "total: 14 done"


@pytest.mark.cluster
def test_a_failing_cell_is_reported_with_its_log_and_is_the_only_one_resubmitted(test_experiments, tmp_path, capsys):
    cmd = ["reproduce", "--only", values.ID, *_slurm(tmp_path)]
    (tmp_path / "fail-seed-1").touch()
    assert main(cmd) == 0  # submitted, not waited for
    assert "submitted 3 cells as SLURM job" in capsys.readouterr().out
    assert main(cmd + ["--wait"]) == 1  # nothing resubmitted (still queued or running), then the failure
    cells = _cells(tmp_path, values.ID)
    assert [(cells[s] / "done.json").exists() for s in range(3)] == [True, False, True]
    jobs = {s: _job(d) for s, d in cells.items()}
    capsys.readouterr()

    assert main(["reproduce", "--only", values.ID, "--out", str(tmp_path), "--status"]) == 0
    status = capsys.readouterr().out.splitlines()
    assert status[0] == f"{values.ID}: 3 cells: 2 done, 1 failed"
    (line,) = [s for s in status if s.lstrip().startswith("failed")]
    assert f"job {jobs[1]}" in line and "RuntimeError: asked to fail at seed 1" in line
    log = tmp_path / line.split("log: ")[1]
    assert log.is_file() and log.parent == tmp_path / "slurm" / values.ID

    done_before = {s: (cells[s] / "done.json").stat().st_mtime_ns for s in (0, 2)}
    (tmp_path / "fail-seed-1").unlink()
    assert main(cmd + ["--wait"]) == 0
    again = {s: _job(d) for s, d in _cells(tmp_path, values.ID).items()}
    assert again[0] == jobs[0] and again[2] == jobs[2] and again[1] != jobs[1]
    assert {s: (cells[s] / "done.json").stat().st_mtime_ns for s in (0, 2)} == done_before
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["experiments"][values.ID]["n_reused"] == 2 and res["claims"][0]["measured"]["v"]["value"] == 20.0


@pytest.mark.cluster
def test_an_interrupted_training_cell_resumes_from_its_checkpoint(test_experiments, tmp_path, capsys):
    """Preempted (submitit's USR2: checkpoint and requeue), then cancelled (scancel), then
    resubmitted by rerunning the command: the run ends as an uninterrupted one, each step once.
    The job is held at a step (tests/launch_train_experiment.py's hold files) whenever it is
    signalled, so where it stops does not depend on how fast the machine is."""
    cmd = ["reproduce", "--only", training.ID]
    with torch_threads(1):  # a SLURM job of one core runs one thread: the same arithmetic
        assert main([*cmd, "--out", str(tmp_path / "ref"), "--quiet", "--jobs", "1"]) == 0
    (ref,) = _cells(tmp_path / "ref", training.ID).values()
    reference = json.loads((ref / "done.json").read_text())["metrics"]
    assert reference["logged_steps"] == list(range(1, 17)) and reference["resumed_from_step"] is None

    out = tmp_path / "slurm"
    out.mkdir()
    training.hold_file(out, 3).touch()
    assert main([*cmd, *_slurm(out)]) == 0
    cell = next((out / "runs" / training.ID).iterdir())
    job = _job(cell)
    train_dir = cell / "train"

    def resumed():
        path = train_dir / "config.json"
        return json.loads(path.read_text()).get("resumed_from_step") if path.exists() else None

    _until(training.held_file(out, 3).exists, "the first attempt to hold at step 3")
    training.hold_file(out, 6).touch()  # where the requeued attempt will hold
    subprocess.run(["scancel", "--signal=USR2", job], check=True)  # what SLURM sends before a timeout
    _until(lambda: resumed() == 2, "the requeued job to resume from step 2, the last checkpoint")
    training.hold_file(out, 3).unlink()
    _until(training.held_file(out, 6).exists, "the requeued attempt to hold at step 6")
    # step 5's checkpoint is written on a thread while the cell holds: on disk before the SIGKILL
    _until(lambda: load_checkpoint(train_dir / "checkpoints" / "last.pt")["step"] == 5, "the checkpoint of step 5")
    subprocess.run(["scancel", job], check=True)  # SIGTERM (ignored by submitit), SIGKILL 5 s later
    _until(lambda: job not in read_queue(), "the cancelled job to leave the queue")
    capsys.readouterr()
    assert main([*cmd, "--out", str(out), "--status"]) == 0
    assert "left the queue without a result" in capsys.readouterr().out

    training.hold_file(out, 6).unlink()
    assert main([*cmd, *_slurm(out, "--wait")]) == 0
    assert _job(cell) != job
    final = json.loads((cell / "done.json").read_text())["metrics"]
    assert final["resumed_from_step"] == 5  # the last checkpoint before the hold at step 6
    assert final["logged_steps"] == reference["logged_steps"]
    assert final["final_loss"] == reference["final_loss"]


@pytest.mark.cluster
def test_a_cell_of_two_tasks_trains_one_model_and_is_written_once(test_experiments, tmp_path, capsys):
    """A cell whose resources ask for 2 tasks is one SLURM job of two tasks (CPU, gloo): rank 0
    writes the cell's files, rank 1 joins its training and writes nothing of the cell's."""
    out = tmp_path / "ddp"
    assert main(["reproduce", "--only", ddp.ID, *_slurm(out, "--wait")]) == 0
    (cell,) = _cells(out, ddp.ID).values()
    metrics = json.loads((cell / "done.json").read_text())["metrics"]
    assert metrics["processes"] == 2 and metrics["logged_steps"] == list(range(1, 7))
    ranks = [torch.load(cell / f"rank{r}.pt") for r in (0, 1)]
    for k, v in ranks[0].items():
        assert torch.equal(ranks[1][k], v), k
    # both ranks run the cell and call log_metrics; only rank 0's line is written
    assert [r.step for r in read_metrics(cell, strict=True)] == [0]
    assert json.loads((out / "results.json").read_text())["experiments"][ddp.ID]["n_failed"] == 0

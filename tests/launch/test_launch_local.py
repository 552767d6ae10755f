"""The local launcher: independent cells in worker processes, threads shared out, files as the truth.

Uses the test experiment of tests/launch_values_experiment.py (v = 10 * (seed + 1))."""
import dataclasses
import json
import os
import pickle

import pytest

import launch_values_experiment as values
from headgeom.experiments import runner
from headgeom.experiments.c2_curvature import EXPERIMENT as C2
from headgeom.experiments.registry import EXPERIMENTS
from headgeom.experiments.runner import cell_status, run_experiments
from headgeom.launch.local import LocalLauncher, usable_cores

ID = values.ID


@pytest.fixture
def registered():
    runner._load()
    EXPERIMENTS[ID] = values.EXPERIMENT
    yield values.EXPERIMENT
    EXPERIMENTS.pop(ID, None)


def _metrics(out):
    return {json.loads((d / "config.json").read_text())["cell"]["seed"]: json.loads((d / "done.json").read_text())["metrics"]
            for d in sorted((out / "runs" / ID).iterdir()) if (d / "done.json").exists()}


def test_cells_run_in_worker_processes_each_with_its_share_of_the_cores(registered, tmp_path):
    res = run_experiments([ID], out=tmp_path / "par", progress=False, launcher=LocalLauncher(jobs=2))
    assert res["n_failed"] == 0 and res["launcher"] == {"name": "local", "jobs": 2}
    par = _metrics(tmp_path / "par")
    assert {s: m["v"] for s, m in par.items()} == {0: 10.0, 1: 20.0, 2: 30.0}
    assert all(m["pid"] != os.getpid() for m in par.values())
    assert len({m["pid"] for m in par.values()}) <= 2
    assert {m["threads"] for m in par.values()} == {max(1, usable_cores() // 2)}

    seq = run_experiments([ID], out=tmp_path / "seq", progress=False, launcher=LocalLauncher(jobs=1))
    assert {m["pid"] for m in _metrics(tmp_path / "seq").values()} == {os.getpid()}
    assert seq["claims"] == res["claims"]

    again = run_experiments([ID], out=tmp_path / "par", progress=False, launcher=LocalLauncher(jobs=2))
    assert again["experiments"][ID]["n_reused"] == 3 and _metrics(tmp_path / "par") == par


def test_an_experiment_without_an_importable_address_runs_in_process(tmp_path):
    copy = dataclasses.replace(values.EXPERIMENT, id="LAUNCH_COPY")  # not the module's EXPERIMENT
    assert copy.address() is None and values.EXPERIMENT.address() == "launch_values_experiment"
    runner._load()
    EXPERIMENTS["LAUNCH_COPY"] = copy
    try:
        res = run_experiments(["LAUNCH_COPY"], out=tmp_path, progress=False, launcher=LocalLauncher(jobs=2))
    finally:
        EXPERIMENTS.pop("LAUNCH_COPY")
    assert res["n_failed"] == 0
    pids = {json.loads(p.read_text())["metrics"]["pid"] for p in (tmp_path / "runs" / "LAUNCH_COPY").glob("*/done.json")}
    assert pids == {os.getpid()}


def test_experiments_pickle_as_their_module_address():
    assert pickle.loads(pickle.dumps(C2)) is C2
    with pytest.raises(pickle.PicklingError, match="LAUNCH_COPY cannot be sent to another process"):
        pickle.dumps(dataclasses.replace(values.EXPERIMENT, id="LAUNCH_COPY"))


def test_a_failing_cell_is_reported_by_status_and_rerun_alone(registered, tmp_path, capsys):
    (tmp_path / "fail-seed-1").touch()
    res = run_experiments([ID], out=tmp_path, progress=False, launcher=LocalLauncher(jobs=1))
    assert res["n_failed"] == 1
    (failed,) = res["experiments"][ID]["failed_cells"]
    assert failed["cell"] == {"seed": 1} and "asked to fail at seed 1" in failed["error"]
    status = cell_status([ID], out=tmp_path).splitlines()
    assert status[0] == f"{ID}: 3 cells: 2 done, 1 failed"
    (line,) = [s for s in status if s.lstrip().startswith("failed")]
    assert "RuntimeError: asked to fail at seed 1" in line and f"log: runs/{ID}/seed=1-" in line
    assert line.endswith("error.json")
    done_before = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs" / ID).glob("*/done.json")}

    (tmp_path / "fail-seed-1").unlink()
    res = run_experiments([ID], out=tmp_path, progress=False, launcher=LocalLauncher(jobs=1))
    assert res["n_failed"] == 0 and res["experiments"][ID]["n_reused"] == 2
    assert all(p.stat().st_mtime_ns == t for p, t in done_before.items())
    assert cell_status([ID], out=tmp_path).splitlines()[0] == f"{ID}: 3 cells: 3 done"


def test_status_of_a_folder_never_run_lists_missing_cells(registered, tmp_path):
    lines = cell_status([ID], out=tmp_path).splitlines()
    assert lines[0] == f"{ID}: 3 cells: 3 missing" and lines[-1] == "total: 3 missing"
    assert [s.split()[0] for s in lines[1:4]] == ["missing"] * 3
    assert not (tmp_path / "runs").exists()


def test_jobs_must_be_positive():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="--jobs must be a positive integer"):
            LocalLauncher(bad)

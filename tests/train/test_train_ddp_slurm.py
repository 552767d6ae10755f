"""``headgeom train`` as a DDP job from SLURM's variables alone (no torchrun): 2 CPU processes, gloo.

First with the variables srun sets written by the test (no cluster needed), then through a real
``srun -n 2`` when a SLURM controller answers (tools/local_slurm.sh start). Either way the two ranks
end with the same weights, equal to the checkpoint rank 0 wrote, and the run is logged once: one
metrics line per step and one summary line on stdout (rank 1 prints nothing).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from headgeom.launch.resources import Resources
from headgeom.train import load_checkpoint
from headgeom.train.ddp import first_host, job_layout

TESTS = Path(__file__).resolve().parents[1]
WORKER = TESTS / "slurm_ddp_worker.py"
STEPS = 2 * (64 // 16)  # epochs × steps per epoch of slurm_ddp_worker.TRAIN


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    src = str(TESTS.parent / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def _check(run_dir: Path, weights: Path, stdouts: list[str]) -> None:
    ranks = [torch.load(weights / f"rank{r}.pt") for r in (0, 1)]
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert saved["step"] == STEPS
    for k, v in ranks[0].items():  # DDP keeps the replicas equal: bit for bit, not to round-off
        assert torch.equal(ranks[1][k], v), k
        assert torch.equal(saved["method"][k].cpu(), v), k
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if "loss" in r] == list(range(1, STEPS + 1))
    assert json.loads((run_dir / "config.json").read_text())["processes"] == 2
    said = [line for out in stdouts for line in out.splitlines() if line.startswith("headgeom train:")]
    assert len(said) == 1 and "complete" in said[0]


def test_two_processes_with_slurm_variables_train_one_model(tmp_path):
    run_dir, weights = tmp_path / "run", tmp_path / "weights"
    common = {"SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "localhost",
              "SLURM_JOB_ID": "4242", "MASTER_PORT": str(_free_port())}
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(run_dir), str(weights)],
                              env=_env({**common, "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r)}),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(err for _, err in outs)
    _check(run_dir, weights, [out for out, _ in outs])


def _no_cluster() -> str | None:
    if shutil.which("srun") is None or shutil.which("squeue") is None:
        return "srun is not on PATH"
    ok = subprocess.run(["squeue", "--noheader"], capture_output=True, text=True, timeout=60)
    return None if ok.returncode == 0 else f"squeue failed: {ok.stderr.strip()}"


@pytest.mark.cluster
def test_srun_two_tasks_train_one_model(tmp_path):
    why = _no_cluster()
    if why is not None:
        pytest.skip(f"no SLURM cluster to test against: {why}")
    run_dir, weights = tmp_path / "run", tmp_path / "weights"
    out = subprocess.run(["srun", "--ntasks=2", "--cpus-per-task=1", "--time=15", "--job-name=headgeom-ddp-test",
                          sys.executable, str(WORKER), str(run_dir), str(weights)],
                         env=_env({}), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    _check(run_dir, weights, [out.stdout])


@pytest.mark.parametrize("nodelist, host", [("vm", "vm"), ("gpu[03-05,07],cpu1", "gpu03"), ("n[1-2]", "n1"),
                                            ("a,b", "a"), ("host-01", "host-01"), ("x[007]", "x007")])
def test_first_host_of_a_slurm_node_list(nodelist, host):
    assert first_host(nodelist) == host


def test_job_layout_reads_torchrun_then_a_slurm_step():
    step = {"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_LOCALID": "1", "SLURM_STEP_NODELIST": "g[2-3]",
            "SLURM_JOB_ID": "123"}
    assert job_layout(step) == {"rank": 3, "world": 4, "local_rank": 1, "master_addr": "g2", "master_port": "20123"}
    assert job_layout({**step, "MASTER_ADDR": "h", "MASTER_PORT": "999"}) == {
        "rank": 3, "world": 4, "local_rank": 1, "master_addr": "h", "master_port": "999"}
    torchrun = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "t", "MASTER_PORT": "1"}
    assert job_layout({**step, **torchrun})["world"] == 2  # torchrun's variables win
    # a batch script has SLURM_NTASKS and SLURM_PROCID=0 but is no job step: one process
    assert job_layout({"SLURM_NTASKS": "2", "SLURM_PROCID": "0", "SLURM_NODELIST": "vm"}) is None
    assert job_layout({"WORLD_SIZE": "1", "RANK": "0"}) is None and job_layout({}) is None
    assert job_layout({"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2"})["master_addr"] == ""  # init says what to set


def test_a_cell_of_several_gpus_gets_one_task_per_gpu():
    slurm = pytest.importorskip("headgeom.launch.slurm", reason="submitit is not installed")
    params = slurm.sbatch_parameters(Resources(gpus=4, cpus=16), "x")
    assert (params["ntasks_per_node"], params["gpus_per_node"], params["cpus_per_task"]) == (4, 4, 4)
    assert slurm.sbatch_parameters(Resources(cpus=2, tasks=2), "x")["ntasks_per_node"] == 2
    assert Resources(gpus=0).processes == 1 and Resources(gpus=2, tasks=1).processes == 1

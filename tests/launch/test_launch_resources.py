"""Cell resources and their command-line overrides (expected minutes computed by hand)."""
import pytest

from headgeom.launch.resources import Resources, parse_option, parse_time, with_overrides


@pytest.mark.parametrize("text, minutes", [
    ("90", 90), ("45:30", 46), ("1:30:00", 90), ("0:00:59", 1), ("2-00:00:00", 2880), ("1-2", 1560),
    ("1-2:30", 1590), ("1-0:0:1", 1441),
])
def test_parse_time_reads_slurm_formats(text, minutes):
    assert parse_time(text) == minutes


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "0", "0:00", "-5", "1h", "1--2"])
def test_parse_time_rejects_other_text(text):
    with pytest.raises(ValueError, match="SLURM time|zero"):
        parse_time(text)


def test_parse_option_and_its_errors():
    assert parse_option("constraint=a100") == ("constraint", "a100")
    assert parse_option("--qos=high") == ("qos", "high")
    assert parse_option("mail-type=END,FAIL") == ("mail-type", "END,FAIL")
    for bad in ("novalue", "=x", "bad key=1"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_option(bad)


def test_overrides_replace_only_what_is_given():
    base = Resources(gpus=1, cpus=8, mem_gb=32, time_min=600, options=(("qos", "low"),))
    assert with_overrides(base) == base
    res = with_overrides(base, partition="gpu", account="lab", gpus=2, time="1-00:00:00",
                         options=["qos=high", "constraint=a100"])
    assert res == Resources(gpus=2, cpus=8, mem_gb=32, time_min=1440, partition="gpu", account="lab",
                            options=(("qos", "high"), ("constraint", "a100")))
    assert with_overrides(base, gpus=0).gpus == 0


@pytest.mark.parametrize("kw", [{"cpus": 0}, {"gpus": -1}, {"time_min": 0}, {"mem_gb": 0}, {"cpus": 1.5},
                                {"gpus": True}])
def test_resources_reject_impossible_values(kw):
    with pytest.raises(ValueError, match="Resources"):
        Resources(**kw)


def test_sbatch_parameters_map_resources_to_submitit():
    slurm = pytest.importorskip("headgeom.launch.slurm", reason="submitit is not installed")
    params = slurm.sbatch_parameters(Resources(gpus=2, cpus=4, mem_gb=1.5, time_min=30, partition="p", account="a",
                                               options=(("qos", "high"),)), "headgeom-C8")
    # 2 GPUs: 2 tasks (DDP ranks), the 4 cores shared out
    assert params == {"job_name": "headgeom-C8", "time": 30, "nodes": 1, "ntasks_per_node": 2, "cpus_per_task": 2,
                      "gpus_per_node": 2, "mem": "1536M", "partition": "p", "account": "a",
                      "additional_parameters": {"qos": "high"}}
    assert slurm.sbatch_parameters(Resources(), "x") == {"job_name": "x", "time": 60, "nodes": 1,
                                                        "ntasks_per_node": 1, "cpus_per_task": 1}


def test_every_experiment_declares_its_paper_resources():
    from headgeom.experiments.registry import load_all

    missing = [e.id for e in load_all().values() if "paper" not in e.resources]
    assert not missing, f"experiments without paper-preset resources: {missing}"


def test_paper_resources_reach_the_sbatch_script_and_overrides_replace_them(tmp_path, monkeypatch):
    slurm = pytest.importorskip("headgeom.launch.slurm", reason="submitit is not installed")
    from headgeom.experiments import c8_hessian_tracking as c8
    from headgeom.experiments.runner import cell_tasks, plan_experiments

    monkeypatch.setattr(slurm.shutil, "which", lambda name: f"/usr/bin/{name}")  # no cluster needed
    monkeypatch.setattr(slurm.submitit.SlurmExecutor, "_submit_command",
                        lambda *a, **k: pytest.fail("the test must not submit"))
    plan, _ = plan_experiments(["C8"], "paper", None)
    tasks = cell_tasks(plan, tmp_path, "paper", {})
    declared = c8.RESOURCES["paper"]
    assert declared.gpus == 1 and all(t.resources == declared for t in tasks)

    def script(**overrides):
        launcher = slurm.SlurmLauncher(tmp_path / "slurm", **overrides)
        executor = launcher.executor("C8", launcher.resources(tasks[0]))
        return executor._make_submission_file_text("python -m x", "uid").splitlines()

    lines = script()
    for line in ("#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32768M",
                 "#SBATCH --time=120"):
        assert line in lines
    assert not any("--partition" in l or "--qos" in l for l in lines)
    lines = script(partition="gpu", gpus=0, time="0:30:00", options=["qos=high"])
    for line in ("#SBATCH --partition=gpu", "#SBATCH --time=30", "#SBATCH --qos=high", "#SBATCH --cpus-per-task=8",
                 "#SBATCH --mem=32768M"):
        assert line in lines
    assert not any("gpus" in l for l in lines)

"""``headgeom reproduce --dry-run``: cells, settings against the paper, resources and GPU-hours; runs,
writes and submits nothing."""
import subprocess

import pytest

from headgeom.cli import main
from headgeom.experiments.registry import load_all, protocols
from headgeom.launch.dry_run import cost
from headgeom.launch.resources import Resources


@pytest.fixture
def no_subprocess(monkeypatch):
    """sbatch, squeue or any other program started by the dry run fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"the dry run started a process: {args[0] if args else kwargs}")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_paper_dry_run_lists_every_training_experiment_and_submits_nothing(tmp_path, capsys, no_subprocess):
    out = tmp_path / "out"
    rc = main(["reproduce", "--preset", "paper", "--dry-run", "--out", str(out), "--launcher", "slurm",
               "--partition", "gpu", "--slurm-option", "qos=high"])
    text = capsys.readouterr().out
    assert rc == 0 and not out.exists() and list(tmp_path.iterdir()) == []
    training = [e for e in load_all().values() if e.train_config is not None]
    assert len(training) >= 6
    for exp in training:
        assert f"\n{exp.id} (training): {exp.title}\n" in text
    assert "differs from the paper because …" in text
    for exp_id, protocol in protocols().items():  # every listed difference is printed with its reason
        for why in protocol.differences.values():
            assert why in text, (exp_id, why)
    assert "NOT LISTED" not in text
    # C8: 12 cells × 1 GPU × 15 min = 3 GPU-hours
    assert ("1 GPU, 8 CPUs, 32 GB, time limit 2:00:00, partition gpu, --qos=high; expected 15 min per cell → 3.0 "
            "GPU-hours (at most 24.0 GPU-hours by the limits)") in text
    assert text.strip().splitlines()[-1].startswith("total: ")


def test_dry_run_with_only_and_overrides(tmp_path, capsys, no_subprocess):
    rc = main(["reproduce", "--preset", "quick", "--only", "C8", "--dry-run", "--out", str(tmp_path / "o"),
               "--launcher", "slurm", "--gpus-per-cell", "2", "--time", "30", "--seeds", "1"])
    text = capsys.readouterr().out
    assert rc == 0 and not (tmp_path / "o").exists()
    assert "\nC8 (training)" in text and "\nGRID" not in text and "\nC1 " not in text
    assert "run ∈ {collapsed-silu, normal-silu, offset-linear, offset-relu} × seed ∈ {0}" in text
    assert "2 GPUs" in text and "time limit 0:30:00" in text and "DDP over 2 processes" in text
    assert "the quick preset is scaled down" in text and "--seeds on the command line" in text


def test_dry_run_prints_the_notes_a_run_would_report(tmp_path, capsys, no_subprocess):
    # C8's runs set train.pseudo_collapse themselves (0.1 for collapsed-silu, none for the others): a --set of it
    # is noted for the cells that hold another value
    rc = main(["reproduce", "--preset", "quick", "--only", "C8", "--dry-run", "--out", str(tmp_path / "o"),
               "--set", "train.pseudo_collapse=0.1"])
    text = capsys.readouterr().out
    assert rc == 0
    notes = [line for line in text.splitlines() if line.startswith("  note: ")]
    assert len(notes) == 1 and "--set train.pseudo_collapse=0.1: 6 of 8 cells" in notes[0], notes
    assert text.index("\nC8 (training)") < text.index(notes[0]) < text.index("  8 cells:")
    assert main(["reproduce", "--preset", "quick", "--only", "C8", "--dry-run", "--out", str(tmp_path / "o")]) == 0
    assert "  note: " not in capsys.readouterr().out


def test_dry_run_of_theory_experiments_says_there_is_no_protocol(tmp_path, capsys, no_subprocess):
    assert main(["theory", "--preset", "paper", "--only", "C1", "--dry-run", "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "C1 (theory)" in text and "states no setting" in text and "CPU core-hours" in text


def test_dry_run_errors_like_reproduce(tmp_path, capsys):
    assert main(["reproduce", "--dry-run", "--only", "C99", "--out", str(tmp_path / "o")]) == 2
    assert "C99" in capsys.readouterr().err
    assert main(["reproduce", "--dry-run", "--only", "C8", "--launcher", "slurm", "--time", "soon",
                 "--out", str(tmp_path / "o")]) == 2
    assert "--time 'soon'" in capsys.readouterr().err


def test_cost_counts_gpu_or_core_hours():
    # 3 cells × 2 GPUs × 30 min = 3 GPU-hours expected; × 60 min limit = 6
    assert cost(Resources(gpus=2, cpus=8, time_min=60, expected_min=30), 3) == {"expected": 3.0, "limit": 6.0}
    # no GPU: 4 cells × 2 cores × 15 min = 2 core-hours; unknown expectation
    assert cost(Resources(cpus=2, time_min=15), 4) == {"expected": None, "limit": 2.0}

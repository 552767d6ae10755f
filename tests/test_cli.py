"""The command line: version, hessian (table and JSON), clear errors."""
import json
import os
import subprocess
import sys

import pytest
import torch

from headgeom.cli import main
from headgeom.experiments import cli as experiments_cli
from headgeom.geometry import effective_hessian
from headgeom.geometry.cli import hessian_report
from headgeom.heads import head_from
from headgeom.io import atomic_write_json


def test_version(capsys):
    assert main(["version"]) == 0
    assert "headgeom" in capsys.readouterr().out


def test_python_dash_m_runs_the_same_command_line():
    done = subprocess.run([sys.executable, "-m", "headgeom", "version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "headgeom" in done.stdout, done.stderr


def test_hessian_prints_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "h.json"
    assert main(["hessian", "--head", "6-12-5:silu", "--objective", "negative_cosine", "--batch-size", "4",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for word in ("H_eff", "G", "M", "lambda_min", "reading: ambient", "|M| / |H_eff|"):
        assert word in text
    data = json.loads(out.read_text())
    assert set(data["spectra"]) == {"H_eff", "G", "M"}
    assert data["setting"]["reading"] == "ambient" and data["engine"]["N"] == 4
    # the JSON's spectrum is the spectrum of the engine's blocks for the same setting
    torch.manual_seed(0)
    lam = torch.tensor(data["spectra"]["H_eff"]["eigenvalues"])
    assert lam.shape == (4, 6)
    assert data["summary"]["H_eff"]["lambda_min"] == pytest.approx(float(lam.min()))
    # H_eff and G: floor relative to the result or to G's operands, whichever is larger; M: the result
    s = data["operand_scale"]["value"]
    assert s > 0 and "max(max|lambda|, S)" in text
    for part in ("H_eff", "G"):
        sp = data["spectra"][part]
        big = max(float(torch.tensor(sp["eigenvalues"]).abs().max()), s)
        assert sp["floor"] == pytest.approx(1e-10 * big) and sp["operand_scale"] == s
    assert data["spectra"]["M"]["operand_scale"] is None


def test_hessian_report_matches_engine_blocks():
    rep = hessian_report("5-9-4:gelu", "mse", batch=3, seed=2)
    # rebuild the documented setting by hand
    torch.manual_seed(2)
    head = head_from("5-9-4:gelu").double().eval()
    g = torch.Generator().manual_seed(2)
    z = torch.randn(3, 5, generator=g, dtype=torch.float64)
    z2 = z + 0.1 * torch.randn(3, 5, generator=g, dtype=torch.float64)
    with torch.no_grad():
        c = head(z2)
    eh = effective_hessian(head, lambda u: 0.5 * ((u - c) ** 2).sum(1).mean(), z)
    lam = torch.linalg.eigvalsh(eh.blocks())
    assert torch.allclose(torch.tensor(rep["spectra"]["H_eff"]["eigenvalues"], dtype=torch.float64), lam, rtol=1e-9, atol=1e-14)


def test_pseudo_collapsed_and_dense_and_operator_scopes(capsys):
    for scope in ("dense", "operator"):
        assert main(["hessian", "--head", "4-8-3:tanh", "--objective", "vicreg", "--batch-size", "3",
                     "--state", "pseudo-collapsed", "--scope", scope]) == 0
    assert "pseudo-collapsed" in capsys.readouterr().out


def test_hessian_errors_are_clear(capsys):
    assert main(["hessian", "--head", "nonsense", "--objective", "mse"]) == 2
    assert "head preset" in capsys.readouterr().err
    assert main(["hessian", "--head", "4-8-3:silu", "--objective", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["hessian", "--head", "4-8-3:silu", "--objective", "mse", "--batch-size", "0"]) == 2
    with pytest.raises(SystemExit):
        main(["hessian", "--head", "4-8-3:silu", "--objective", "mse", "--reading", "bogus"])
    with pytest.raises(SystemExit):  # the hybrid reading is gone: the MSE premise is --objective mse
        main(["hessian", "--head", "4-8-3:silu", "--objective", "negative_cosine", "--reading", "mse"])


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    path = tmp_path / "r.json"
    atomic_write_json(path, {"a": 1.0, "nan": float("nan")})
    assert json.loads(path.read_text()) == {"a": 1.0, "nan": None}
    with pytest.raises(TypeError):
        atomic_write_json(path, {"bad": object()})
    assert json.loads(path.read_text())["a"] == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_reproduce_checkpoints_option_sets_the_folder_for_c10(tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_run(ids, **kwargs):
        seen["dir"] = os.environ.get("HEADGEOM_CHECKPOINTS")
        raise RuntimeError("stop here")

    monkeypatch.setattr(experiments_cli, "run_experiments", fake_run)
    monkeypatch.delenv("HEADGEOM_CHECKPOINTS", raising=False)
    missing = tmp_path / "nope"
    assert main(["reproduce", "--only", "C10", "--checkpoints", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "--checkpoints" in err and str(missing) in err and "not a directory" in err
    assert "dir" not in seen
    assert main(["reproduce", "--only", "C10", "--checkpoints", str(tmp_path)]) == 2
    assert seen["dir"] == str(tmp_path.resolve())


def test_analyze_is_wired_and_a_missing_input_is_a_clear_error(tmp_path, capsys):
    missing = tmp_path / "no_such_run"
    assert main(["analyze", str(missing), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headgeom analyze: error:") and str(missing) in err
    assert not (tmp_path / "out").exists()

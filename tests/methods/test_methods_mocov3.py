"""MoCo v3 end to end: `headgeom train --method mocov3` trains a tiny run with geometry tracking
through the command line, and `headgeom hessian --objective mocov3` analyses its objective.

The method's pieces are tested with the others (its loss against the official convention in
tests/objectives/test_objectives_mocov3.py, geometry_problem against the training loss in
test_methods_geometry.py, state and DDP in test_methods_state.py / test_methods_distributed.py);
here: the momentum encoder is the EMA of backbone + projector after a step, and the command lines.
"""
from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from headgeom.cli import main
from headgeom.methods import build_method, cosine_momentum

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = ("--backbone resnet18 --width 0.125 --head d-32-16:silu --predictor d-8-16:silu --data shapes "
        "--data-option n=32 --data-option size=16 --batch-size 8 --device cpu --quiet").split()


def test_the_momentum_encoder_is_the_ema_of_backbone_and_projector():
    torch.manual_seed(0)
    m = build_method("mocov3", "resnet18", head="d-16-8:silu", predictor="d-4-8", backbone_options={"width": 1 / 32})
    assert m.options["temperature"] == 0.2 and m.options["momentum_base"] == 0.99
    before = [p.detach().clone() for p in m.momentum_encoder.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(before, nn.Sequential(m.backbone, m.projector).parameters()))
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    out = m([torch.rand(4, 3, 16, 16), torch.rand(4, 3, 16, 16)])
    out["loss"].backward()
    opt.step()
    m.on_step_end(3, 10)
    tau = cosine_momentum(3, 10, 0.99, 1.0)
    online = list(nn.Sequential(m.backbone, m.projector).parameters())
    for old, new, o in zip(before, m.momentum_encoder.parameters(), online):
        torch.testing.assert_close(new, tau * old + (1 - tau) * o.detach(), rtol=1e-6, atol=1e-7)
    assert not any(p.requires_grad for p in m.momentum_encoder.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, m.momentum_encoder.parameters()))


def test_headgeom_train_mocov3_trains_with_tracking(tmp_path, capsys):
    run_dir = tmp_path / "mocov3"
    argv = ["train", "--method", "mocov3", *TINY, "--max-steps", "2", "--track-every", "2", "--probe-size", "8",
            "--track-block-samples", "4", "--out", str(run_dir)]
    assert main(argv) == 0
    assert "tracking figure(s)" in capsys.readouterr().out
    lines = {r["step"]: r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}
    assert sorted(lines) == [0, 1, 2] and all(torch.isfinite(torch.tensor(lines[s]["loss"])) for s in (1, 2))
    for step in (0, 2):
        lo, hi = lines[step]["heff_ambient_mean_lambda_min"], lines[step]["heff_ambient_mean_lambda_max"]
        assert hi >= lo and hi > 0
    meta = json.loads((run_dir / "tracking.json").read_text())
    assert "declared-curvature" in json.dumps(meta)  # the objective's closed-form blocks were used
    assert json.loads((run_dir / "config.json").read_text())["config"]["method"] == "mocov3"


def test_headgeom_hessian_accepts_the_mocov3_objective(tmp_path, capsys):
    out = tmp_path / "h.json"
    assert main(["hessian", "--head", "6-12-5:silu", "--objective", "mocov3", "--batch-size", "4",
                 "--json", str(out)]) == 0
    assert "H_eff" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["setting"]["objective"] == "mocov3"
    lam = torch.tensor(data["spectra"]["H_eff"]["eigenvalues"])
    assert lam.shape == (4, 6) and torch.isfinite(lam).all() and lam.abs().max() > 0

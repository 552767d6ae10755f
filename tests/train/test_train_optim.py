"""headgeom.train.schedules and .optim against formulas written out here, in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from headgeom.train import LARS, build_optimizer, cosine_value, lr_at, warmup_cosine
from headgeom.train.config import TrainConfig


def test_warmup_cosine_against_formula():
    base, final, warm, total = 0.3, 0.01, 5, 25
    for s in range(30):
        if s < warm:
            expect = base * (s + 1) / warm
        else:
            t = min(1.0, (s - warm) / (total - warm))
            expect = final + (base - final) * (1 + math.cos(math.pi * t)) / 2
        assert warmup_cosine(s, total, base, warm, final) == pytest.approx(expect, rel=1e-14, abs=1e-16)
    assert warmup_cosine(warm, total, base, warm, final) == pytest.approx(base)  # peak right after warm-up
    assert warmup_cosine(total, total, base, warm, final) == pytest.approx(final)
    assert warmup_cosine(3, 3, base, 3, final) == base  # all warm-up, nothing to decay


def test_constant_schedule_and_errors():
    assert [lr_at("constant", s, 10, 0.2, 2) for s in range(4)] == [0.1, 0.2, 0.2, 0.2]
    assert lr_at("cosine", 4, 10, 0.2) == warmup_cosine(4, 10, 0.2)
    with pytest.raises(ValueError, match="unknown schedule 'step'"):
        lr_at("step", 0, 10, 0.1)
    with pytest.raises(ValueError, match="step=-1"):
        warmup_cosine(-1, 10, 0.1)


def test_cosine_value_is_byol_momentum():
    m0, K = 0.996, 100
    for k in (0, 1, 37, 100, 120):
        expect = 1 - (1 - m0) * (math.cos(math.pi * min(k, K) / K) + 1) / 2
        assert cosine_value(k, K, m0, 1.0) == pytest.approx(expect, rel=1e-15)


def lars_reference(params, grads, mus, lr, momentum, wd, eta, excluded):
    """Official Barlow Twins / VICReg LARS step in numpy float64."""
    out_p, out_mu = [], []
    for p, g, mu, exc in zip(params, grads, mus, excluded):
        d = g + (0.0 if exc else wd) * p
        if not exc:
            pn, dn = np.linalg.norm(p), np.linalg.norm(d)
            d = d * (eta * pn / dn if pn > 0 and dn > 0 else 1.0)
        mu = momentum * mu + d
        out_p.append(p - lr * mu)
        out_mu.append(mu)
    return out_p, out_mu


def test_lars_steps_match_the_reference():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.Linear(4, 3)).double()
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
    decay = [p for p in model.parameters() if p.ndim > 1]
    keep = [p for p in model.parameters() if p.ndim <= 1]
    opt = build_optimizer("lars", [{"name": "decay", "params": decay, "weight_decay": 1e-2},
                                   {"name": "no_decay", "params": keep, "weight_decay": 0.0}],
                          lr=0.7, momentum=0.9, weight_decay=1e-2, eta=0.02)
    assert isinstance(opt, LARS)
    assert [g["lars_exclude"] for g in opt.param_groups] == [False, True]
    order = decay + keep  # optimizer group order
    ps = [p.detach().numpy().copy() for p in order]
    mus = [np.zeros_like(p) for p in ps]
    x = torch.randn(16, 5, dtype=torch.float64)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        gs = [p.grad.numpy().copy() for p in order]
        ps, mus = lars_reference(ps, gs, mus, 0.7, 0.9, 1e-2, 0.02, [p.ndim <= 1 for p in order])
        opt.step()
        for p, ref in zip(order, ps):
            np.testing.assert_allclose(p.detach().numpy(), ref, rtol=1e-12, atol=1e-14)


def test_lars_zero_parameter_takes_the_plain_step():
    p = nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))
    opt = LARS([p], lr=0.5, momentum=0.0, eta=0.001)
    p.grad = torch.ones(2, 2, dtype=torch.float64)
    opt.step()
    assert torch.equal(p.detach(), torch.full((2, 2), -0.5, dtype=torch.float64))


@pytest.mark.parametrize("name,cls", [("sgd", torch.optim.SGD), ("adam", torch.optim.Adam),
                                      ("adamw", torch.optim.AdamW)])
def test_builders_keep_the_groups_weight_decay(name, cls):
    a, b, frozen = nn.Parameter(torch.ones(3, 3)), nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(2))
    frozen.requires_grad_(False)
    opt = build_optimizer(name, [{"name": "decay", "params": [a], "weight_decay": 0.1},
                                 {"name": "no_decay", "params": [b, frozen], "weight_decay": 0.0}], lr=0.01)
    assert isinstance(opt, cls)
    assert [(g["name"], g["weight_decay"], len(g["params"])) for g in opt.param_groups] == \
        [("decay", 0.1, 1), ("no_decay", 0.0, 1)]
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        build_optimizer("rmsprop", [{"params": [a]}], lr=0.1)
    with pytest.raises(ValueError, match="no trainable parameters"):
        build_optimizer(name, [{"params": [frozen]}], lr=0.1)


def test_config_validation_and_round_trip():
    c = TrainConfig(method="simclr", backbone_options={"width": 0.5}, betas=[0.9, 0.95])
    assert c.betas == (0.9, 0.95) and TrainConfig.from_dict(c.to_dict()) == c
    assert c.differences(TrainConfig(method="simclr", lr=0.1, backbone_options={"width": 0.5},
                                     betas=(0.9, 0.95))) == {"lr": (0.06, 0.1)}
    for bad, match in [({"optimizer": "rmsprop"}, "unknown optimizer"), ({"batch_size": 0}, "batch_size"),
                       ({"lr": float("nan")}, "lr"), ({"schedule": "step"}, "unknown schedule"),
                       ({"warmup_epochs": 3.0, "epochs": 2}, "warmup_epochs=3.0 exceeds"),
                       ({"max_steps": 0}, "max_steps"), ({"device": "tpu"}, "device")]:
        with pytest.raises(ValueError, match=match):
            TrainConfig(method="simclr", **bad)
    with pytest.raises(ValueError, match=r"unknown TrainConfig field\(s\) \['colour'\]"):
        TrainConfig.from_dict({"method": "simclr", "colour": 1})

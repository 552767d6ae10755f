"""Head and backbone parameter-gradient norms (headgeom.train.grad_norms): the norm against a formula
written out here, and for every registered method the loop's metrics.jsonl carries both keys with the
values of the last step's .grad, the EMA target/teacher of BYOL and DINO counting in neither group.

The loop's own records (every logging and tracking step, resume without duplicates) are tested in
test_train_loop.py.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from headgeom.methods import METHODS, build_method
from headgeom.train import train
from headgeom.train.grad_norms import GRAD_NORM_KEYS, grad_norm, gradient_groups, gradient_norms
from test_train_loop import cfg, norm_of_grads
from tiny_models import TinyBackbone

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate


def test_grad_norm_is_the_global_l2_norm_over_the_parameters_with_a_gradient():
    g = torch.Generator().manual_seed(0)
    a = nn.Parameter(torch.randn(3, 4, generator=g))
    b = nn.Parameter(torch.randn(5, generator=g))
    c = nn.Parameter(torch.randn(2, generator=g))  # no gradient: counts 0
    a.grad = torch.randn(3, 4, generator=g)
    b.grad = 1e-3 * torch.randn(5, generator=g)
    entries = [float(x) for x in a.grad.flatten()] + [float(x) for x in b.grad]
    expect = math.sqrt(sum(x * x for x in entries))
    got = grad_norm([a, b, c])
    assert got.dtype == torch.float64 and got.ndim == 0
    assert float(got) == pytest.approx(expect, rel=1e-14)
    assert float(grad_norm([c])) == 0.0 and float(grad_norm([])) == 0.0
    norms = gradient_norms({"x": [a], "y": [b, c]})
    assert float(norms["x"]) == pytest.approx(float(a.grad.double().norm()), rel=1e-14)
    assert gradient_groups(nn.Linear(2, 2)) is None  # no head_parameters / backbone_parameters



HEADS = {"dino": ("d-16-16:gelu:dino=8", None), "simsiam": ("d-16-16:bn:last=bn", "d-8-16:bn"),
         "byol": ("d-16-16:bn", "d-8-16:bn")}
OPTIONS = {"dino": {"n_local_crops": 2, "freeze_last_layer": 0}}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_logs_the_norms_of_its_trained_head_and_backbone(tmp_path, name):
    built = []
    head, predictor = HEADS.get(name, ("d-16-16:bn:last=bn", None))

    def build(config):
        built.append(build_method(name, backbone=TinyBackbone(), head=head, predictor=predictor,
                                  **config.method_options))
        return built[-1]

    train(cfg(method=name, max_steps=2, method_options=OPTIONS.get(name, {})), tmp_path, build_method=build)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2]
    for r in lines:
        assert set(GRAD_NORM_KEYS) <= r.keys() and all(math.isfinite(r[k]) and r[k] > 0 for k in GRAD_NORM_KEYS)
    (method,) = built
    head_prefixes = ("projector.", "predictor.")
    trained = {n for n, p in method.named_parameters() if p.grad is not None}
    # every parameter that received a gradient is in one of the two groups ...
    assert trained and all(n.startswith((*head_prefixes, "backbone.")) for n in trained), sorted(trained)
    # ... and the EMA copies (BYOL's target, DINO's teacher) have parameters but never a gradient
    ema = [n for n, _ in method.named_parameters() if n.startswith(("target.", "teacher."))]
    assert bool(ema) == (name in ("byol", "dino")), ema
    assert lines[-1]["grad_norm_head"] == pytest.approx(norm_of_grads(method, head_prefixes), rel=1e-12)
    assert lines[-1]["grad_norm_backbone"] == pytest.approx(norm_of_grads(method, ("backbone.",)), rel=1e-12)

"""Stateful parts of the methods against formulas written here: the EMA momentum schedule
(BYOL's τ formula and DINO's numpy cosine_scheduler), the EMA update of a BYOL target after a
real step, DINO's centre update and teacher-temperature schedule (DINO's linspace), and the
state_dict round trip: spec (through JSON) + state_dict rebuild a method with the same
outputs and, for DINO, the same schedule state. Tolerances: float64 formulas to 1e-15,
float32 EMA to 1e-6, outputs exactly equal (same ops, same weights)."""
import io
import json
import math

import numpy as np
import pytest
import torch

from headgeom.methods import (
    METHODS, DINOCenter, MethodSpec, build_method, build_method_from_spec, center_update,
    cosine_momentum, ema_update_, teacher_temperature,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

HEADS = {
    "simsiam": ("d-16-16:bn", "d-8-16"),
    "byol": ("d-16-16:bn", "d-8-16:silu"),
    "dino": ("d-16-16:gelu:dino=8", None),
}


def make(name, seed=0, **kw):
    torch.manual_seed(seed)
    head, pred = HEADS.get(name, ("d-16-16:silu:bn:last=bn", None))
    return build_method(name, "resnet18", head=head, predictor=pred,
                        backbone_options={"width": 1 / 32}, **kw)


def views_for(m, seed=0, n=8):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, 16, 16, generator=g)
    rk = {"local_size": 8, "n_local": 1} if m.name == "dino" else {}
    return list(m.recipe(16, **rk)(x, g))


# ---- momentum schedule ----------------------------------------------------------------------
def dino_cosine_scheduler(base, final, total):
    """facebookresearch/dino utils.cosine_scheduler without warm-up (one epoch of ``total`` iterations)."""
    iters = np.arange(total)
    return final + 0.5 * (base - final) * (1 + np.cos(np.pi * iters / len(iters)))


@pytest.mark.parametrize("base,total", [(0.996, 10), (0.99, 37), (0.9, 1)])
def test_cosine_momentum_matches_byol_and_dino(base, total):
    dino_sched = dino_cosine_scheduler(base, 1.0, total)
    for k in range(total + 1):
        byol_tau = 1 - (1 - base) * (math.cos(math.pi * k / total) + 1) / 2  # BYOL §3.2
        assert cosine_momentum(k, total, base) == pytest.approx(byol_tau, abs=1e-15)
        if k < total:
            assert cosine_momentum(k, total, base) == pytest.approx(dino_sched[k], abs=1e-15)
    assert cosine_momentum(0, total, base) == pytest.approx(base)
    assert cosine_momentum(total + 5, total, base) == pytest.approx(1.0)  # clamped


@pytest.mark.parametrize("bad", [dict(step=-1, total_steps=5), dict(step=0, total_steps=0),
                                 dict(step=0, total_steps=5, base=1.5)])
def test_cosine_momentum_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        cosine_momentum(**bad)


def test_ema_update_formula():
    g = torch.Generator().manual_seed(0)
    t = [torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)]
    o = [torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)]
    expected = [0.7 * a + 0.3 * b for a, b in zip(t, o)]
    ema_update_(t, o, 0.7)
    for a, e in zip(t, expected):
        torch.testing.assert_close(a, e, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="same parameters"):
        ema_update_(t, o[:1], 0.5)


def test_byol_target_after_a_step_is_the_ema_of_the_online_network():
    m = make("byol")
    views = views_for(m)
    online = lambda: [p.detach().clone() for p in list(m.backbone.parameters()) + list(m.projector.parameters())]  # noqa: E731
    target = lambda: [p.detach().clone() for p in m.target.module.parameters()]  # noqa: E731
    for a, b in zip(online(), target()):
        assert torch.equal(a, b)  # the target starts as a copy
    opt = torch.optim.SGD(m.param_groups(0.0), lr=0.5)
    out = m(views)
    out["loss"].backward()
    opt.step()
    before_t, after_o = target(), online()
    assert any(not torch.equal(a, b) for a, b in zip(before_t, after_o)), "the step must move the online net"
    m.on_step_end(3, 10)
    tau = 1 - (1 - 0.996) * (math.cos(math.pi * 3 / 10) + 1) / 2
    for t_new, t_old, o_new in zip(target(), before_t, after_o):
        torch.testing.assert_close(t_new, tau * t_old + (1 - tau) * o_new, rtol=0, atol=1e-6)
    assert all(not p.requires_grad for p in m.target.parameters())


# ---- DINO centre and temperature ----------------------------------------------------------
def test_center_update_formula():
    c, b = torch.randn(1, 6, dtype=torch.float64), torch.randn(1, 6, dtype=torch.float64)
    torch.testing.assert_close(center_update(c, b, 0.9), 0.9 * c + 0.1 * b, rtol=0, atol=1e-15)
    module = DINOCenter(6, 0.9)
    outs = [torch.randn(4, 6), torch.randn(4, 6)]
    module.update_(DINOCenter.batch_mean(outs))
    torch.testing.assert_close(module.center, 0.1 * torch.cat(outs).mean(0, keepdim=True))


def dino_temp_schedule(start, final, warmup, total):
    """facebookresearch/dino DINOLoss.teacher_temp_schedule (per step here)."""
    return np.concatenate((np.linspace(start, final, warmup), np.ones(total - warmup) * final))


@pytest.mark.parametrize("warmup,total", [(30, 100), (1, 5), (0, 4), (7, 7)])
def test_teacher_temperature_matches_dino_schedule(warmup, total):
    sched = dino_temp_schedule(0.04, 0.07, warmup, total)
    for k in range(total):
        assert teacher_temperature(k, warmup, 0.04, 0.07) == pytest.approx(sched[k], abs=1e-15)


def test_dino_step_updates_center_teacher_and_temperature():
    total = 10
    m = make("dino", teacher_temp_warmup=0.3)  # warm-up over round(0.3 * 10) = 3 steps
    sched = dino_temp_schedule(0.04, 0.07, 3, total)
    assert m.current_teacher_temp == pytest.approx(sched[0])
    opt = torch.optim.SGD(m.param_groups(0.0), lr=0.1)
    for step in range(4):
        views = views_for(m, seed=step)
        with torch.no_grad():
            teacher = [m.teacher.module(v) for v in views[:2]]  # globals only
            student = [m.projector(m.backbone(v)) for v in views]
        c_old = m.centering.center.clone()
        t_old = [p.detach().clone() for p in m.teacher.module.parameters()]
        out = m(views)
        # the loss uses the current centre and temperature, over all (teacher i, student v != i)
        q = [torch.softmax((t - c_old) / sched[step], dim=1) for t in teacher]
        terms = [-(qi * torch.log_softmax(s / 0.1, dim=1)).sum(1).mean()
                 for i, qi in enumerate(q) for v, s in enumerate(student) if v != i]
        assert len(terms) == 2 * 3 - 2
        torch.testing.assert_close(out["loss"].detach(), sum(terms) / len(terms), rtol=1e-5, atol=1e-6)
        assert out["logs"]["teacher_temp"] == pytest.approx(sched[step])
        # collapse monitors from the same q: mean per-sample entropy and entropy of the mean
        qa = torch.cat(q)
        ent = lambda p: -(p * p.log()).sum(-1)  # noqa: E731
        assert float(out["logs"]["teacher_entropy"]) == pytest.approx(float(ent(qa).mean()), rel=1e-5)
        assert float(out["logs"]["teacher_marginal_entropy"]) == pytest.approx(float(ent(qa.mean(0))), rel=1e-5)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        m.on_step_end(step, total)
        tau = 1 - (1 - 0.996) * (math.cos(math.pi * step / total) + 1) / 2
        online = list(m.backbone.parameters()) + list(m.projector.parameters())
        for t_new, t0, o in zip(m.teacher.module.parameters(), t_old, online):
            torch.testing.assert_close(t_new, tau * t0 + (1 - tau) * o.detach(), rtol=0, atol=1e-6)
        expected_c = 0.9 * c_old + 0.1 * torch.cat(teacher).mean(0, keepdim=True)
        torch.testing.assert_close(m.centering.center, expected_c, rtol=1e-6, atol=1e-7)
        assert m.current_teacher_temp == pytest.approx(sched[step + 1])


def test_dino_without_warmup_uses_the_final_temperature_from_the_start():
    m = make("dino", teacher_temp_warmup=0.0)
    assert m.current_teacher_temp == 0.07


# ---- state_dict round trip ----------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(METHODS))
def test_spec_and_state_dict_rebuild_an_identical_method(name):
    m = make(name, seed=1, pseudo_collapse=0.1) if name != "dino" else make(name, seed=1)
    opt = torch.optim.SGD(m.param_groups(1e-4), lr=0.05)
    for step in range(2):  # move weights, EMA target, centre, temperature off their init
        out = m(views_for(m, seed=step))
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        m.on_step_end(step, 4)
    spec = MethodSpec.from_dict(json.loads(json.dumps(m.spec.to_dict())))
    assert spec == m.spec
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)

    torch.manual_seed(123)  # a different initialisation, overwritten by the state
    r = build_method_from_spec(spec)
    r.load_state_dict(state)
    assert r.spec == m.spec
    for k, v in m.state_dict().items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, r.state_dict()[k]), k
    views = views_for(m, seed=9)
    for mode in ("eval", "train"):
        getattr(m, mode)()
        getattr(r, mode)()
        a, b = m(views), r(views)
        assert torch.equal(a["loss"], b["loss"]), mode
        for za, zb in zip(a["z"], b["z"]):
            assert torch.equal(za, zb)
        assert a["logs"] == b["logs"]
    # the next step's state updates agree too (EMA, centre, temperature)
    m.on_step_end(2, 4)
    r.on_step_end(2, 4)
    for k, v in m.state_dict().items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, r.state_dict()[k]), k
    if name == "dino":
        assert r.current_teacher_temp == m.current_teacher_temp != 0.04


def test_custom_backbone_spec_needs_the_module_again():
    class Tiny(torch.nn.Module):
        feature_dim = 12

        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 12, 3), torch.nn.AdaptiveAvgPool2d(1),
                                           torch.nn.Flatten())

        def forward(self, x):
            return self.net(x)

    m = build_method("vicreg", Tiny(), head="d-8-8")
    assert m.spec.backbone == "custom" and m.spec.feature_dim == 12
    with pytest.raises(ValueError, match="custom backbone"):
        build_method_from_spec(m.spec)
    r = build_method_from_spec(m.spec, backbone=Tiny())
    r.load_state_dict(m.state_dict())
    v = views_for(m)
    assert torch.equal(m(v)["loss"], r(v)["loss"])

"""GeometryMonitor on a user's own model against independent float64 references.

The reference (tests/geometry_reference.py, torch.autograd.functional, no torch.func) builds
the dense (N·d, N·d) H_eff and M of z ↦ loss(head(z), v) at z = backbone(x1) with
v = head(backbone(x2)) fixed; the blocks' extreme eigenvalues, negative count over the
floor 1e-10·max|λ| and spectral-norm ratio are read from it here. RankMe and spread are
written out with numpy. Tolerances: 1e-9 relative (float64 through different routes);
Lanczos (coupled heads) to its tolerance 1e-8, checked at 1e-6.
"""
import copy
import importlib
import random
import sys

import numpy as np
import pytest
import torch
from torch import nn

import headgeom.integrations
from geometry_reference import diagonal_blocks, reference_parts
from headgeom.integrations import KEYS, GeometryMonitor
from headgeom.objectives import negative_cosine, nt_xent

pytestmark = pytest.mark.usefixtures("one_thread")

D, K, N = 4, 5, 6


class Noisy(nn.Module):
    """Draws from every RNG a training loop may use (torch, numpy, python): measuring must not
    advance them."""

    def forward(self, x):
        noise = torch.rand(()) + float(np.random.rand()) + random.random()
        return x + 0.0 * noise


class LightlyStyle(nn.Module):
    """lightly's layout: ``backbone`` ends in a pooled (N, C, 1, 1) map, ``projection_head``
    an MLP; BatchNorm in both (buffers to protect), RNG draws in the backbone."""

    def __init__(self, bn_head: bool = False, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.backbone = nn.Sequential(nn.Conv2d(3, D, 3), nn.BatchNorm2d(D), Noisy(), nn.Tanh(),
                                      nn.AdaptiveAvgPool2d(1))
        layers = [nn.Linear(D, 7)] + ([nn.BatchNorm1d(7)] if bn_head else []) + [nn.SiLU(), nn.Linear(7, K)]
        self.projection_head = nn.Sequential(*layers)

    def forward(self, x):
        return self.projection_head(self.backbone(x).flatten(start_dim=1))


def probe(seed: int = 1, n: int = N):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, 5, 5, generator=g), torch.randn(n, 3, 5, 5, generator=g)


def cosine_pair(u, v):
    return negative_cosine(u, v)


def reference(model, views, loss, reading="ambient", head_mode="train"):
    """Dense (H_eff, M) of the monitor's problem, float64 autograd on a copy of the model."""
    m = copy.deepcopy(model)
    m.backbone.eval()
    m.projection_head.train(head_mode == "train")
    with torch.no_grad():
        z1, z2 = (m.backbone(x).flatten(1).double() for x in views)
        head = m.projection_head.double()
        v = head(z2)
    for bn in head.modules():  # train-mode BN: batch statistics, nothing to update in the reference
        if isinstance(bn, nn.BatchNorm1d) and bn.training:
            bn.track_running_stats, bn.running_mean, bn.running_var = False, None, None
    h, _, mm = reference_parts(head, lambda u: loss(u, v), z1, reading)
    return h, mm, z1, head(z1).detach()


def block_summary(h, mm, n, d):
    """The H_eff numbers of the reference's blocks, by record field (the last part of their tag)."""
    hb, mb = diagonal_blocks(h, n, d), diagonal_blocks(mm, n, d)
    lam = torch.linalg.eigvalsh(hb)
    floor = 1e-10 * float(lam.abs().max())
    return {"lambda_min": float(lam.min()), "lambda_max": float(lam.max()),
            "n_negative": float((lam < -floor).sum()),
            "M_ratio_spectral": float(torch.linalg.eigvalsh(mb).abs().max() / lam.abs().max()),
            "M_ratio_fro": float(mb.norm() / hb.norm())}


def H(field, reading="ambient", op=False):
    """The shared tag of an H_eff field (docs/logging.md): the measurement's key for it."""
    return f"headgeom/{reading}/{'op_' if op else ''}{field}"


STATS = "headgeom/stats/"


def rankme_np(x):
    s = np.linalg.svd(x, compute_uv=False)
    p = s / s.sum() + 1e-7
    return float(np.exp(-(p * np.log(p)).sum()))


def spread_np(x):
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    return float(u.std(axis=0, ddof=1).mean())


@pytest.mark.parametrize("loss, reading", [(cosine_pair, "ambient"), (cosine_pair, "tangential"), (nt_xent, "ambient")])
def test_measure_matches_the_reference(loss, reading):
    model, views = LightlyStyle(seed=3), probe()
    out = GeometryMonitor("projection_head", "backbone", loss, views, reading=reading).measure(model)
    h, mm, z1, u1 = reference(model, views, loss, reading)
    want = block_summary(h, mm, N, D)
    for field, value in want.items():
        assert out[H(field, reading)] == pytest.approx(value, rel=1e-9, abs=1e-12 * abs(want["lambda_max"])), field
    # a SiLU head off its fixed point: M is not negligible, the check is not vacuous
    assert out[H("M_ratio_spectral", reading)] > 1e-3
    scale = out[H("operand_scale", reading)]
    assert scale > 0  # relative to the result or to G's operands, whichever is larger
    assert out[H("floor", reading)] == pytest.approx(
        1e-10 * max(abs(want["lambda_min"]), abs(want["lambda_max"]), scale), rel=1e-9)
    for part, x in (("z", z1), ("projector", u1)):
        assert out[f"{STATS}rankme_{part}"] == pytest.approx(rankme_np(x.numpy()), rel=1e-6)
        assert out[f"{STATS}spread_{part}"] == pytest.approx(spread_np(x.numpy()), rel=1e-6)
        assert out[f"{STATS}cov_condition_{part}"] >= 1.0
    assert {H("lambda_min", reading), H("M_ratio_spectral", reading), STATS + "rankme_z"} <= set(out)
    assert all(key.startswith("headgeom/") and isinstance(v, float) for key, v in out.items())


def test_coupled_head_uses_lanczos_on_the_whole_operator():
    """A train-mode BatchNorm head couples the samples: λ_min/λ_max/m_ratio of the whole H_eff."""
    model, views = LightlyStyle(bn_head=True, seed=4), probe()
    monitor = GeometryMonitor("projection_head", "backbone", cosine_pair, views)
    out = monitor.measure(model)
    h, mm, _, _ = reference(model, views, cosine_pair)
    lam = torch.linalg.eigvalsh(h)
    scale = float(lam.abs().max())
    assert out[H("lambda_min", op=True)] == pytest.approx(float(lam.min()), abs=1e-6 * scale)
    assert out[H("lambda_max", op=True)] == pytest.approx(float(lam.max()), abs=1e-6 * scale)
    assert out[H("M_ratio_spectral", op=True)] == pytest.approx(float(torch.linalg.eigvalsh(mm).abs().max()) / scale,
                                                               rel=1e-5)
    assert out[H("converged", op=True)] == 1.0
    assert monitor.last_info["engine"]["block_path"].startswith("lanczos")
    # eval mode: running statistics, row-wise again, exact blocks
    evald = GeometryMonitor("projection_head", "backbone", cosine_pair, views, head_mode="eval").measure(model)
    want = block_summary(*reference(model, views, cosine_pair, head_mode="eval")[:2], N, D)
    assert evald[H("lambda_min")] == pytest.approx(want["lambda_min"], rel=1e-9)


def test_measure_leaves_the_model_untouched():
    model, views = LightlyStyle(bn_head=True, seed=5), probe()
    model.train()
    model.backbone[1].eval()  # mixed modes must come back as they were
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.5)
    model.projection_head[0].weight.grad = None
    torch.manual_seed(11)
    np.random.seed(11)
    random.seed(11)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    modes = [m.training for m in model.modules()]
    rngs = torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()
    GeometryMonitor("projection_head", "backbone", nt_xent, views).measure(model)
    after = model.state_dict()
    assert all(torch.equal(state[k], after[k]) for k in state)  # parameters and BN running statistics
    for p, g in zip(model.parameters(), grads):
        assert (p.grad is None) if g is None else torch.equal(p.grad, g)
    assert [m.training for m in model.modules()] == modes
    assert torch.equal(torch.get_rng_state(), rngs[0])
    assert np.array_equal(np.random.get_state()[1], rngs[1])
    assert random.getstate() == rngs[2]


def test_step_measures_every_k_and_costs_nothing_between():
    model, views = LightlyStyle(seed=6), probe()
    resolved = []

    def head(m):
        resolved.append(1)
        return m.projection_head

    monitor = GeometryMonitor(head, lambda m: m.backbone, cosine_pair, views, every=3)
    got = {s: monitor.step(model, s) for s in range(7)}
    assert [s for s, v in got.items() if v is not None] == [0, 3, 6]
    assert len(resolved) == 3  # the model is not even looked at between measurements
    assert got[0] == got[3]  # same weights, same probe: same numbers
    assert monitor.metadata()["keys"] == KEYS and monitor.metadata()["reading"] == "ambient"
    assert all(key.startswith("headgeom/") for key in KEYS)  # defined by their shared tags


def test_modules_given_directly_and_a_sync_batchnorm_head():
    """Modules need no model; a SyncBatchNorm head is measured as the same plain BatchNorm
    (the 2-process test in test_integrations_lightning shows it calls no collective)."""
    model, views = LightlyStyle(bn_head=True, seed=7), probe()
    plain = GeometryMonitor(model.projection_head, model.backbone, cosine_pair, views).measure()
    sync_head = nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(model.projection_head))
    before = {k: v.clone() for k, v in sync_head.state_dict().items()}
    synced = GeometryMonitor(sync_head, model.backbone, cosine_pair, views).measure()
    assert synced == pytest.approx(plain, rel=1e-10)
    assert all(torch.equal(before[k], v) for k, v in sync_head.state_dict().items())
    assert isinstance(sync_head[1], nn.SyncBatchNorm)


def test_errors_say_what_to_pass():
    model, views = LightlyStyle(), probe()
    with pytest.raises(ValueError, match="two views"):
        GeometryMonitor("projection_head", "backbone", cosine_pair, views[:1])
    with pytest.raises(AttributeError, match="submodules: \\['backbone', 'projection_head'\\]"):
        GeometryMonitor("head", "backbone", cosine_pair, views).measure(model)
    with pytest.raises(ValueError, match="pass the model"):
        GeometryMonitor("projection_head", "backbone", cosine_pair, views).measure()
    with pytest.raises(TypeError, match="not an nn.Module"):
        GeometryMonitor(lambda m: m.projection_head[0].weight, "backbone", cosine_pair, views).measure(model)
    tokens = nn.Sequential(nn.Flatten(2), nn.Linear(25, 4))  # (N, C, 25) -> (N, 3, 4): tokens, not rows
    with pytest.raises(ValueError, match=r"\(N, d\) feature row"):
        GeometryMonitor(nn.Linear(4, 2), tokens, cosine_pair, views).measure()
    with pytest.raises(ValueError, match="every"):
        GeometryMonitor("projection_head", "backbone", cosine_pair, views, every=0)
    with pytest.raises(ValueError, match="reading"):
        GeometryMonitor("projection_head", "backbone", cosine_pair, views, reading="radial")


def test_the_callback_without_lightning_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)  # as if lightning were not installed
    monkeypatch.delitem(sys.modules, "headgeom.integrations.lightning_callback", raising=False)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[lightning\]"'):
        importlib.import_module("headgeom.integrations.lightning_callback")
    with pytest.raises(ImportError, match="GeometryMonitor"):
        headgeom.integrations.HeadGeometryCallback  # noqa: B018


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (benchmarks/gpu_checks.sh runs it)")
def test_on_cuda_under_bf16_autocast():
    """On the GPU: the same numbers as on the CPU (float32 backbone round-off only), the CUDA RNG
    untouched, and an enclosing bf16 autocast switched off for the measurement (same numbers
    with and without it; a bf16 backbone would move them by ~1e-2)."""
    torch.manual_seed(0)
    model = nn.ModuleDict({"backbone": nn.Sequential(nn.Flatten(), nn.Linear(75, D)),
                           "projection_head": nn.Sequential(nn.Linear(D, 7), nn.SiLU(), nn.Linear(7, K))})
    views = probe()
    cpu = GeometryMonitor("projection_head", "backbone", nt_xent, views).measure(model)
    model.cuda()
    monitor = GeometryMonitor("projection_head", "backbone", nt_xent, views)
    rng = torch.cuda.get_rng_state()
    plain = monitor.measure(model)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        autocast = monitor.measure(model)
    assert torch.equal(torch.cuda.get_rng_state(), rng)
    assert autocast == plain
    assert plain[H("lambda_min")] == pytest.approx(cpu[H("lambda_min")], rel=1e-4)
    assert plain[H("M_ratio_spectral")] == pytest.approx(cpu[H("M_ratio_spectral")], rel=1e-4)


@pytest.mark.parametrize("bn_head, reading", [(False, "tangential"), (True, "ambient")])
def test_the_keys_are_the_shared_tags_and_the_old_keys_read_them_with_a_warning(bn_head, reading):
    """measure() names each number by its shared tag (headgeom.tags), written out here from
    docs/logging.md's rule: the coupled head's Lanczos numbers go under op_<field>. The keys of
    0.2 still read the same numbers, with a DeprecationWarning naming the tag, for one release."""
    model, views = LightlyStyle(bn_head=bn_head, seed=5), probe()
    monitor = GeometryMonitor("projection_head", "backbone", cosine_pair, views, reading=reading)
    out = monitor.measure(model)
    old = {"lambda_min": H("lambda_min", reading, bn_head), "lambda_max": H("lambda_max", reading, bn_head),
           "m_ratio": H("M_ratio_spectral", reading, bn_head), "floor": H("floor", reading, bn_head),
           "rankme": STATS + "rankme_z", "spread": STATS + "spread_z", "spread_head": STATS + "spread_projector",
           "rankme_head": STATS + "rankme_projector"}
    if bn_head:
        old["lanczos_converged"] = H("converged", reading, True)
    else:
        old["m_ratio_fro"] = H("M_ratio_fro", reading)
    for key, name in old.items():
        assert key not in out and name in out  # one name per quantity: only the tag is a key
        with pytest.warns(DeprecationWarning, match=f"'{key}' is deprecated.*'{name}'"):
            assert out[key] == out[name]
        with pytest.warns(DeprecationWarning):
            assert out.get(key) == out[name]
    assert set(out.aliases.values()) == set(out)  # every reported number had a 0.2 key, nothing more
    with pytest.raises(KeyError):
        out["lambda_minimum"]  # noqa: B018
    assert out.get("lambda_minimum", 7) == 7
    with pytest.warns(DeprecationWarning, match="tagged"):
        assert monitor.tagged(model) == out  # the same measurement twice: bit-identical numbers

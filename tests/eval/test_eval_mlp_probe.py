"""MLP probe (headgeom.eval.mlp_probe): it reads what a linear probe cannot, its read-out is the
stated formula, it is a function of its seed, and bad input is refused with a clear message."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headgeom.eval.linear_probe import linear_probe_accuracy
from headgeom.eval.mlp_probe import MLPProbeConfig, fit_mlp_probe, mlp_probe_accuracy

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

SMALL = MLPProbeConfig(hidden=32, epochs=60, batch_size=64, lr=1e-2)


def xor_blobs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Four Gaussian blobs at (±2, ±2) labelled by sign(x0)·sign(x1) (XOR), plus 3 pure-noise
    dimensions: the class means coincide, so no linear read-out beats chance by much."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.randint(0, 4, (n,), generator=g)
    signs = torch.stack([(corner % 2) * 2 - 1, (corner // 2) * 2 - 1], dim=1).double()
    x = torch.cat([2.0 * signs + 0.5 * torch.randn(n, 2, generator=g, dtype=torch.float64),
                   torch.randn(n, 3, generator=g, dtype=torch.float64)], dim=1)
    y = (signs[:, 0] * signs[:, 1] > 0).long()
    return x, y


def test_learns_xor_where_the_linear_probe_cannot():
    x_train, y_train = xor_blobs(400, 0)
    x_test, y_test = xor_blobs(200, 1)
    mlp = mlp_probe_accuracy(x_train, y_train, x_test, y_test, config=SMALL)
    lin = linear_probe_accuracy(x_train, y_train, x_test, y_test)
    # the blobs are 8 noise std apart: the Bayes error is ~0; the best linear rule gets ~3/4 at most
    # (cut off one corner) and a regularised logistic fit of balanced XOR stays near 1/2
    assert mlp["test_top1"] >= 0.97, mlp
    assert lin["test_top1"] <= 0.70, lin
    assert mlp["steps"] == 60 * math.ceil(400 / 64) and mlp["hidden"] == 32


def test_logits_are_the_stated_formula_and_loss_is_the_train_cross_entropy():
    x, y = xor_blobs(120, 2)
    probe = fit_mlp_probe(x, y, num_classes=3, config=MLPProbeConfig(hidden=8, epochs=3, batch_size=50))
    xn, yn = x.numpy(), y.numpy()
    mean, std = xn.mean(0), xn.std(0)  # population std of the training features
    h = np.maximum((xn - mean) / std @ probe.w1.double().numpy().T + probe.b1.double().numpy(), 0.0)
    logits = h @ probe.w2.double().numpy().T + probe.b2.double().numpy()
    # tolerance: the probe runs in float32 (7 significant digits) on O(1) logits
    np.testing.assert_allclose(probe.logits(x).double().numpy(), logits, atol=1e-5, rtol=0)
    assert probe.w2.shape == (3, 8)  # num_classes beyond the labels seen gives an extra, unused logit
    shifted = logits - logits.max(axis=1, keepdims=True)
    ce = np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(len(yn)), yn])
    assert probe.loss == pytest.approx(ce, rel=1e-5)
    assert probe.steps == 3 * math.ceil(120 / 50)


def test_deterministic_under_a_seed_and_leaves_the_global_rng_alone():
    x, y = xor_blobs(100, 3)
    cfg = MLPProbeConfig(hidden=16, epochs=5, batch_size=32)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = fit_mlp_probe(x, y, config=cfg)
    assert torch.equal(torch.get_rng_state(), before)
    b = fit_mlp_probe(x.clone(), y.clone(), config=cfg)
    for name in ("w1", "b1", "w2", "b2"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.loss == b.loss
    c = fit_mlp_probe(x, y, config=MLPProbeConfig(hidden=16, epochs=5, batch_size=32, seed=1))
    assert not torch.equal(a.w1, c.w1)  # the seed is part of the recipe


def test_dead_dimensions_are_harmless():
    x, y = xor_blobs(80, 4)
    x[:, 4] = 7.0  # a dead unit: zero std must not give NaN
    probe = fit_mlp_probe(x, y, config=MLPProbeConfig(hidden=8, epochs=2))
    assert all(torch.isfinite(t).all() for t in (probe.w1, probe.b1, probe.w2, probe.b2))
    assert math.isfinite(probe.loss)


def test_error_paths():
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    with pytest.raises(ValueError, match=r"train labels must have shape \(10,\)"):
        fit_mlp_probe(x, y[:4])
    with pytest.raises(ValueError, match="different widths: 3 vs 2"):
        mlp_probe_accuracy(x, y, torch.randn(4, 2), y[:4])
    with pytest.raises(ValueError, match="num_classes = 1 but the labels go up to 1"):
        fit_mlp_probe(x, torch.arange(10) % 2, num_classes=1)
    with pytest.raises(TypeError, match="integer class indices"):
        fit_mlp_probe(x, y.float())
    bad = x.clone()
    bad[3, 1] = float("inf")
    with pytest.raises(ValueError, match="1 train feature rows contain NaN/inf"):
        fit_mlp_probe(bad, y)
    with pytest.raises(ValueError, match=r"features must be 2-D"):
        fit_mlp_probe(torch.randn(10), y)
    for field, value in (("hidden", 0), ("epochs", 1.5), ("batch_size", True), ("lr", 0.0),
                         ("weight_decay", -1.0)):
        with pytest.raises(ValueError, match=f"MLPProbeConfig.{field} must be"):
            MLPProbeConfig(**{field: value})
    with pytest.raises(ValueError, match=r"features must have shape \(N, 3\)"):
        fit_mlp_probe(x, y, config=MLPProbeConfig(hidden=4, epochs=1)).predict(torch.randn(2, 5))

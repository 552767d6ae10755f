"""Linear probe (headgeom.eval.linear_probe) against an independent numpy/scipy logistic fit."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import minimize
from scipy.special import logsumexp

from headgeom.eval.linear_probe import (LinearProbeConfig, fit_linear_probe, linear_probe_accuracy, probe_objective,
                                        split_class_count, standardize_stats)


def scipy_logistic(x: np.ndarray, y: np.ndarray, c: int, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """argmin mean CE + lam/2 ||W||^2 on standardised x, by scipy's L-BFGS-B, float64."""
    xs = (x - x.mean(0)) / x.std(0)
    n, d = xs.shape
    onehot = np.eye(c)[y]

    def f(theta):
        w, b = theta[:c * d].reshape(c, d), theta[c * d:]
        logits = xs @ w.T + b
        lse = logsumexp(logits, axis=1)
        loss = np.mean(lse - logits[np.arange(n), y]) + 0.5 * lam * np.sum(w * w)
        p = np.exp(logits - lse[:, None])
        g_logits = (p - onehot) / n
        gw = g_logits.T @ xs + lam * w
        gb = g_logits.sum(0)
        return loss, np.concatenate([gw.ravel(), gb])

    res = minimize(f, np.zeros(c * d + c), jac=True, method="L-BFGS-B",
                   options={"maxiter": 5000, "gtol": 1e-12, "ftol": 1e-15})
    return res.x[:c * d].reshape(c, d), res.x[c * d:]


def test_agrees_with_scipy_logistic_regression():
    rng = np.random.default_rng(0)
    n, d, c = 120, 5, 3
    y = rng.integers(0, c, n)
    x = rng.normal(size=(n, d)) * rng.uniform(0.5, 4, d) + 1.5 * np.eye(c, d)[y] + 3.0
    lam = 1e-2
    w_ref, b_ref = scipy_logistic(x, y, c, lam)
    cfg = LinearProbeConfig(weight_decay=lam, dtype=torch.float64, tolerance_grad=1e-8,
                            tolerance_change=0.0, max_iter=500)
    probe = fit_linear_probe(torch.from_numpy(x), torch.from_numpy(y), c, cfg)
    # tolerance: both optimisers stop at gradients below 1e-8 of a strongly convex problem
    np.testing.assert_allclose(probe.weight.numpy(), w_ref, atol=1e-6, rtol=0)
    np.testing.assert_allclose(probe.bias.numpy(), b_ref, atol=1e-6, rtol=0)
    assert probe.converged and probe.grad_max <= 1e-8 and probe.stopped == "gradient"
    xs = (x - x.mean(0)) / x.std(0)
    np.testing.assert_allclose(probe.logits(torch.from_numpy(x)).numpy(),
                               xs @ w_ref.T + b_ref, atol=1e-5, rtol=0)


def test_separable_data_reach_full_accuracy_in_float32():
    g = torch.Generator().manual_seed(1)
    c, d = 5, 20
    centres = 6.0 * torch.randn(c, d, generator=g)
    y_train = torch.randint(0, c, (300,), generator=g)
    y_test = torch.randint(0, c, (100,), generator=g)
    x_train = centres[y_train] + torch.randn(300, d, generator=g)
    x_test = centres[y_test] + torch.randn(100, d, generator=g)
    f32 = LinearProbeConfig(dtype=torch.float32, tolerance_grad=1e-5)
    out = linear_probe_accuracy(x_train, y_train, x_test, y_test, config=f32)
    assert out["train_top1"] == 1.0 and out["test_top1"] == 1.0
    assert out["stopped"] in ("gradient", "stalled") and out["n_iter"] < f32.max_iter
    assert out["converged"]  # stopped by the gradient or a stalled loss, not the budget
    # and a probe on shuffled labels cannot generalise: chance level on the test set
    perm = torch.randperm(300, generator=g)
    shuffled = linear_probe_accuracy(x_train, y_train[perm], x_test, y_test)
    assert shuffled["test_top1"] < 0.45


def test_deterministic_and_dead_dimensions_are_harmless():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(50, 4, generator=g)
    x[:, 2] = 3.0  # a dead unit: zero std must not give NaN
    y = (x[:, 0] > 0).long()
    a = fit_linear_probe(x, y)
    b = fit_linear_probe(x.clone(), y.clone())
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    assert torch.isfinite(a.weight).all() and a.weight[:, 2].abs().max() == 0
    assert a.accuracy(x, y) == 1.0
    capped = fit_linear_probe(x, y, config=LinearProbeConfig(max_iter=2))
    assert capped.n_iter <= 2 and capped.stopped == "max_iter" and not capped.converged


def test_error_paths():
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    with pytest.raises(ValueError, match=r"train labels must have shape \(10,\)"):
        fit_linear_probe(x, y[:4])
    with pytest.raises(ValueError, match="different widths: 3 vs 2"):
        linear_probe_accuracy(x, y, torch.randn(4, 2), y[:4])
    with pytest.raises(ValueError, match="num_classes = 1 but the labels go up to 1"):
        fit_linear_probe(x, torch.arange(10) % 2, num_classes=1)
    bad = x.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="1 train feature rows contain NaN"):
        fit_linear_probe(bad, y)
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        LinearProbeConfig(weight_decay=-1.0)
    with pytest.raises(ValueError, match=r"features must have shape \(N, 3\)"):
        fit_linear_probe(x, y).predict(torch.randn(2, 5))


def test_the_class_count_of_two_splits_covers_the_labels_of_either():
    x = torch.zeros(4, 2)
    assert split_class_count(x, torch.tensor([0, 1, 2, 2]), x, torch.tensor([4, 0, 0, 1]), None) == 5
    assert split_class_count(x, torch.tensor([0, 3, 0, 0]), x, torch.tensor([1, 0, 0, 1]), None) == 4
    assert split_class_count(x, torch.tensor([0, 3, 0, 0]), x, torch.tensor([1, 0, 0, 1]), 7) == 7


def _fit_by_autograd(x: torch.Tensor, y: torch.Tensor, c: int, config: LinearProbeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe as it was fitted before its gradient was written in closed form: the same L-BFGS on the
    autograd gradient of F.cross_entropy + (λ/2)‖W‖² (the reference the closed form must reproduce)."""
    x = x.to(config.dtype)
    mean, std = standardize_stats(x)
    xs = (x - mean) / std
    w = torch.zeros(c, xs.shape[1], dtype=config.dtype, requires_grad=True)
    b = torch.zeros(c, dtype=config.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=config.max_iter, max_eval=2 * config.max_iter,
                            tolerance_grad=config.tolerance_grad, tolerance_change=config.tolerance_change,
                            history_size=config.history_size, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(xs @ w.T + b, y) + 0.5 * config.weight_decay * w.pow(2).sum()
        loss.backward()
        return loss
    with torch.enable_grad():
        opt.step(closure)
    return w.detach(), b.detach()


def test_the_closed_form_gradient_is_autograds_and_fits_the_probe_autograd_fitted():
    """probe_objective's gradient against autograd of the same objective at random points (float64, 1e-12),
    and the fitted probe against the autograd-fitted one: the same L-BFGS path to round-off, so the same
    weights (1e-6 relative: the path's round-off compounded over hundreds of iterations) and predictions."""
    g = torch.Generator().manual_seed(0)
    n, d, c = 300, 12, 4
    xs = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randint(0, c, (n,), generator=g)
    onehot = F.one_hot(y, c).double()
    for _ in range(3):
        w = torch.randn(c, d, generator=g, dtype=torch.float64, requires_grad=True)
        b = torch.randn(c, generator=g, dtype=torch.float64, requires_grad=True)
        ref = F.cross_entropy(xs @ w.T + b, y) + 0.5 * 1e-3 * w.pow(2).sum()
        gw, gb = torch.autograd.grad(ref, (w, b))
        loss, cw, cb = probe_objective(xs, onehot, w.detach(), b.detach(), 1e-3)
        torch.testing.assert_close(loss, ref.detach(), rtol=1e-12, atol=0)
        torch.testing.assert_close(cw, gw, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(cb, gb, rtol=1e-12, atol=1e-14)
    config = LinearProbeConfig()
    for shift in (0.5, 3.0):  # overlapping classes, and nearly separable ones
        centres = torch.randn(c, d, generator=g, dtype=torch.float64) * shift
        x = (centres[y] + torch.randn(n, d, generator=g, dtype=torch.float64)).float()
        probe = fit_linear_probe(x, y, c, config)
        w_ref, b_ref = _fit_by_autograd(x, y, c, config)
        assert float((probe.weight - w_ref).norm() / w_ref.norm()) < 1e-6
        assert float((probe.bias - b_ref).norm() / max(float(b_ref.norm()), 1e-12)) < 1e-5
        xs_ref = (x.double() - probe.mean) / probe.std
        assert torch.equal(probe.predict(x), (xs_ref @ w_ref.T + b_ref).argmax(dim=1))

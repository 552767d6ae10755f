"""RankMe and representation statistics (headgeom.eval.rankme) against numpy formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headgeom.eval.rankme import (RANKME_EPS, covariance_condition, rankme,
                                  representation_stats, spread_l2, total_variance_l2)


def rankme_numpy(z: np.ndarray, eps: float = 1e-7) -> float:
    s = np.linalg.svd(z, compute_uv=False)
    p = s / np.abs(s).sum() + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def test_rankme_matches_numpy_svd_formula():
    rng = np.random.default_rng(0)
    for n, d in [(50, 8), (6, 20), (40, 40)]:
        z = rng.normal(size=(n, d)) @ np.diag(rng.uniform(0.01, 3, d))
        assert rankme(torch.from_numpy(z)) == pytest.approx(rankme_numpy(z), rel=1e-10)
        assert rankme(torch.from_numpy(z).float()) == pytest.approx(rankme_numpy(z), rel=1e-5)
    assert RANKME_EPS == 1e-7


def test_rankme_of_known_spectra():
    # rank-r matrix with equal singular values: RankMe = r up to the eps shift
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(30, 30)))
    z = q[:, :3] @ np.eye(3, 10) * 2.5
    p = np.array([1 / 3 + 1e-7] * 3 + [1e-7] * 7)  # 10 singular values, 7 of them zero
    expected = math.exp(-np.sum(p * np.log(p)))
    assert rankme(torch.from_numpy(z)) == pytest.approx(expected, rel=1e-9)
    assert abs(expected - 3.0) < 1e-4
    assert rankme(torch.zeros(5, 4)) == 0.0


def test_spread_and_total_variance_match_numpy():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(64, 16)) + 0.5
    u = z / np.linalg.norm(z, axis=1, keepdims=True)
    assert spread_l2(torch.from_numpy(z)) == pytest.approx(u.std(axis=0, ddof=1).mean(), rel=1e-12)
    assert total_variance_l2(torch.from_numpy(z)) == pytest.approx(
        np.trace(np.cov(u, rowvar=False)), rel=1e-12)
    collapsed = np.tile(rng.normal(size=(1, 16)), (10, 1)) * rng.uniform(1, 2, size=(10, 1))
    assert spread_l2(torch.from_numpy(collapsed)) < 1e-12  # same direction, different scale


def test_condition_number_ignores_null_eigenvalues_when_n_le_d():
    rng = np.random.default_rng(3)
    n, d = 12, 40  # covariance of rank <= 11 in 40 dimensions
    z = rng.normal(size=(n, d)) * np.linspace(1, 3, d)
    lam = np.linalg.eigvalsh(np.cov(z, rowvar=False))
    rtol = 1e-6
    kept = lam[lam > rtol * lam.max()]
    out = covariance_condition(torch.from_numpy(z), rtol=rtol)
    assert out["n_kept"] == len(kept) == n - 1
    assert out["cond"] == pytest.approx(kept.max() / kept.min(), rel=1e-8)
    # the pitfall: clamping the zero eigenvalues at 1e-7 would report lambda_max * 1e7
    assert out["cond"] < 1e3 < lam.max() / max(lam.min(), 1e-7)
    # n > d agrees with numpy over the full spectrum
    z2 = rng.normal(size=(200, 6)) * np.array([1, 1, 1, 1, 1, 10.0])
    lam2 = np.linalg.eigvalsh(np.cov(z2, rowvar=False))
    out2 = covariance_condition(torch.from_numpy(z2))
    assert out2["n_kept"] == 6 and out2["cond"] == pytest.approx(lam2.max() / lam2.min(), rel=1e-9)
    # a larger tolerance drops the small eigenvalues it says it drops
    z3 = np.concatenate([rng.normal(size=(100, 3)), 1e-4 * rng.normal(size=(100, 2))], axis=1)
    lam3 = np.linalg.eigvalsh(np.cov(z3, rowvar=False))
    out3 = covariance_condition(torch.from_numpy(z3), rtol=1e-4)
    assert out3["n_kept"] == 3
    assert out3["cond"] == pytest.approx(lam3[-1] / lam3[-3], rel=1e-9)


def test_constant_features_and_errors():
    out = covariance_condition(torch.ones(5, 3))
    assert math.isnan(out["cond"]) and out["n_kept"] == 0
    stats = representation_stats(torch.randn(30, 4, generator=torch.Generator().manual_seed(0)))
    assert set(stats) >= {"rankme", "spread_l2", "total_variance_l2", "cov_cond", "cov_n_kept"}
    with pytest.raises(ValueError, match="need at least 2 samples"):
        spread_l2(torch.randn(1, 3))
    with pytest.raises(ValueError, match="2-D"):
        rankme(torch.randn(3))
    with pytest.raises(ValueError, match="rtol must be in"):
        covariance_condition(torch.randn(4, 3), rtol=1.5)
    with pytest.raises(ValueError, match="non-finite"):
        rankme(torch.tensor([[float("inf"), 0.0]]))

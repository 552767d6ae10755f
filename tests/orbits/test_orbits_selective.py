"""Selective orbit metrics (headgeom.orbits.selective and their place in analyze_orbit_features):
global spread, mean pairwise cosine, selectivity and centred spreads against hand computations
and numpy formulas written here, on the images each bootstrap replicate draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bootstrap_reference import bca_by_hand
from headgeom.orbits import analyze_orbit_features
from headgeom.orbits.bootstrap import bootstrap_counts, bootstrap_indices
from headgeom.orbits.extract import OrbitFeatures
from headgeom.orbits.selective import (centred_spread, global_spread, global_spread_from_parts,
                                       mean_pairwise_cosine)


# ---- numpy references: the definitions, applied to stacked orbit points

def unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x / np.where(n > 0, n, 1.0), 0.0)


def spread_np(f: np.ndarray) -> np.ndarray:
    """Per-orbit (1/K) Σ_k ‖u_k − ū‖², u = f/‖f‖."""
    u = unit(f)
    return ((u - u.mean(axis=1, keepdims=True)) ** 2).sum(axis=(1, 2)) / f.shape[1]


def global_np(f: np.ndarray) -> float:
    u = unit(f).reshape(-1, f.shape[-1])
    return float(((u - u.mean(axis=0)) ** 2).sum(axis=1).mean())


def pairwise_cos_np(f: np.ndarray) -> float:
    u = unit(f).reshape(-1, f.shape[-1])
    g = u @ u.T
    m = g.shape[0]
    return float((g.sum() - np.trace(g)) / (m * (m - 1)))


def centred_np(f: np.ndarray) -> np.ndarray:
    """Per-orbit spread of (f − μ)/‖f − μ‖, μ the mean of every orbit point."""
    return spread_np(f - f.reshape(-1, f.shape[-1]).mean(axis=0))


def cloud(n=9, k=6, d=5, seed=0, offset=4.0) -> torch.Tensor:
    """Orbits around class-like centres, offset from the origin (a non-centred cloud)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, d)) + offset
    f = centres[np.arange(n) % 3][:, None] + 0.4 * rng.normal(size=(n, k, d))
    return torch.from_numpy(f)


# ---- hand computations

def test_global_spread_of_a_hand_example():
    # orbit A: e1, e2; orbit B: e1, 2·e1 (normalised: e1, e1). All points: e1, e2, e1, e1;
    # mean (3e1 + e2)/4; squared distances 1/8 (three e1) and 9/8 (e2): global = (3/8 + 9/8)/4.
    f = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [2.0, 0.0]]], dtype=torch.float64)
    assert float(global_spread(f)[0]) == pytest.approx(3 / 8, rel=1e-14)
    # weights (2, 0): two copies of A only: points e1, e2, e1, e2, mean (e1+e2)/2, each at 1/2
    assert float(global_spread(f, torch.tensor([[2.0, 0.0]]))[0]) == pytest.approx(0.5, rel=1e-14)
    # pairs of distinct points: cos(e1, e2) = 0 (3 pairs), cos(e1, e1) = 1 (3 pairs): mean 1/2
    cos = mean_pairwise_cosine(global_spread(f), torch.ones(2), 2)
    assert float(cos[0]) == pytest.approx(0.5, rel=1e-14)


def test_centred_spread_of_a_hand_example_ignores_where_the_cloud_sits():
    # orbits (10, ±1) and (−10, ±1) in R²: mean 0, u = (±10, ±1)/√101, each orbit's two points
    # differ by 2/√101, so its spread is (1/K)Σ‖u_k − ū‖² = 2 · (1/√101)² / 2 = 1/101.
    base = torch.tensor([[[10.0, 1.0], [10.0, -1.0]], [[-10.0, 1.0], [-10.0, -1.0]]], dtype=torch.float64)
    for shift in (0.0, 100.0, -3e4):
        f = base + torch.tensor([0.0, shift], dtype=torch.float64)
        per, mean = centred_spread(f)
        assert per.tolist() == pytest.approx([1 / 101, 1 / 101], rel=1e-12)
        assert float(mean[0]) == pytest.approx(1 / 101, rel=1e-12)
    # uncentred, the shifted cloud's angular spread is tiny (all points near (0, 1))
    assert spread_np((base + torch.tensor([0.0, 100.0], dtype=torch.float64)).numpy()).max() < 1e-3


def test_centred_spread_resolves_a_tiny_orbit():
    # two full circles of radius r in the (e1, e2) plane around ±a·e3: the cloud mean is 0 and
    # every centred point has norm √(a² + r²), so each spread is r² / (a² + r²) exactly
    theta = np.deg2rad(np.arange(0, 360, 30))
    for r in (1e-2, 1e-5, 1e-7):
        ring = np.stack([r * np.cos(theta), r * np.sin(theta), np.zeros_like(theta)], axis=1)
        f = torch.from_numpy(np.stack([ring + [0, 0, 1.0], ring - [0, 0, 1.0]]))
        per, _ = centred_spread(f)
        assert per.tolist() == pytest.approx([r**2 / (1 + r**2)] * 2, rel=1e-6)


# ---- against numpy on every bootstrap replicate (the images drawn, repeats included)

def test_weighted_statistics_equal_recomputation_on_the_drawn_images():
    f = cloud()
    idx = bootstrap_indices(9, 6, seed=3)
    counts = bootstrap_counts(idx, 9)
    g = global_spread(f, counts)
    per, cen = centred_spread(f, counts)
    assert per.numpy() == pytest.approx(centred_np(f.numpy()), rel=1e-12)
    u = unit(f.numpy())
    parts = global_spread_from_parts(torch.from_numpy(spread_np(f.numpy())),
                                     torch.from_numpy(u.mean(axis=1)), counts)
    cos = mean_pairwise_cosine(g, torch.ones(9), 6, counts)
    for b in range(6):
        drawn = f.numpy()[idx[b].numpy()]
        assert float(g[b]) == pytest.approx(global_np(drawn), rel=1e-12)
        assert float(parts[b]) == pytest.approx(global_np(drawn), rel=1e-12)
        assert float(cos[b]) == pytest.approx(pairwise_cos_np(drawn), rel=1e-12)
        assert float(cen[b]) == pytest.approx(centred_np(drawn).mean(), rel=1e-12)


def test_zero_rows_count_as_zero_vectors():
    f = cloud(n=4, k=3, d=3)
    f[1, 2] = 0.0  # a layer that outputs exact zeros for one input
    frac = torch.tensor([1.0, 2 / 3, 1.0, 1.0], dtype=torch.float64)
    assert float(mean_pairwise_cosine(global_spread(f), frac, 3)[0]) == \
        pytest.approx(pairwise_cos_np(f.numpy()), rel=1e-12)
    g = f.clone()
    g[2, 1] = g.reshape(-1, 3).mean(dim=0)  # a point exactly at the cloud's mean
    per, _ = centred_spread(g)
    assert per.numpy() == pytest.approx(centred_np(g.numpy()), rel=1e-10)


def test_errors():
    f = cloud(n=3, k=2, d=2)
    with pytest.raises(ValueError, match=r"shape \(B, 3\)"):
        global_spread(f, torch.ones(2, 4))
    with pytest.raises(ValueError, match="non-negative"):
        centred_spread(f, torch.tensor([[1.0, -1.0, 3.0]]))
    with pytest.raises(ValueError, match="positive sum"):
        global_spread(f, torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"\(N images, K steps, D\)"):
        centred_spread(f[0])


# ---- in the analysis: ratios jointly resampled, and the out-of-distribution flag

def _features() -> OrbitFeatures:
    z = cloud(n=10, k=4, d=6, seed=1)
    w = torch.from_numpy(np.random.default_rng(5).normal(size=(6, 8)))
    h = torch.relu(z @ w)  # a non-centred map whose orbits and cloud shrink differently
    h_l2 = torch.tanh(0.2 * (z / z.norm(dim=-1, keepdim=True)) @ w + 3.0)  # nearly one point
    return OrbitFeatures(family="rotation", xi=[0.0, 1.0, 2.0, 3.0], identity_value=0.0, units="deg",
                         features={"z": z, "head.0": h, "l2z/head.0": h_l2}, anchors={},
                         anchor_step=None)


def _ratios_np(fz: np.ndarray, fp: np.ndarray) -> dict[str, float]:
    comp = spread_np(fz).mean() / spread_np(fp).mean()
    glob = global_np(fz) / global_np(fp)
    return {"compression": comp, "global_ratio": glob, "selectivity": comp / glob,
            "compression_centred": centred_np(fz).mean() / centred_np(fp).mean()}


def test_selectivity_and_centred_compression_in_the_analysis():
    of = _features()
    labels = torch.arange(10) % 3
    res = analyze_orbit_features(of, labels, n_boot=60, seed=2, level=0.8)
    idx = bootstrap_indices(10, 60, 2, strata=labels)  # the analysis' own resamples
    feats = {p: f.numpy() for p, f in of.features.items()}
    for p in ("head.0", "l2z/head.0"):
        r = res["ratios"][p]
        assert list(r)[:4] == ["compression", "global_ratio", "selectivity", "compression_centred"]
        want = _ratios_np(feats["z"], feats[p])
        reps = [_ratios_np(feats["z"][i], feats[p][i]) for i in idx.numpy()]
        jack = [_ratios_np(feats["z"][i], feats[p][i]) for i in (np.delete(np.arange(10), j) for j in range(10))]
        for key, value in want.items():
            assert r[key]["value"] == pytest.approx(value, rel=1e-10), (p, key)
            ci, _, _ = bca_by_hand(value, [x[key] for x in reps], [x[key] for x in jack], labels.numpy(), 0.8)
            assert r[key]["ci"] == pytest.approx(ci, rel=1e-9), (p, key)
        pts = res["points"][p]
        assert pts["mean_pairwise_cosine"]["value"] == pytest.approx(pairwise_cos_np(feats[p]), rel=1e-12)
        assert pts["spread_centred"]["value"] == pytest.approx(centred_np(feats[p]).mean(), rel=1e-12)
    assert res["points"]["z"]["norm"]["value"] == pytest.approx(
        np.linalg.norm(feats["z"], axis=-1).mean(), rel=1e-12)
    assert res["anchor"] == "none given (alignment not computed)"


def test_heads_fed_normalised_z_are_flagged_with_their_pairwise_cosine():
    res = analyze_orbit_features(_features(), n_boot=20)
    ood = res["out_of_distribution"]
    assert list(ood["points"]) == ["l2z/head.0"]  # the raw-input head is not flagged
    entry = ood["points"]["l2z/head.0"]
    assert entry["mean_pairwise_cosine"] == res["points"]["l2z/head.0"]["mean_pairwise_cosine"]
    assert entry["mean_pairwise_cosine"]["value"] > 0.99  # the map sends everything near one point
    assert entry["raw_input_point"] == "head.0"
    assert entry["raw_input_mean_pairwise_cosine"] == res["points"]["head.0"]["mean_pairwise_cosine"]
    assert ood["z_norm"] == res["points"]["z"]["norm"] and "trained on raw z" in ood["why"]
    # told that no head was fed z/‖z‖ (e.g. external arrays of unknown provenance): no flag
    assert "out_of_distribution" not in analyze_orbit_features(_features(), n_boot=20, l2_fed_points=[])

"""Percentile bootstrap over images (headgeom.orbits.bootstrap): coverage, seeds, joint ratios."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headgeom.orbits import metrics as M
from headgeom.orbits.bootstrap import (bootstrap_counts, bootstrap_indices, ci_mean, ci_ratio,
                                       ci_statistic, percentile_ci, replicate_means)


def test_indices_are_reproducible_by_seed_and_stratified_by_class():
    a = bootstrap_indices(30, 50, seed=3)
    assert torch.equal(a, bootstrap_indices(30, 50, seed=3))
    assert not torch.equal(a, bootstrap_indices(30, 50, seed=4))
    assert a.shape == (50, 30) and int(a.min()) >= 0 and int(a.max()) < 30
    labels = torch.tensor([0] * 5 + [1] * 10 + [2] * 15)
    s = bootstrap_indices(30, 200, seed=0, strata=labels)
    assert torch.equal(labels[s], labels.expand(200, 30))  # every draw keeps its position's class
    assert len(torch.unique(s[:, :5])) == 5  # draws range over the class's members
    counts = bootstrap_counts(s, 30)
    assert torch.equal(counts.sum(dim=1), torch.full((200,), 30.0, dtype=torch.float64))


def test_percentile_interval_matches_numpy_and_skips_undefined_replicates():
    x = torch.from_numpy(np.random.default_rng(0).normal(size=1001))
    lo, hi = percentile_ci(x, 0.9)
    assert lo == pytest.approx(np.quantile(x.numpy(), 0.05), rel=1e-12)
    assert hi == pytest.approx(np.quantile(x.numpy(), 0.95), rel=1e-12)
    y = torch.cat([x, torch.tensor([float("nan")] * 10)])
    assert percentile_ci(y, 0.9) == (lo, hi)
    with pytest.raises(ValueError, match="level"):
        percentile_ci(x, 95)


def test_replicate_means_equal_explicit_resampling_and_ignore_nan_images():
    g = torch.Generator().manual_seed(1)
    v = torch.rand(12, generator=g, dtype=torch.float64)
    v[3] = float("nan")
    idx = bootstrap_indices(12, 40, seed=2)
    got = replicate_means(v, bootstrap_counts(idx, 12))
    want = torch.nanmean(v[idx], dim=1)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


def coverage(n_sets: int, make, stat_ci, truth: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for i in range(n_sets):
        lo, hi = stat_ci(*make(rng), i)
        hits += lo <= truth <= hi
    return hits / n_sets


def test_ci_of_a_mean_covers_the_true_value_at_about_the_stated_level():
    # per-image values from Exp(1) + 2 (skewed): true mean 3. 300 data sets of 60 images, B = 400.
    cov = coverage(300, lambda r: (torch.from_numpy(r.exponential(size=60) + 2.0),),
                   lambda v, i: ci_mean(v, bootstrap_indices(60, 400, seed=i))["ci"], 3.0, seed=0)
    assert 0.89 <= cov <= 0.99, cov


def test_ci_of_a_ratio_covers_the_true_ratio_and_resamples_jointly():
    # num = 2·den + noise per image: the ratio of means is 2 + E[noise]/E[den] = 2
    def make(r):
        den = r.uniform(0.5, 1.5, size=80)
        return torch.from_numpy(2 * den + r.normal(scale=0.3, size=80)), torch.from_numpy(den)

    cov = coverage(300, make, lambda a, b, i: ci_ratio(a, b, bootstrap_indices(80, 400, seed=i))["ci"],
                   2.0, seed=1)
    assert 0.89 <= cov <= 0.99, cov
    # num ≡ 3·den image by image: a jointly resampled ratio is 3 in every replicate
    den = torch.from_numpy(np.random.default_rng(2).uniform(0.1, 5, size=50))
    est = ci_ratio(3 * den, den, bootstrap_indices(50, 300, seed=0))
    assert est["value"] == pytest.approx(3.0, rel=1e-12)
    assert est["ci"][0] == pytest.approx(3.0, rel=1e-12) and est["ci"][1] == pytest.approx(3.0, rel=1e-12)
    # independent resampling would spread it: the same data with shuffled denominators does
    shuffled = ci_ratio(3 * den, den[torch.randperm(50, generator=torch.Generator().manual_seed(0))],
                        bootstrap_indices(50, 300, seed=0))
    assert shuffled["ci"][1] - shuffled["ci"][0] > 0.1


def test_estimates_are_reproducible_by_seed():
    v = torch.from_numpy(np.random.default_rng(3).normal(size=40))
    a = ci_mean(v, bootstrap_indices(40, 200, seed=7))
    assert a == ci_mean(v, bootstrap_indices(40, 200, seed=7))
    assert a["ci"] != ci_mean(v, bootstrap_indices(40, 200, seed=8))["ci"]
    assert a["n_boot"] == 200 and a["level"] == 0.95 and a["n_boot_undefined"] == 0


def test_ci_statistic_d_inter_equals_explicit_resampling():
    g = torch.Generator().manual_seed(4)
    f = torch.randn(12, 4, 6, generator=g, dtype=torch.float64)
    labels = torch.arange(12) % 3
    idx = bootstrap_indices(12, 25, seed=5, strata=labels)
    est = ci_statistic(lambda w: M.class_centroid_distance(f, labels, weights=w), 12, idx)
    explicit = torch.stack([M.class_centroid_distance(f[i], labels[i]) for i in idx])
    assert est["value"] == pytest.approx(float(M.class_centroid_distance(f, labels)), rel=1e-12)
    lo, hi = percentile_ci(explicit)
    assert est["ci"] == [pytest.approx(lo, rel=1e-10), pytest.approx(hi, rel=1e-10)]


def test_errors():
    with pytest.raises(ValueError, match="positive int"):
        bootstrap_indices(5, 0, seed=0)
    with pytest.raises(ValueError, match="at least one image"):
        bootstrap_indices(0, 10, seed=0)
    with pytest.raises(ValueError, match="one entry per image"):
        bootstrap_indices(5, 10, seed=0, strata=torch.zeros(4))
    with pytest.raises(ValueError, match="shape \\(5,\\)"):
        ci_mean(torch.zeros(4), bootstrap_indices(5, 10, seed=0))

"""BCa bootstrap over images (headgeom.orbits.bootstrap): the interval against formulas written
here (scipy's normal quantiles, explicit leave-one-out loops) and scipy.stats.bootstrap, the
percentile case, intervals that contain their estimate, coverage, seeds, joint ratios, and the
authors' released ResNet-18 orbits (skipped without $HEADGEOM_RELEASED)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from headgeom.orbits import metrics as M
from headgeom.orbits.bootstrap import (Resamples, acceleration, bootstrap_counts, bootstrap_indices,
                                       ci_mean, ci_ratio, ci_statistic, estimate, jackknife_weights,
                                       percentile_ci, replicate_means)
from bootstrap_reference import bca_by_hand
from real_data import released_results

ANALYZE_DOC = Path(__file__).resolve().parents[2] / "docs" / "analyze.md"  # the conversion users copy


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


def test_ci_statistic_d_inter_equals_explicit_resampling_and_textbook_bca():
    g = torch.Generator().manual_seed(4)
    f = torch.randn(12, 4, 6, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 1, 2] * 3 + [0, 0, 1])  # strata of 5, 4 and 3 images
    idx = bootstrap_indices(12, 200, seed=5, strata=labels)
    est = ci_statistic(lambda w: M.class_centroid_distance(f, labels, weights=w), 12, idx, strata=labels)
    value = float(M.class_centroid_distance(f, labels))
    explicit = np.array([float(M.class_centroid_distance(f[i], labels[i])) for i in idx])
    jack = [float(M.class_centroid_distance(f[torch.arange(12) != j], labels[torch.arange(12) != j]))
            for j in range(12)]
    (lo, hi), z0, a = bca_by_hand(value, explicit, jack, labels.numpy())
    assert est["value"] == pytest.approx(value, rel=1e-12)
    assert est["z0"] == pytest.approx(z0, rel=1e-10) and est["acceleration"] == pytest.approx(a, rel=1e-8)
    assert est["ci"] == [pytest.approx(lo, rel=1e-10), pytest.approx(hi, rel=1e-10)]
    assert est["method"] == "BCa" and "ci_undefined" not in est


def test_stratified_acceleration_weights_strata_by_their_sizes():
    t = np.random.default_rng(6).exponential(size=9)
    strata = np.array([0] * 6 + [1] * 3)
    ls = [(n - 1) * (v.mean() - v) for v in (t[:6], t[6:]) for n in [len(v)]]
    want = (((ls[0]**3).sum() / 216 + (ls[1]**3).sum() / 27)
            / (6 * ((ls[0]**2).sum() / 36 + (ls[1]**2).sum() / 9) ** 1.5))
    assert acceleration(torch.from_numpy(t), torch.from_numpy(strata)) == pytest.approx(want, rel=1e-12)
    # one stratum: Efron's a = sum d^3 / (6 (sum d^2)^1.5), d = mean - t (the (n - 1) factors cancel)
    d = t.mean() - t
    assert acceleration(torch.from_numpy(t)) == pytest.approx((d**3).sum() / (6 * (d**2).sum() ** 1.5), rel=1e-12)
    # a stratum of one image has nothing to resample: it sits out (its value may be NaN)
    t1 = np.append(t[:6], np.nan)
    assert acceleration(torch.from_numpy(t1), torch.tensor([0] * 6 + [1])) == pytest.approx(
        acceleration(torch.from_numpy(t[:6])), rel=1e-12)
    assert np.isnan(acceleration(torch.from_numpy(t1)))  # a NaN inside a stratum: undefined


def test_bca_of_a_skewed_mean_agrees_with_scipy_bootstrap():
    x = np.random.default_rng(7).lognormal(sigma=1.0, size=25)
    ours = ci_mean(torch.from_numpy(x), bootstrap_indices(25, 40000, seed=0))
    ref = stats.bootstrap((x,), np.mean, n_resamples=40000, method="BCa", random_state=1).confidence_interval
    width = ref.high - ref.low
    assert ours["ci"][0] == pytest.approx(ref.low, abs=0.05 * width)
    assert ours["ci"][1] == pytest.approx(ref.high, abs=0.05 * width)
    # and BCa moved both ends up from the percentile interval (right skew: a > 0)
    lo, hi = percentile_ci(replicate_means(torch.from_numpy(x), bootstrap_counts(bootstrap_indices(25, 40000, 0), 25)))
    assert ours["acceleration"] > 0 and ours["ci"][0] > lo and ours["ci"][1] > hi


def test_bca_equals_the_percentile_interval_without_bias_or_acceleration():
    rng = np.random.default_rng(8)
    half = rng.normal(size=500) ** 2 + 0.1
    boot = torch.from_numpy(np.concatenate([2.0 - half, 2.0 + half]))  # symmetric about the estimate 2
    jack = torch.from_numpy(np.concatenate([2.0 - half[:20], 2.0 + half[:20]]))  # skewness 0: a = 0
    est = estimate(2.0, boot, 0.9, jackknife=jack)
    assert est["z0"] == 0.0 and est["acceleration"] == pytest.approx(0.0, abs=1e-15)
    assert est["ci"] == [pytest.approx(c, rel=1e-12) for c in percentile_ci(boot, 0.9)]


def test_bca_moves_against_the_bias_that_moves_the_percentile_interval():
    # the norm of a mean vector is biased upward in resamples: the percentile interval sits high
    x = torch.from_numpy(np.random.default_rng(9).normal(0.25, 1.0, size=(20, 5)))
    idx = bootstrap_indices(20, 4000, seed=1)
    est = ci_statistic(lambda w: ((w @ x) / w.sum(dim=1, keepdim=True)).norm(dim=1), 20, idx)
    lo, hi = percentile_ci(x[idx].mean(dim=1).norm(dim=1))
    assert est["z0"] < 0 and est["ci"][0] < lo and est["ci"][1] < hi
    assert est["ci"][0] <= est["value"] <= est["ci"][1]


def _d_inter_of_three_per_class(seed: int) -> tuple[dict, tuple[float, float]]:
    """D_inter of 5 classes x 3 images whose class means are close (centroid noise dominates):
    the BCa estimate and the percentile interval of the same resamples."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(15) // 3
    f = torch.randn(15, 4, 8, generator=g, dtype=torch.float64) + 0.3 * torch.randn(5, 1, 8, generator=g,
                                                                                      dtype=torch.float64)[labels]
    idx = bootstrap_indices(15, 1000, seed=seed, strata=labels)
    stat = lambda w: M.class_centroid_distance(f, labels, weights=w)  # noqa: E731
    return ci_statistic(stat, 15, idx, strata=labels), percentile_ci(stat(bootstrap_counts(idx, 15)))


def test_every_interval_contains_its_estimate_and_a_bias_dominated_one_is_undefined():
    outside = inside = 0
    for seed in range(12):
        est, (lo, hi) = _d_inter_of_three_per_class(seed)
        v = est["value"]
        if lo <= v <= hi:  # the percentile interval holds its estimate: BCa's does too
            inside += 1
            assert est["ci"][0] <= v <= est["ci"][1] and "ci_undefined" not in est
        else:  # it does not (the audit's case): no interval is reported, and the reason says why
            outside += 1
            assert np.isnan(est["ci"]).all() and est["ci_undefined"].startswith("bias-dominated")
    assert outside >= 2 and inside >= 2  # both cases occur among these samples


def test_resamples_stack_bootstrap_and_leave_one_out_rows():
    counts = bootstrap_counts(bootstrap_indices(6, 10, seed=0), 6)
    rs = Resamples(counts, torch.tensor([0, 0, 0, 1, 1, 1]))
    assert rs.weights.shape == (16, 6) and rs.n_boot == 10
    torch.testing.assert_close(rs.weights[10:], jackknife_weights(6))
    assert torch.equal(jackknife_weights(3), torch.tensor([[0., 1, 1], [1, 0, 1], [1, 1, 0]], dtype=torch.float64))
    v = torch.arange(6, dtype=torch.float64)
    est = rs.estimate(2.5, replicate_means(v, rs.weights))
    assert est == estimate(2.5, replicate_means(v, counts), jackknife=replicate_means(v, jackknife_weights(6)),
                           strata=torch.tensor([0, 0, 0, 1, 1, 1]))
    with pytest.raises(ValueError, match="every row of Resamples.weights"):
        rs.estimate(2.5, replicate_means(v, counts))


def _docs_conversion():
    blocks = re.findall(r"```python\n(.*?)```", ANALYZE_DOC.read_text(encoding="utf-8"), flags=re.S)
    namespace: dict = {}
    exec(compile(next(b for b in blocks if "def authors_orbits_to_npz" in b), "docs/analyze.md", "exec"), namespace)
    return namespace["authors_orbits_to_npz"]


def test_released_resnet18_orbits_get_no_interval_that_excludes_its_estimate(tmp_path):
    from headgeom.orbits.external import analyze_external, load_orbit_npz

    src = released_results() / "results" / "cifar10" / "resnet18" / "orbit_visualization.npy"
    _docs_conversion()(src, tmp_path / "orbits.npz")  # the docs' restricted unpickler: arrays only
    ext = load_orbit_npz(tmp_path / "orbits.npz")
    assert tuple(ext.features["z"].shape[:2]) == (15, 12)  # 5 classes x 3 images, 12 rotations
    fam = analyze_external(ext, "rotation")[0]["families"]["rotation"]
    estimates = [e for p in fam["points"].values() for e in p.values()] + \
        [e for r in fam["ratios"].values() for e in r.values()]
    for e in estimates:
        assert e["method"] == "BCa"
        lo, hi = e["ci"]
        assert (lo <= e["value"] <= hi) or (np.isnan(lo) and np.isnan(hi) and e["ci_undefined"])
    # the audit's case: D_inter's percentile interval lies above its estimate; BCa reports none
    n = 15
    counts = bootstrap_counts(bootstrap_indices(n, 1000, 0, strata=ext.labels), n)
    means = M.per_image_metrics(ext.features["z"], None)["orbit_means"]
    lo, hi = percentile_ci(M.centroid_distance_from_means(means, ext.labels, counts))
    d_inter = fam["points"]["z"]["d_inter"]
    assert d_inter["value"] < lo and d_inter["ci_undefined"].startswith("bias-dominated")
    # C9's class_orbit_change (jointly resampled, the bias largely cancels) keeps a defined interval
    change = fam["ratios"]["h"]["class_orbit_change"]
    assert change["ci"][0] < change["value"] < change["ci"][1]


def test_errors():
    with pytest.raises(ValueError, match="positive int"):
        bootstrap_indices(5, 0, seed=0)
    with pytest.raises(ValueError, match="at least one image"):
        bootstrap_indices(0, 10, seed=0)
    with pytest.raises(ValueError, match="one entry per image"):
        bootstrap_indices(5, 10, seed=0, strata=torch.zeros(4))
    with pytest.raises(ValueError, match="shape \\(5,\\)"):
        ci_mean(torch.zeros(4), bootstrap_indices(5, 10, seed=0))


def test_reports_say_why_an_interval_is_missing():
    from headgeom.orbits.report import fmt_estimate

    est = next(e for e, _ in map(_d_inter_of_three_per_class, range(12)) if e.get("ci_undefined"))
    assert fmt_estimate(est) == f"{est['value']:.4g} [no CI: bias-dominated]"
    assert fmt_estimate({"value": 2.0, "ci": [1.5, 2.5]}) == "2 [1.5, 2.5]"

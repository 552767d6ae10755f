"""Orbit metrics (headgeom.orbits.metrics) against closed forms and separate numpy formulas.

The reference orbit: p_k = c + r (cos θ_k e1 + sin θ_k e2) with c ⟂ span(e1, e2) in R^D
(a rotation in a plane, offset from the origin). With μ = (1/K) Σ_k e^{iθ_k}:
  mean point        p̄ = c + r (Re μ e1 + Im μ e2)
  spread            (1/K) Σ ‖p_k − p̄‖² = r² (1 − |μ|²)          (cos² + sin² = 1)
  L2-normalised     ‖p_k‖ = ρ = √(‖c‖² + r²) for every k, so u = p/ρ is the same circle
                    with radius r/ρ: spread_l2 = (r/ρ)² (1 − |μ|²)
  D_intra           mean_{k<l} ‖p_k − p_l‖ = mean_{k<l} 2r |sin((θ_k − θ_l)/2)|
  equal steps δ     p_{k+1} − 2p_k + p_{k−1} = r e^{iθ_k}(e^{iδ} − 2 + e^{−iδ}), norm 2r(1 − cos δ)
                    = 4 r sin²(δ/2); chords 2r sin(δ/2), turning angle δ, so the arc-length
                    curvature 2 sin(δ/2) / (2r sin(δ/2)) = 1/r, and times the arc length
                    (K − 1)·2r sin(δ/2) it is (K − 1)·2 sin(δ/2)
  alignment         cos(p_k, p_0) = (‖c‖² + r² cos(θ_k − θ_0)) / ρ²
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headgeom.orbits import metrics as M

RTOL = 1e-10  # float64 throughout


def frame(d: int, seed: int) -> np.ndarray:
    """Three orthonormal vectors in R^d (rows): e1, e2 span the plane, e3 carries the offset c."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, 3)))
    return q.T


def circle_orbit(r: float, c: float, thetas: np.ndarray, d: int, seed: int) -> np.ndarray:
    e1, e2, e3 = frame(d, seed)
    return c * e3 + r * (np.cos(thetas)[:, None] * e1 + np.sin(thetas)[:, None] * e2)


CASES = [  # (r, |c|, θ grid): full-circle 12 steps (the paper's 0-330°), partial arcs
    (2.0, 0.0, np.deg2rad(np.arange(0, 360, 30))),
    (0.5, 3.0, np.deg2rad(np.linspace(0, 45, 12))),
    (1.3, 1.0, np.deg2rad(np.linspace(-60, 100, 12))),
]
D = 9


def orbits(cases=CASES) -> torch.Tensor:
    return torch.from_numpy(np.stack([circle_orbit(r, c, th, D, i) for i, (r, c, th) in
                                      enumerate(cases)]))


def mu(th: np.ndarray) -> complex:
    return complex(np.mean(np.exp(1j * th)))


def test_spread_and_trace_of_a_rotation_orbit_match_the_closed_form():
    f = orbits()
    raw = np.array([r**2 * (1 - abs(mu(th))**2) for r, _, th in CASES])
    l2 = np.array([r**2 / (r**2 + c**2) * (1 - abs(mu(th))**2) for r, c, th in CASES])
    assert raw[0] == pytest.approx(4.0)  # full circle: μ = 0, spread = r²
    np.testing.assert_allclose(M.orbit_spread(f, normalise=False).numpy(), raw, rtol=RTOL)
    np.testing.assert_allclose(M.orbit_spread(f).numpy(), l2, rtol=RTOL)
    k = f.shape[1]
    np.testing.assert_allclose(M.within_orbit_trace(f, normalise=False).numpy(), raw * k / (k - 1),
                               rtol=RTOL)
    np.testing.assert_allclose(M.per_dim_variance(f).numpy(), l2 * k / (k - 1) / D, rtol=RTOL)


def test_d_intra_curvature_alignment_of_a_rotation_orbit():
    f = orbits()
    for i, (r, c, th) in enumerate(CASES):
        pairs = [2 * r * abs(math.sin((a - b) / 2)) for j, a in enumerate(th) for b in th[j + 1:]]
        rho = math.hypot(r, c)
        assert float(M.d_intra(f, normalise=False)[i]) == pytest.approx(np.mean(pairs), rel=RTOL)
        assert float(M.d_intra(f)[i]) == pytest.approx(np.mean(pairs) / rho, rel=RTOL)
        cos = (c**2 + r**2 * np.cos(th - th[0])) / rho**2
        anchor = f[i:i + 1, 0]
        np.testing.assert_allclose(M.anchor_alignment(f[i:i + 1], anchor)[0].numpy(), cos,
                                   rtol=RTOL, atol=1e-12)
    # equal steps δ: raw second difference 4 r sin²(δ/2), arc-length curvature 1/r
    for i in (0, 1):
        r, c, th = CASES[i]
        delta = th[1] - th[0]
        rho = math.hypot(r, c)
        k = len(th)
        assert float(M.curvature_raw(f, normalise=False)[i]) == pytest.approx(
            4 * r * math.sin(delta / 2) ** 2, rel=1e-9)
        assert float(M.curvature_raw(f)[i]) == pytest.approx(4 * r / rho * math.sin(delta / 2) ** 2,
                                                             rel=1e-9)
        assert float(M.curvature_arc(f, normalise=False)[i]) == pytest.approx(1 / r, rel=1e-9)
        assert float(M.curvature_arc(f)[i]) == pytest.approx(rho / r, rel=1e-9)
        scaled = (k - 1) * 2 * math.sin(delta / 2)
        assert float(M.curvature_arc_scaled(f, normalise=False)[i]) == pytest.approx(scaled, rel=1e-9)
        assert float(M.curvature_arc_scaled(f * 7.5, normalise=False)[i]) == pytest.approx(scaled,
                                                                                           rel=1e-9)


def test_arc_curvature_of_a_straight_orbit_is_zero_and_a_repeated_point_is_undefined():
    t = torch.linspace(0, 1, 6, dtype=torch.float64)[:, None]
    line = (torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.float64) + t * torch.tensor([[0.3, -1.0, 2.0]],
                                                                                  dtype=torch.float64))
    assert float(M.curvature_arc(line[None], normalise=False)[0]) == pytest.approx(0.0, abs=1e-7)
    assert float(M.curvature_raw(line[None], normalise=False)[0]) == pytest.approx(0.0, abs=1e-12)
    stuck = line.clone()
    stuck[2] = stuck[1]
    assert math.isnan(float(M.curvature_arc(stuck[None], normalise=False)[0]))


def test_orbit_effective_rank_against_the_planar_covariance():
    f = orbits()
    for i, (r, _, th) in enumerate(CASES):
        xy = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
        lam = np.linalg.eigvalsh(np.cov(xy, rowvar=False))
        p = lam / lam.sum()
        expected = math.exp(-np.sum(p * np.log(p)))
        assert float(M.orbit_effective_rank(f, normalise=False)[i]) == pytest.approx(expected,
                                                                                     rel=1e-9)
    assert float(M.orbit_effective_rank(f, normalise=False)[0]) == pytest.approx(2.0, rel=1e-12)


def test_effective_rank_isotropic_gaussian_and_exact_spectrum():
    x = torch.randn(20000, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert M.effective_rank(x) == pytest.approx(8.0, rel=0.01)
    assert M.effective_rank(x[:5]) <= 4.0 + 1e-9  # 5 samples: covariance rank 4
    # rows ±s_j e_j: covariance exactly diag(2 s_j² / (M − 1)), so p_j ∝ s_j²
    s = np.array([3.0, 1.0, 1.0, 0.5])
    rows = np.concatenate([np.diag(s), -np.diag(s)])
    p = s**2 / np.sum(s**2)
    assert M.effective_rank(torch.from_numpy(rows)) == pytest.approx(math.exp(-np.sum(p * np.log(p))),
                                                                     rel=RTOL)
    assert float(M.effective_rank_from_eigenvalues(torch.tensor([2.0, 2.0, 0.0, -1e-18]))) == \
        pytest.approx(2.0, rel=RTOL)
    assert float(M.effective_rank_from_eigenvalues(torch.zeros(3))) == 0.0


def test_trace_and_per_dimension_ratios_differ_exactly_by_the_dimension_factor():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(7, 5, 16, generator=g, dtype=torch.float64)
    for dh in (16, 64):
        h = torch.randn(7, 5, dh, generator=g, dtype=torch.float64) * 0.1 + 1.0
        for normalise in (True, False):
            tr = float(M.within_orbit_trace(z, normalise).mean() / M.within_orbit_trace(h, normalise).mean())
            pd = float(M.per_dim_variance(z, normalise).mean() / M.per_dim_variance(h, normalise).mean())
            assert pd == pytest.approx(tr * dh / 16, rel=1e-12)
        # on normalised features the trace ratio is the paper's compression (spread) ratio
        comp = float(M.orbit_spread(z).mean() / M.orbit_spread(h).mean())
        assert comp == pytest.approx(float(M.within_orbit_trace(z).mean()
                                           / M.within_orbit_trace(h).mean()), rel=1e-12)


def test_per_image_metrics_agree_with_the_separate_functions():
    g = torch.Generator().manual_seed(2)
    f = torch.randn(6, 7, 11, generator=g).float() + 0.3
    anchor = torch.randn(6, 11, generator=g)
    per = M.per_image_metrics(f, anchor)
    u = f.double() / f.double().norm(dim=-1, keepdim=True)
    d_ref = torch.stack([torch.pdist(o).mean() for o in u])  # torch.pdist: the k < l pairs
    torch.testing.assert_close(per["d_intra"], d_ref, rtol=1e-10, atol=0)
    torch.testing.assert_close(per["spread"], M.orbit_spread(f), rtol=1e-10, atol=0)
    torch.testing.assert_close(per["trace_raw"], M.within_orbit_trace(f, False), rtol=1e-10, atol=0)
    sd = (u[:, 2:] - 2 * u[:, 1:-1] + u[:, :-2]).norm(dim=-1).mean(dim=1)
    torch.testing.assert_close(per["curvature_raw"], sd, rtol=1e-8, atol=0)
    # arc-length curvature directly from unit tangents
    step = u[:, 1:] - u[:, :-1]
    ell = step.norm(dim=-1)
    t = step / ell[..., None]
    kap = ((t[:, 1:] - t[:, :-1]).norm(dim=-1) / (0.5 * (ell[:, 1:] + ell[:, :-1]))).mean(dim=1)
    torch.testing.assert_close(per["curvature_arc"], kap, rtol=1e-8, atol=0)
    cos = torch.nn.functional.cosine_similarity(f.double(), anchor.double()[:, None], dim=-1)
    torch.testing.assert_close(per["alignment"], cos.mean(dim=1), rtol=1e-10, atol=0)
    lam = torch.linalg.eigvalsh(torch.stack([torch.cov(o.T) for o in u]))
    torch.testing.assert_close(per["orbit_effective_rank"], M.effective_rank_from_eigenvalues(lam),
                               rtol=1e-8, atol=0)


def test_class_centroid_distance_and_its_weighted_form():
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(3, 5))
    labels = np.array([0, 0, 1, 1, 1, 2, 2])
    # each orbit is symmetric about its class centre plus a per-image offset that cancels in class
    offs = {0: [0.2, -0.2], 1: [0.1, 0.3, -0.4], 2: [0.5, -0.5]}
    f = []
    seen = {0: 0, 1: 0, 2: 0}
    for y in labels:
        o = offs[y][seen[y]]
        seen[y] += 1
        v = rng.normal(size=5)
        f.append(np.stack([centres[y] + o + v, centres[y] + o - v]))
    f = torch.from_numpy(np.stack(f))
    expected = np.mean([np.linalg.norm(centres[a] - centres[b]) for a in range(3) for b in range(a + 1, 3)])
    got = M.class_centroid_distance(f, torch.from_numpy(labels), normalise=False)
    assert float(got) == pytest.approx(expected, rel=RTOL)
    # weights = explicit resampling
    idx = torch.tensor([[0, 0, 2, 3, 3, 6, 5], [1, 1, 4, 4, 4, 0, 2]])
    counts = torch.zeros(2, 7, dtype=torch.float64).scatter_add_(1, idx, torch.ones(2, 7, dtype=torch.float64))
    weighted = M.class_centroid_distance(f, torch.from_numpy(labels), normalise=False, weights=counts)
    assert float(weighted[0]) == pytest.approx(float(M.class_centroid_distance(
        f[idx[0]], torch.from_numpy(labels)[idx[0]], normalise=False)), rel=RTOL)
    # the second replicate lost class 2 entirely: only the (0, 1) pair counts
    c0 = f[[1, 1, 0]].mean(dim=(0, 1))
    c1 = f[[2, 4, 4, 4]].mean(dim=(0, 1))
    assert float(weighted[1]) == pytest.approx(float((c0 - c1).norm()), rel=RTOL)


@pytest.mark.parametrize("bad", [torch.zeros(4, 5), torch.zeros(2, 1, 3), [1.0, 2.0]])
def test_shape_errors_say_what_was_expected(bad):
    with pytest.raises(ValueError, match=r"\(N images, K steps, D\)|at least 2 steps"):
        M.orbit_spread(bad)


def test_other_errors():
    f = torch.randn(3, 4, 5)
    with pytest.raises(ValueError, match="anchor must have shape"):
        M.anchor_alignment(f, torch.randn(3, 6))
    with pytest.raises(ValueError, match="labels must have shape"):
        M.class_centroid_distance(f, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="at least 2 classes"):
        M.class_centroid_distance(f, torch.tensor([1, 1, 1]))
    with pytest.raises(ValueError, match="at least 3 steps"):
        M.curvature_raw(torch.randn(3, 2, 5))
    bad = f.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        M.per_image_metrics(bad)
    with pytest.raises(ValueError, match="effective_rank needs"):
        M.effective_rank(torch.randn(1, 4))


def test_gram_route_resolves_a_strongly_compressed_orbit():
    # a head that compresses 1e4-fold: orbit radius 1e-4 around a unit-norm centre (spread ~1e-8);
    # the uncentred-Gram route of per_image_metrics must agree with the direct centred formulas
    th = np.deg2rad(np.arange(0, 360, 30))
    fine = np.deg2rad(np.linspace(0, 45, 12))  # the pretrained protocol's small steps (δ ≈ 4.1°)
    f = torch.from_numpy(np.stack([circle_orbit(1e-4, 1.0, th, D, 0), circle_orbit(3e-5, 2.0, th, D, 1),
                                   circle_orbit(1e-4, 1.0, fine, D, 2)]))
    per = M.per_image_metrics(f)
    for name, direct in (("spread", M.orbit_spread(f)), ("trace_raw", M.within_orbit_trace(f, False)),
                         ("d_intra", M.d_intra(f)), ("curvature_raw", M.curvature_raw(f))):
        torch.testing.assert_close(per[name], direct, rtol=1e-5, atol=0, msg=name)
    assert float(per["spread"][0]) == pytest.approx(1e-8 / (1 + 1e-8), rel=1e-5)  # (r/ρ)², μ = 0
    for i in (0, 2):  # arc-length curvature ρ/r on the normalised circle, at any step
        assert float(per["curvature_arc"][i]) == pytest.approx(math.sqrt(1 + 1e-8) / 1e-4, rel=1e-6)
    delta = fine[1] - fine[0]
    assert float(per["curvature_raw"][2]) == pytest.approx(4e-4 / math.sqrt(1 + 1e-8)
                                                          * math.sin(delta / 2) ** 2, rel=1e-6)

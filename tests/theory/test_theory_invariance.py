"""headgeom.theory.invariance: the exact group action, the pattern manifold, models and training.

References: integer-pixel shifts against torch.roll, the group law, central finite differences
of the shift, linearity of the manifold in c, and an exactly invariant feature map for the gap.
"""
import dataclasses

import pytest
import torch

from headgeom.augment.families import tangent
from headgeom.geometry.invariance.fisher import fisher_rank, per_sample_jacobian
from headgeom.theory.invariance import (
    InvarianceSpec,
    PatternManifold,
    band_limit,
    build_models,
    circular_shift,
    invariance_gap,
    shift_family,
    train_invariance,
    trained_system,
)

D64 = torch.float64
TINY = InvarianceSpec(size=8, n_content=3, hidden=8, d=6, head_hidden=8, k=5, n_train=64, steps=60, batch=32)


def _images(n=3, size=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return band_limit(torch.randn(n, 1, size, size, generator=g, dtype=D64))


def test_integer_shifts_are_rolls():
    x = _images()
    torch.testing.assert_close(circular_shift(x, 1 / 8, 0.0), torch.roll(x, 1, dims=-1), rtol=0, atol=1e-13)
    torch.testing.assert_close(circular_shift(x, 0.0, 3 / 8), torch.roll(x, 3, dims=-2), rtol=0, atol=1e-13)
    torch.testing.assert_close(circular_shift(x, -2 / 8, 1 / 8), torch.roll(x, (1, -2), dims=(-2, -1)),
                               rtol=0, atol=1e-13)


def test_group_law_on_band_limited_images():
    x = _images(seed=1)
    a = torch.tensor([0.13, -0.4, 0.71], dtype=D64)
    b = torch.tensor([0.29, 0.05, -0.33], dtype=D64)
    torch.testing.assert_close(circular_shift(circular_shift(x, a, b), b, a), circular_shift(x, a + b, a + b),
                               rtol=0, atol=1e-12)
    torch.testing.assert_close(circular_shift(x, 1.0, -1.0), x, rtol=0, atol=1e-12)
    torch.testing.assert_close(circular_shift(x, 0.0, 0.0), x, rtol=0, atol=1e-13)
    # the shift is unitary: norms are kept
    torch.testing.assert_close(circular_shift(x, a, b).flatten(1).norm(dim=1), x.flatten(1).norm(dim=1), rtol=1e-12, atol=0)


def test_band_limit_is_a_projection_that_removes_nyquist():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 1, 8, 8, generator=g, dtype=D64)
    y = band_limit(x)
    torch.testing.assert_close(band_limit(y), y, rtol=0, atol=1e-13)
    spec = torch.fft.fft2(y)
    assert spec[..., 4, :].abs().max() < 1e-12 and spec[..., :, 4].abs().max() < 1e-12


def test_shift_tangent_matches_central_differences():
    x = _images(seed=3)
    for axis in ("x", "y"):
        fam = shift_family(axis)
        t = tangent(lambda im: im, x, fam)
        h = 1e-6
        fd = (fam.apply(x, h) - fam.apply(x, -h)) / (2 * h)
        torch.testing.assert_close(t, fd, rtol=1e-6, atol=1e-8)


def test_manifold_is_linear_in_content_and_equivariant_in_shift():
    m = PatternManifold(TINY, seed=0, dtype=D64)
    g = torch.Generator().manual_seed(4)
    th1, th2 = m.sample(5, g), m.sample(5, g)
    p = TINY.n_content
    th_sum = torch.cat([th1[:, :p] + th2[:, :p], th1[:, p:]], 1)
    th2_same_xi = torch.cat([th2[:, :p], th1[:, p:]], 1)
    torch.testing.assert_close(m.render(th_sum), m.render(th1) + m.render(th2_same_xi), rtol=0, atol=1e-12)
    th0 = torch.cat([th1[:, :p], torch.zeros(5, TINY.dim_aug, dtype=D64)], 1)
    torch.testing.assert_close(m.render(th1), m.act(m.render(th0), th1[:, p:]), rtol=0, atol=1e-12)
    assert m.n_latent == p + 2
    with pytest.raises(ValueError, match="theta must be"):
        m.render(th1[:, :p])


def test_manifold_parametrisation_has_full_rank():
    m = PatternManifold(TINY, seed=1, dtype=D64)
    theta = m.sample(6, torch.Generator().manual_seed(5))
    jx = per_sample_jacobian(lambda th: m.render(th).flatten(1), theta)
    assert jx.shape == (6, 64, m.n_latent)
    assert (fisher_rank(jx, 1e-12) == m.n_latent).all()


def test_invariance_gap_is_zero_for_an_invariant_map_and_positive_otherwise():
    m = PatternManifold(TINY, seed=2, dtype=D64)
    g = torch.Generator().manual_seed(6)
    theta = m.sample(32, g)

    def power(im):  # per-frequency power |FFT|², exactly shift-invariant
        return torch.fft.rfft2(im).abs().square().flatten(1)

    assert invariance_gap(power, None, m, theta, g) < 1e-20
    assert invariance_gap(lambda im: im.flatten(1), None, m, theta, g) > 0.1


def test_models_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    b1, h1 = build_models(TINY, 3)
    assert torch.equal(torch.random.get_rng_state(), state)
    b2, h2 = build_models(TINY, 3)
    for p, q in zip(list(b1.parameters()) + list(h1.parameters()), list(b2.parameters()) + list(h2.parameters())):
        assert torch.equal(p, q)
    x = torch.zeros(2, 1, TINY.size, TINY.size)
    assert h1(b1(x)).shape == (2, TINY.k)


def test_training_makes_the_system_more_invariant_and_keeps_the_init():
    sysm = trained_system(TINY, 0)
    assert trained_system(TINY, 0) is sysm  # cached: C6 and C7 analyse the same models
    assert torch.isfinite(torch.tensor([sysm.loss_first, sysm.loss_last])).all()
    b0, _ = build_models(TINY, 0)
    for p, q in zip(b0.parameters(), sysm.models["before"][0].parameters()):
        assert torch.equal(p, q)
    m = PatternManifold(TINY, 0)
    gaps = {}
    for stage in ("before", "after"):
        g = torch.Generator().manual_seed(7)
        gaps[stage] = invariance_gap(*sysm.models[stage], m, m.sample(128, g), g)
    assert gaps["after"] < gaps["before"]
    frozen = train_invariance(dataclasses.replace(TINY, train_backbone=False, steps=5), 0)
    for p, q in zip(frozen.models["before"][0].parameters(), frozen.models["after"][0].parameters()):
        assert torch.equal(p, q)


def test_spec_validation():
    with pytest.raises(ValueError, match="unknown group"):
        InvarianceSpec(group="rotation")
    with pytest.raises(ValueError, match="two-view"):
        InvarianceSpec(objective="mse")
    with pytest.raises(ValueError, match="must be >= 1"):
        InvarianceSpec(d=0)
    assert InvarianceSpec(group="translation_x").dim_aug == 1

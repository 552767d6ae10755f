"""headgeom.augment.families: jvp tangents vs central finite differences (float64), orbits, registry."""

from __future__ import annotations

import math

import pytest
import torch

from headgeom.augment import families as FA

N, H, W = 3, 10, 12


def images(dtype=torch.float64, seed=0):
    return torch.rand(N, 3, H, W, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def features(y: torch.Tensor) -> torch.Tensor:
    """A fixed smooth row-wise feature map (N, 3, H, W) -> (N, 5)."""
    w = torch.randn(3 * H * W, 5, generator=torch.Generator().manual_seed(9), dtype=y.dtype) / 10
    return torch.tanh(y.flatten(1) @ w)


def central_fd(fn, x, fam, xi, h=1e-6):
    return (fn(fam.apply(x, xi + h)) - fn(fam.apply(x, xi - h))) / (2 * h)


@pytest.mark.parametrize("name", sorted(FA.FAMILIES))
def test_identity_value_is_identity(name):
    fam = FA.get_family(name)
    x = images(torch.float32)
    torch.testing.assert_close(fam.apply(x, fam.identity_value), x, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", sorted(FA.FAMILIES))
def test_tangent_matches_central_differences(name):
    fam = FA.get_family(name)
    x = images()
    lo, hi = fam.range
    # A generic interior point per sample (off pixel-aligned kinks of bilinear sampling).
    xi = torch.tensor([lo + f * (hi - lo) for f in (0.37, 0.61, 0.83)], dtype=torch.float64)
    for fn in (lambda y: y.flatten(1), features):
        t = FA.tangent(fn, x, fam, xi)
        fd = central_fd(fn, x, fam, xi)
        assert t.abs().max() > 1e-3  # a non-trivial tangent
        torch.testing.assert_close(t, fd, rtol=1e-5, atol=1e-7 * fd.abs().max().item())


@pytest.mark.parametrize("name", ["hue", "saturation", "brightness", "contrast", "blur"])
def test_tangent_at_default_point(name):
    fam = FA.get_family(name)
    x = images()
    t = FA.tangent(features, x, fam)
    fd = central_fd(features, x, fam, fam.tangent_point)
    assert t.abs().max() > 1e-3
    torch.testing.assert_close(t, fd, rtol=1e-5, atol=1e-9)


def central_gradients(x):
    """Central differences with zero padding: (d/dcol, d/drow), each (N, C, H, W)."""
    p = torch.nn.functional.pad(x, (1, 1, 1, 1))
    return (p[..., 1:-1, 2:] - p[..., 1:-1, :-2]) / 2, (p[..., 2:, 1:-1] - p[..., :-2, 1:-1]) / 2


def test_geometric_tangents_at_identity_are_lie_derivatives():
    """At ξ = identity the sampler sits on pixel centres; the tangent is the symmetric
    derivative: central-difference image gradient dotted with the flow of the family."""
    x = images()
    gx, gy = central_gradients(x)
    rows, cols = torch.meshgrid(torch.arange(H, dtype=torch.float64), torch.arange(W, dtype=torch.float64),
                                indexing="ij")
    qc, qr = cols - (W - 1) / 2, rows - (H - 1) / 2
    flat = lambda y: y.flatten(1)  # noqa: E731
    # out(p) = x(p - t): d/d dx = -W ∂x/∂col; d/d dy = -H ∂x/∂row.
    torch.testing.assert_close(FA.tangent(flat, x, "translate_x"), (-W * gx).flatten(1), rtol=0, atol=1e-10)
    torch.testing.assert_close(FA.tangent(flat, x, "translate_y"), (-H * gy).flatten(1), rtol=0, atol=1e-10)
    # out(p) = x(R(θ)^-1 q + c): d/dθ (per degree) = (π/180) (-q_row ∂x/∂col + q_col ∂x/∂row).
    rot = math.pi / 180 * (-qr * gx + qc * gy)
    torch.testing.assert_close(FA.tangent(flat, x, "rotation"), rot.flatten(1), rtol=0, atol=1e-10)
    # out(p) = x(q / s + c): d/ds at 1 = -(q_col ∂x/∂col + q_row ∂x/∂row).
    sc = -(qc * gx + qr * gy)
    torch.testing.assert_close(FA.tangent(flat, x, "scale"), sc.flatten(1), rtol=0, atol=1e-10)


def test_tangent_is_per_sample():
    x = images()
    xi = torch.tensor([10.0, 50.0, 200.0], dtype=torch.float64)
    batch = FA.tangent(features, x, "rotation", xi)
    for i in range(N):
        single = FA.tangent(features, x[i : i + 1], "rotation", xi[i : i + 1])
        torch.testing.assert_close(batch[i : i + 1], single, rtol=1e-12, atol=1e-14)


def test_blur_tangent_vanishes_at_identity_so_default_is_sigma_one():
    fam = FA.get_family("blur")
    x = images()
    assert FA.tangent(features, x, fam, 0.0).abs().max() == 0
    assert fam.tangent_point == 1.0


def test_orbit_shape_values_and_paper_ranges():
    x = images(torch.float32)
    orb = FA.orbit(x, "rotation", 12)
    assert orb.shape == (N, 12, 3, H, W)
    values = FA.orbit_values("rotation", 12)
    assert values == pytest.approx([30.0 * k for k in range(12)])  # paper: 12 rotations 0-330°
    for k in (0, 3, 7):
        torch.testing.assert_close(orb[:, k], FA.get_family("rotation").apply(x, values[k]))
    torch.testing.assert_close(orb[:, 0], x, rtol=0, atol=1e-6)
    assert FA.get_family("rotation_45").range == (0.0, 45.0)
    assert FA.get_family("hue").range == (-0.4, 0.4)
    assert FA.get_family("saturation").range == (0.0, 2.0)
    assert FA.get_family("blur").range == (0.1, 3.0)
    sat = FA.orbit(x, "saturation", 3, range=(0.0, 1.0))
    gray = 0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]
    torch.testing.assert_close(sat[:, 0], gray.expand_as(x), rtol=0, atol=1e-6)
    torch.testing.assert_close(sat[:, 2], x, rtol=0, atol=1e-6)


def test_registry_and_errors():
    assert FA.get_family(FA.FAMILIES["hue"]) is FA.FAMILIES["hue"]
    with pytest.raises(ValueError, match="unknown augmentation family 'rot'.*available"):
        FA.get_family("rot")
    with pytest.raises(ValueError, match="steps"):
        FA.orbit(images(), "hue", 0)
    with pytest.raises(ValueError, match=r"xi of family 'hue'.*\(3,\)"):
        FA.get_family("hue").apply(images(), torch.zeros(2))

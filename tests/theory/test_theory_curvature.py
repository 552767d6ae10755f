"""Curvature of known metrics by both routes, loss-slice agreement, FD convergence, flat control.

References are closed forms written here: the n-sphere of radius r in stereographic coordinates
(constant curvature: R_abcd = (g_ac g_bd − g_ad g_bc) / r², K = 1/r², S = n(n−1)/r²), the
2-sphere in spherical coordinates, flat space in polar / spherical coordinates (R = 0, with the
textbook Christoffel symbols), and the dense float64 Hessian of torch.autograd.functional.
"""
from __future__ import annotations

import math

import pytest
import torch
from torch.autograd.functional import hessian as ref_hessian

from headgeom.objectives import analysis_loss
from headgeom.theory.curvature import (christoffel, curvature_exact, curvature_fd, is_positive_definite,
                                       isotropy_error, metric_jets_fd, random_slice_basis, route_difference,
                                       slice_metric, whitener)

D = torch.float64


def stereographic(r: float):
    """n-sphere of radius r: g = 4 r⁴ / (r² + |x|²)² δ."""
    return lambda x: (4 * r ** 4 / (r ** 2 + x.dot(x)) ** 2) * torch.eye(x.shape[0], dtype=D)


def spherical_2(r: float):
    """2-sphere of radius r in (θ, φ): g = diag(r², r² sin²θ)."""
    return lambda x: torch.diag(torch.stack([r ** 2 + 0 * x[0], r ** 2 * torch.sin(x[0]) ** 2]))


def polar(x):  # flat plane in (ρ, θ)
    return torch.diag(torch.stack([1 + 0 * x[0], x[0] ** 2]))


def spherical_flat(x):  # flat R³ in (ρ, θ, φ)
    rho, th = x[0], x[1]
    return torch.diag(torch.stack([1 + 0 * rho, rho ** 2, (rho * torch.sin(th)) ** 2]))


def both(metric, x, h=1e-3, order=4):
    return curvature_exact(metric, x), curvature_fd(metric, x, h, order)


@pytest.mark.parametrize("m", [2, 3])
def test_sphere_stereographic_constant_curvature_both_routes(m):
    r = 1.7
    x = torch.tensor([0.4, -0.9, 0.3][:m], dtype=D)
    for c in both(stereographic(r), x):
        g = c.g
        want = (torch.einsum("ac,bd->abcd", g, g) - torch.einsum("ad,bc->abcd", g, g)) / r ** 2
        torch.testing.assert_close(c.riemann_lowered, want, rtol=1e-7, atol=1e-9)
        assert c.scalar == pytest.approx(m * (m - 1) / r ** 2, rel=1e-7)
        if m == 2:
            assert c.gaussian == pytest.approx(1 / r ** 2, rel=1e-7)


def test_sphere_spherical_coordinates_gaussian_curvature():
    r = 0.8
    for theta in (0.5, 1.2, 2.5):
        x = torch.tensor([theta, 0.3], dtype=D)
        exact, fd = both(spherical_2(r), x)
        assert exact.gaussian == pytest.approx(1 / r ** 2, rel=1e-12)
        assert fd.gaussian == pytest.approx(1 / r ** 2, rel=1e-7)
        assert exact.scalar == pytest.approx(2 / r ** 2, rel=1e-12)


def test_flat_polar_christoffel_and_zero_curvature():
    rho = 1.3
    x = torch.tensor([rho, 0.7], dtype=D)
    exact, fd = both(polar, x)
    want = torch.zeros(2, 2, 2, dtype=D)
    want[0, 1, 1] = -rho  # Γ^ρ_θθ
    want[1, 0, 1] = want[1, 1, 0] = 1 / rho  # Γ^θ_ρθ
    torch.testing.assert_close(exact.gamma, want, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(fd.gamma, want, rtol=1e-8, atol=1e-10)
    assert exact.riemann.abs().max() < 1e-12
    assert fd.riemann.abs().max() < 1e-6
    assert exact.cancellation() < 1e-12  # R is round-off next to its nonzero terms
    # g varies although the plane is flat: a constant W cannot whiten it in these coordinates
    w = whitener(exact.g)
    assert isotropy_error(w, polar(x + torch.tensor([0.1, 0.0], dtype=D))) > 0.1


def test_flat_spherical_coordinates_3d():
    exact, fd = both(spherical_flat, torch.tensor([0.9, 1.1, 0.2], dtype=D))
    assert exact.riemann.abs().max() < 1e-12
    assert fd.riemann.abs().max() < 1e-6
    assert exact.scalar == pytest.approx(0.0, abs=1e-12)


def test_fd_jets_match_closed_form_derivatives():
    x = torch.tensor([0.4, -0.2], dtype=D)
    r = 1.0
    g, dg, d2g = metric_jets_fd(stereographic(r), x, 1e-3, order=4)
    # conformal factor f = 4 / (1 + |x|²)²: ∂_c f = −16 x_c / (1 + |x|²)³
    s = 1 + x.dot(x)
    df = -16 * x / s ** 3
    d2f = -16 * torch.eye(2, dtype=D) / s ** 3 + 96 * torch.outer(x, x) / s ** 4
    eye = torch.eye(2, dtype=D)
    torch.testing.assert_close(dg, torch.einsum("ab,c->abc", eye, df), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(d2g, torch.einsum("ab,ce->abce", eye, d2f), rtol=1e-7, atol=1e-8)


def _cosine_slice(m=2, reading="tangential", seed=0):
    gen = torch.Generator().manual_seed(seed)
    u0 = torch.randn(2, 3, generator=gen, dtype=D)
    target = u0 + 0.3 * torch.randn(2, 3, generator=gen, dtype=D)
    loss = analysis_loss("negative_cosine", target)
    basis = random_slice_basis(6, m, gen)
    return loss, u0, basis, slice_metric(loss, u0, basis, reading)


def test_slice_metric_is_projected_dense_hessian():
    loss, u0, basis, metric = _cosine_slice(m=3, reading="ambient")
    x = torch.tensor([0.1, -0.2, 0.05], dtype=D)
    u = (u0.reshape(-1) + basis @ x)
    dense = ref_hessian(lambda v: loss(v.reshape(2, 3)), u)
    torch.testing.assert_close(metric(x), basis.T @ dense @ basis, rtol=1e-12, atol=1e-12)


def test_routes_agree_on_loss_slice_and_fd_error_shrinks_with_h():
    _, u0, _, metric = _cosine_slice(m=2)
    x0 = torch.zeros(2, dtype=D)
    exact = curvature_exact(metric, x0)
    assert exact.cancellation() > 1e-3  # genuinely curved
    ell = float(u0.norm()) / math.sqrt(2)
    _, rel = route_difference(exact, curvature_fd(metric, x0, 2e-3 * ell, order=4))
    assert rel < 1e-4
    for order, factor in ((2, 2.5), (4, 8.0)):  # halving h cuts O(h²) by 4, O(h⁴) by 16
        e1 = route_difference(exact, curvature_fd(metric, x0, 0.04 * ell, order))[0]
        e2 = route_difference(exact, curvature_fd(metric, x0, 0.02 * ell, order))[0]
        assert e2 < e1 / factor, (order, e1, e2)


def test_mse_flat_control_zero_curvature_and_isotropy():
    gen = torch.Generator().manual_seed(1)
    u0, c = torch.randn(3, 4, generator=gen, dtype=D), torch.randn(3, 4, generator=gen, dtype=D)
    metric = slice_metric(analysis_loss("mse", c), u0, random_slice_basis(12, 3, gen))
    x0 = torch.zeros(3, dtype=D)
    exact, fd = both(metric, x0)
    assert exact.riemann.abs().max() < 1e-12 and fd.riemann.abs().max() < 1e-8
    torch.testing.assert_close(exact.g, torch.eye(3, dtype=D) / 3, rtol=1e-13, atol=1e-15)
    w = whitener(exact.g)
    for x in torch.randn(4, 3, generator=gen, dtype=D):
        assert isotropy_error(w, metric(x)) < 1e-12


def test_whitener_and_isotropy_error_against_formulas():
    a = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=D)
    w = whitener(a)
    torch.testing.assert_close(w.T @ a @ w, torch.eye(2, dtype=D), rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(w @ w, torch.linalg.inv(a), rtol=1e-13, atol=1e-13)
    assert isotropy_error(torch.eye(2, dtype=D), torch.diag(torch.tensor([1.5, 0.7], dtype=D))) == pytest.approx(0.5)
    assert is_positive_definite(a) and not is_positive_definite(torch.diag(torch.tensor([1.0, -1e-3], dtype=D)))


def test_christoffel_is_symmetric_in_lower_indices():
    gen = torch.Generator().manual_seed(2)
    g = torch.eye(3, dtype=D) + 0.1 * torch.ones(3, 3, dtype=D)
    dg = torch.randn(3, 3, 3, generator=gen, dtype=D)
    dg = 0.5 * (dg + dg.transpose(0, 1))
    gam = christoffel(g, dg)
    torch.testing.assert_close(gam, gam.transpose(1, 2))


def test_error_paths():
    with pytest.raises(ValueError, match="indefinite"):
        whitener(torch.diag(torch.tensor([1.0, -1.0], dtype=D)))
    with pytest.raises(TypeError, match="float64"):
        curvature_exact(polar, torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="order"):
        metric_jets_fd(polar, torch.tensor([1.0, 0.0], dtype=D), 1e-3, order=3)
    with pytest.raises(ValueError, match="step"):
        metric_jets_fd(polar, torch.tensor([1.0, 0.0], dtype=D), -1.0)
    with pytest.raises(ValueError, match="orthonormal"):
        slice_metric(analysis_loss("mse", torch.zeros(2, 2)), torch.zeros(2, 2, dtype=D), torch.ones(4, 2, dtype=D))
    with pytest.raises(ValueError, match="m = 3"):
        curvature_exact(spherical_flat, torch.tensor([0.9, 1.1, 0.2], dtype=D)).gaussian
    with pytest.raises(ValueError, match="2 <= m"):
        random_slice_basis(3, 4, torch.Generator())

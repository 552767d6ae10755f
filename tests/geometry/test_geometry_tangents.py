"""headgeom.geometry.invariance.tangents against independent float64 references.

References: dense JᵀJ from torch.autograd.functional.jacobian (no torch.func), tangents from
central finite differences of the transform, controls checked for norm and span.
"""
import pytest
import torch
from torch import nn
from torch.autograd.functional import jacobian

from headgeom.geometry import SymmetricOperator
from headgeom.geometry.invariance.tangents import (
    JacobianMetric,
    augmentation_tangent,
    directions_in_span,
    quotient_contrast,
    random_unit_directions,
    rayleigh_quotients,
)

D64 = torch.float64


def _mlp(d_in=4, d_out=3, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d_in, 7), nn.Tanh(), nn.Linear(7, d_out)).double()


def _dense_jtj(fn, z_row):
    j = jacobian(lambda r: fn(r.unsqueeze(0)).squeeze(0), z_row)  # (m, n)
    return j.T @ j


def test_jacobian_metric_quotients_match_dense_jtj_per_sample():
    f = _mlp()
    g = torch.Generator().manual_seed(1)
    z = torch.randn(5, 4, generator=g, dtype=D64)
    v = torch.randn(5, 3, 4, generator=g, dtype=D64)
    q = rayleigh_quotients(JacobianMetric(f, z), v)  # (5, 3)
    q1 = rayleigh_quotients(JacobianMetric(f, z), v[:, 0])  # (5,)
    assert q.shape == (5, 3) and q1.shape == (5,)
    for i in range(5):
        a = _dense_jtj(f, z[i])
        ref = torch.stack([v[i, j] @ a @ v[i, j] / v[i, j].dot(v[i, j]) for j in range(3)])
        torch.testing.assert_close(q[i], ref, rtol=1e-12, atol=0)
        torch.testing.assert_close(q1[i], ref[0], rtol=1e-12, atol=0)


def test_jacobian_metric_whole_point_and_dense_blocks_operator_agree():
    f = _mlp()
    g = torch.Generator().manual_seed(2)
    z = torch.randn(4, generator=g, dtype=D64)
    fn = lambda r: f(r.unsqueeze(0)).squeeze(0)  # noqa: E731
    a = _dense_jtj(f, z)
    v = torch.randn(6, 4, generator=g, dtype=D64)
    ref = ((v @ a) * v).sum(1) / (v * v).sum(1)
    for metric in (JacobianMetric(fn, z, per_sample=False), a, SymmetricOperator.from_dense(a)):
        torch.testing.assert_close(rayleigh_quotients(metric, v), ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(rayleigh_quotients(a, v[0]), ref[0], rtol=1e-12, atol=0)
    blocks = torch.stack([a, 2 * a, 3 * a])
    qb = rayleigh_quotients(blocks, v[:3])
    torch.testing.assert_close(qb, ref[:3] * torch.tensor([1.0, 2.0, 3.0], dtype=D64), rtol=1e-12, atol=0)
    assert rayleigh_quotients(blocks, v[:3].unsqueeze(1)).shape == (3, 1)


def test_quotients_bounded_by_extreme_eigenvalues_and_attained_on_eigenvectors():
    g = torch.Generator().manual_seed(3)
    b = torch.randn(5, 5, generator=g, dtype=D64)
    a = b @ b.T
    lam, vec = torch.linalg.eigh(a)
    q = rayleigh_quotients(a, random_unit_directions((200, 5), g))
    assert (q >= lam[0] * (1 - 1e-12)).all() and (q <= lam[-1] * (1 + 1e-12)).all()
    torch.testing.assert_close(rayleigh_quotients(a, 3.0 * vec.T), lam, rtol=1e-10, atol=1e-12)


def test_zero_direction_and_bad_shapes_raise():
    a = torch.eye(3, dtype=D64)
    with pytest.raises(ValueError, match="zero norm"):
        rayleigh_quotients(a, torch.zeros(3, dtype=D64))
    with pytest.raises(ValueError, match="dense metric"):
        rayleigh_quotients(a, torch.ones(4, dtype=D64))
    with pytest.raises(ValueError, match="blocks"):
        rayleigh_quotients(torch.ones(2, 3, 3, dtype=D64), torch.ones(3, 3, dtype=D64))
    with pytest.raises(TypeError, match="metric must be"):
        rayleigh_quotients("G", torch.ones(3, dtype=D64))


def _rotate_points(x, xi):
    """A toy transform on (N, 2) points: rotation by angle xi (N,)."""
    c, s = torch.cos(xi), torch.sin(xi)
    return torch.stack([c * x[:, 0] - s * x[:, 1], s * x[:, 0] + c * x[:, 1]], dim=1)


def test_callable_transform_tangent_matches_central_differences():
    f = _mlp(d_in=2, d_out=3, seed=4)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 2, generator=g, dtype=D64)
    xi0 = 0.3
    t = augmentation_tangent(f, x, _rotate_points, xi0)
    h = 1e-5
    with torch.no_grad():
        fd = (f(_rotate_points(x, torch.full((6,), xi0 + h, dtype=D64)))
              - f(_rotate_points(x, torch.full((6,), xi0 - h, dtype=D64)))) / (2 * h)
    torch.testing.assert_close(t, fd, rtol=1e-7, atol=1e-9)
    # identity feature map: the input-space tangent of a rotation is (−y, x) at xi = 0
    t0 = augmentation_tangent(lambda r: r, x, _rotate_points)
    torch.testing.assert_close(t0, torch.stack([-x[:, 1], x[:, 0]], 1), rtol=1e-14, atol=1e-14)


def test_registered_family_tangent_matches_central_differences():
    g = torch.Generator().manual_seed(6)
    x = torch.rand(2, 3, 8, 8, generator=g, dtype=D64)
    torch.manual_seed(0)
    f = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64, 5), nn.Tanh()).double()
    t = augmentation_tangent(f, x, "brightness")  # tangent at the identity factor 1
    h = 1e-5
    from headgeom.augment.families import get_family

    fam = get_family("brightness")
    with torch.no_grad():
        fd = (f(fam.apply(x, 1 + h)) - f(fam.apply(x, 1 - h))) / (2 * h)
    torch.testing.assert_close(t, fd, rtol=1e-7, atol=1e-9)


def test_controls_are_unit_and_in_span():
    g = torch.Generator().manual_seed(7)
    r = random_unit_directions((4, 3, 6), g)
    torch.testing.assert_close(r.norm(dim=-1), torch.ones(4, 3, dtype=D64), rtol=1e-14, atol=0)
    r2 = random_unit_directions((4, 2, 3), g, sample_dims=2)
    torch.testing.assert_close(r2.flatten(1).norm(dim=1), torch.ones(4, dtype=D64), rtol=1e-14, atol=0)
    basis = torch.randn(4, 6, 2, generator=g, dtype=D64)
    s = directions_in_span(basis, 5, g)  # (4, 5, 6)
    assert s.shape == (4, 5, 6)
    torch.testing.assert_close(s.norm(dim=-1), torch.ones(4, 5, dtype=D64), rtol=1e-14, atol=0)
    q, _ = torch.linalg.qr(basis)
    resid = s - (s @ q) @ q.transpose(-1, -2)
    assert resid.abs().max() < 1e-13


def test_quotient_contrast():
    t = torch.tensor([1e-4, 2e-4, 3e-4], dtype=D64)
    c = torch.tensor([1.0, 2.0, -3.0, 4.0], dtype=D64)
    out = quotient_contrast(t, c)
    assert out["p_below"] == 1.0 and out["median_tangent"] == 2e-4
    assert out["median_control"] == 2.0  # torch's lower median of |c| = (1, 2, 3, 4)
    assert out["ratio"] == pytest.approx(1e-4)
    assert quotient_contrast(c, c)["p_below"] == pytest.approx(0.5)

"""headgeom.geometry.invariance.fisher: the Gaussian Fisher formula, numerical rank and null-space fractions.

References are written independently: the Fisher information as E[s sᵀ] of the Gaussian score
s = Jᵀ(y − g)/σ² estimated by Monte Carlo and by its closed form, matrices of constructed rank,
and projections built from an explicit orthonormal basis.
"""
import pytest
import torch
from torch.autograd.functional import jacobian

from headgeom.geometry.invariance.fisher import (
    GaussianObservation,
    fisher_eigen,
    fisher_information,
    fisher_rank,
    null_space_fraction,
    numerical_rank,
    per_sample_jacobian,
)

D64 = torch.float64


def _g(theta):
    return torch.stack([torch.sin(theta[0]) * theta[1], theta[1] ** 2, theta[0] + 0.5 * theta[2] ** 3,
                        theta[2] * theta[0]])


def test_fisher_equals_score_covariance_of_the_gaussian_model():
    theta = torch.tensor([0.3, -0.7, 1.1], dtype=D64)
    j = jacobian(_g, theta)  # (4, 3)
    sigma = 0.5
    i_f = fisher_information(j, sigma)
    # closed form of E[s sᵀ] with s = ∇_θ log N(y; g(θ), σ²I) = Jᵀ (y − g)/σ², written out
    cov = sigma ** 2 * torch.eye(4, dtype=D64)
    ref = j.T @ cov @ j / sigma ** 4
    torch.testing.assert_close(i_f, ref, rtol=1e-13, atol=0)
    # Monte Carlo of the score covariance (loose: statistical)
    gen = torch.Generator().manual_seed(0)
    eps = sigma * torch.randn(200_000, 4, generator=gen, dtype=D64)
    scores = eps @ j / sigma ** 2
    mc = scores.T @ scores / scores.shape[0]
    assert (mc - ref).abs().max() <= 0.02 * ref.abs().max()


def test_fisher_eigen_matches_eigh_of_the_formed_matrix():
    gen = torch.Generator().manual_seed(1)
    j = torch.randn(3, 5, 4, generator=gen, dtype=D64)  # batch of 3, more outputs than params
    lam, vec = fisher_eigen(j, sigma=2.0)
    ref = torch.linalg.eigvalsh(j.transpose(-1, -2) @ j / 4.0).flip(-1)
    torch.testing.assert_close(lam, ref, rtol=1e-10, atol=1e-12)
    i_f = fisher_information(j, 2.0)
    torch.testing.assert_close(vec @ torch.diag_embed(lam) @ vec.transpose(-1, -2), i_f, rtol=1e-10, atol=1e-12)
    wide = torch.randn(2, 6, generator=gen, dtype=D64)  # m < n: n − m zero eigenvalues
    lam_w, _ = fisher_eigen(wide)
    assert lam_w.shape == (6,) and (lam_w[2:] == 0).all() and (lam_w[:2] > 0).all()


def _of_rank(r, m, n, gen, gap=1e-9):
    """An m×n matrix with r singular values in [1, 2] and the rest at ``gap``."""
    u, _ = torch.linalg.qr(torch.randn(m, m, generator=gen, dtype=D64))
    v, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=D64))
    s = torch.full((min(m, n),), gap, dtype=D64)
    s[:r] = 1 + torch.rand(r, generator=gen, dtype=D64)
    return u[:, : min(m, n)] @ torch.diag(s) @ v[:, : min(m, n)].T


@pytest.mark.parametrize("r", [0, 1, 3, 5])
def test_rank_of_constructed_matrices(r):
    gen = torch.Generator().manual_seed(10 + r)
    a = _of_rank(r, 7, 5, gen) if r else torch.zeros(7, 5, dtype=D64)
    # the Fisher eigenvalues are s²: 1..4 and 1e-18, so any tolerance in (1e-17, 0.25) separates them
    for tol in (1e-12, 1e-6, 1e-2):
        assert int(fisher_rank(a, tol)) == r
    assert int(numerical_rank(torch.linalg.svdvals(a), 1e-6)) == r
    assert int(fisher_rank(a, 1e-6, sigma=1e-3)) == r  # scale-free


def test_rank_tolerance_is_relative_and_strict():
    s = torch.tensor([[10.0, 1.0, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=D64)
    assert numerical_rank(s, 0.05).tolist() == [2, 0]
    assert numerical_rank(s, 0.1).tolist() == [1, 0]  # 1.0 is not above 0.1 · 10
    assert numerical_rank(s, 0.0).tolist() == [3, 0]
    with pytest.raises(ValueError, match="rel_tol"):
        numerical_rank(s, 1.5)
    with pytest.raises(ValueError, match="sigma"):
        GaussianObservation(0.0)
    with pytest.raises(ValueError, match="Jacobian"):
        fisher_information(torch.ones(3, dtype=D64))


def test_null_space_fraction_against_an_explicit_basis():
    gen = torch.Generator().manual_seed(2)
    q, _ = torch.linalg.qr(torch.randn(5, 5, generator=gen, dtype=D64))
    informative, null = q[:, :3], q[:, 3:]
    j = torch.randn(4, 3, generator=gen, dtype=D64) @ informative.T  # (4, 5), null space = span(null)
    a, b = torch.randn(3, generator=gen, dtype=D64), torch.randn(2, generator=gen, dtype=D64)
    v = torch.stack([null @ b, informative @ a, informative @ a + null @ b])
    mixed = b.norm() / (a.norm() ** 2 + b.norm() ** 2).sqrt()
    ref = torch.stack([torch.tensor(1.0, dtype=D64), torch.tensor(0.0, dtype=D64), mixed])
    torch.testing.assert_close(null_space_fraction(j, v, 1e-10), ref, rtol=1e-9, atol=1e-9)


def test_per_sample_jacobian_matches_autograd_functional():
    torch.manual_seed(0)
    f = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    x = torch.randn(5, 3, dtype=D64)
    j = per_sample_jacobian(f, x)
    assert j.shape == (5, 2, 3)
    for i in range(5):
        torch.testing.assert_close(j[i], jacobian(lambda r: f(r), x[i]), rtol=1e-12, atol=1e-14)

"""Lanczos extremes against known spectra A = Q diag(λ) Qᵀ (λ chosen in the test, Q random)."""

import numpy as np
import pytest
import torch

from headgeom.geometry.linalg.lanczos import LanczosNotConvergedWarning, lanczos_extremes
from headgeom.geometry.linalg.operators import SymmetricOperator

N = 2000


@pytest.fixture(scope="module")
def Q() -> torch.Tensor:
    g = torch.Generator().manual_seed(123)
    q, _ = torch.linalg.qr(torch.randn(N, N, generator=g, dtype=torch.float64))
    return q


def _op(Q: torch.Tensor, lam: torch.Tensor) -> SymmetricOperator:
    """A = Q diag(λ) Qᵀ without forming A: two dense float64 products per matvec."""
    return SymmetricOperator(lambda v: Q @ (lam * (Q.T @ v)), lam.numel())


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max() / want.abs().max())


def _shifted_power_iteration_answer(lam: torch.Tensor) -> float:
    """The fixed point of the authors' recipe, from the exact spectrum: power iteration finds
    μ = the largest-|λ| eigenvalue, taken as λ_max; power iteration on A − μI then finds its
    largest-|·| eigenvalue ν, and λ_min is reported as ν + μ."""
    mu = lam[lam.abs().argmax()]
    shifted = lam - mu
    return float(shifted[shifted.abs().argmax()] + mu)


def test_both_ends_when_the_largest_magnitude_eigenvalue_is_negative(Q):
    g = torch.Generator().manual_seed(0)
    lam = torch.rand(N, generator=g, dtype=torch.float64) * 3.0 - 5.0  # bulk in [-5, -2]
    lam[:6] = torch.tensor([-9.0, -8.7, -8.5, -8.4, -8.0, -7.8], dtype=torch.float64)
    lam[6:9] = torch.tensor([0.5, 1.0, 1.2], dtype=torch.float64)
    want = torch.sort(lam).values
    # The case is one where the shifted power iteration is wrong: it returns λ_max, not λ_min.
    assert abs(_shifted_power_iteration_answer(lam) - float(want[0])) > 5.0

    res = lanczos_extremes(_op(Q, lam), k=6, tol=1e-10, return_vectors=True)
    assert res.converged and not res.exact and res.iterations < N
    assert _rel_err(res.lowest, want[:6]) < 1e-8
    assert _rel_err(res.highest, want[-6:]) < 1e-8
    assert res.lambda_min == pytest.approx(-9.0, rel=1e-10)
    assert res.lambda_max == pytest.approx(1.2, rel=1e-10)
    bound = 1e-10 * float(res.ritz_values.abs().max())
    assert bool((res.lowest_residuals <= bound).all()) and bool((res.highest_residuals <= bound).all())
    # Ritz vectors: orthonormal, and their true residuals obey the reported bounds.
    V = torch.cat([res.lowest_vectors, res.highest_vectors], dim=1)
    theta = torch.cat([res.lowest, res.highest])
    torch.testing.assert_close(V.T @ V, torch.eye(12, dtype=torch.float64), rtol=0, atol=1e-10)
    AV = torch.stack([Q @ (lam * (Q.T @ V[:, j])) for j in range(12)], dim=1)
    true_res = torch.linalg.vector_norm(AV - V * theta, dim=0)
    assert float(true_res.max()) < 1e-8


def test_clustered_ends(Q):
    lam = torch.linspace(-1.0, 1.0, N, dtype=torch.float64)
    lam[:6] = -1.5 + 1e-5 * torch.arange(6, dtype=torch.float64)  # 6 eigenvalues within 5e-5
    lam[-6:] = 2.0 + 1e-5 * torch.arange(6, dtype=torch.float64)
    want = torch.sort(lam).values
    res = lanczos_extremes(_op(Q, lam), k=6)
    assert res.converged
    assert _rel_err(res.lowest, want[:6]) < 1e-8
    assert _rel_err(res.highest, want[-6:]) < 1e-8
    # The cluster members are resolved individually, not returned as copies of one value.
    assert float(torch.diff(res.lowest).min()) > 5e-6


def test_invariant_krylov_space_terminates_exactly():
    # 60-dim operator with 3 distinct eigenvalues: the Krylov space is invariant after 3 steps.
    lam = torch.tensor([-2.0] * 20 + [0.5] * 25 + [3.0] * 15, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    Qs, _ = torch.linalg.qr(torch.randn(60, 60, generator=g, dtype=torch.float64))
    A = Qs @ torch.diag(lam) @ Qs.T
    res = lanczos_extremes(SymmetricOperator.from_dense(A), k=6)
    assert res.iterations == 3 and res.exact and res.converged
    torch.testing.assert_close(res.ritz_values, torch.tensor([-2.0, 0.5, 3.0], dtype=torch.float64), rtol=0, atol=1e-12)
    assert res.lambda_min == pytest.approx(-2.0, abs=1e-12)
    assert res.lambda_max == pytest.approx(3.0, abs=1e-12)
    torch.testing.assert_close(res.extremes(), res.ritz_values)


def test_full_space_is_exact_with_multiplicities():
    lam = torch.tensor([-4.0, -1.0, 0.25, 0.5, 2.0, 7.0], dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    Qs, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    res = lanczos_extremes(SymmetricOperator.from_dense(Qs @ torch.diag(lam) @ Qs.T), k=6)
    assert res.iterations == 6 and res.exact and res.converged
    torch.testing.assert_close(res.ritz_values, lam, rtol=0, atol=1e-12)
    torch.testing.assert_close(res.lowest, lam, rtol=0, atol=1e-12)


def test_one_end_only_and_a_float32_operator(Q):
    lam = torch.linspace(-3.0, 4.0, 400, dtype=torch.float64)
    q = Q[:400, :400]
    qq, _ = torch.linalg.qr(q)
    A = qq @ torch.diag(lam) @ qq.T
    lo = lanczos_extremes(SymmetricOperator.from_dense(A), k=2, which="lowest", tol=1e-6, max_iter=400)
    assert lo.highest is None and lo.highest_residuals is None
    assert lo.lowest.numel() == 2 and lo.lowest[0].item() == pytest.approx(-3.0, rel=1e-8)
    op32 = SymmetricOperator.from_dense(A.float())
    hi = lanczos_extremes(op32, k=1, which="highest", tol=1e-5)
    assert hi.lowest is None and hi.highest.dtype == torch.float32
    assert hi.lambda_max == pytest.approx(4.0, rel=1e-4)


def test_not_converged_warns_with_residuals(Q):
    lam = torch.linspace(0.0, 1.0, N, dtype=torch.float64)
    with pytest.warns(LanczosNotConvergedWarning, match="did not converge in max_iter=5.*residuals"):
        res = lanczos_extremes(_op(Q, lam), k=2, max_iter=5)
    assert not res.converged and not res.exact and res.iterations == 5
    assert float(res.lowest_residuals.max()) > 1e-10


def test_start_vector_depends_only_on_seed():
    A = torch.diag(torch.arange(1.0, 31.0, dtype=torch.float64))
    op = SymmetricOperator.from_dense(A)
    with pytest.warns(LanczosNotConvergedWarning):
        r1 = lanczos_extremes(op, k=1, max_iter=4, seed=3)
    with pytest.warns(LanczosNotConvergedWarning):
        r2 = lanczos_extremes(op, k=1, max_iter=4, seed=3)
    with pytest.warns(LanczosNotConvergedWarning):
        r3 = lanczos_extremes(op, k=1, max_iter=4, seed=4)
    assert torch.equal(r1.ritz_values, r2.ritz_values)
    assert not torch.equal(r1.ritz_values, r3.ritz_values)


def test_error_paths():
    op = SymmetricOperator.from_dense(torch.eye(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="k must be a positive int"):
        lanczos_extremes(op, k=0)
    with pytest.raises(ValueError, match="tol must be a positive"):
        lanczos_extremes(op, tol=-1.0)
    with pytest.raises(ValueError, match="which must be one of"):
        lanczos_extremes(op, which="middle")
    with pytest.raises(ValueError, match="max_iter must be"):
        lanczos_extremes(op, max_iter=0)
    with pytest.raises(TypeError, match=".matvec and .shape"):
        lanczos_extremes(np.eye(3))
    nan_op = SymmetricOperator(lambda v: v * float("nan"), 4)
    with pytest.raises(ValueError, match="non-finite values at Lanczos step 0"):
        lanczos_extremes(nan_op)

"""The paper's shifted power iteration (headgeom.geometry.linalg.shifted_power) against exact dense
eigenvalues (float64 eigvalsh): where it converges, and two cases where it is unreliable.

Each matrix is Q diag(λ) Qᵀ with a random orthogonal Q and a chosen spectrum; the reference is
torch.linalg.eigvalsh of that matrix, never the chosen numbers themselves.
"""
from __future__ import annotations

import pytest
import torch

from headgeom.geometry.linalg.shifted_power import shifted_power_lambda_min

D64 = torch.float64


def matrix(spectrum: list[float], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(len(spectrum), len(spectrum), generator=g, dtype=D64))
    return q @ torch.diag(torch.tensor(spectrum, dtype=D64)) @ q.T


def estimate(a: torch.Tensor, **kw):
    a_it = a.to(kw.get("dtype", torch.float32))  # the matrix in the iteration's dtype
    return shifted_power_lambda_min(lambda v: a_it @ v, (a.shape[0],), **kw)


def test_converges_where_lambda_max_dominates_and_the_bottom_gap_is_wide():
    # λ_max = 10 dominates; H − μI has λ_min − μ ≈ −18 against at most −8 for the rest: ratio ≈ 0.44
    a = matrix([-8.0] + torch.linspace(0.0, 2.0, 30).tolist() + [10.0])
    exact = torch.linalg.eigvalsh(a)
    est = estimate(a)
    scale = float(exact.abs().max())
    assert est.shift == pytest.approx(float(exact[-1]), abs=1e-4 * scale)  # step 1 found λ_max
    assert est.lambda_min == pytest.approx(float(exact[0]), abs=1e-4 * scale)  # float32 round-off
    assert est.dtype == "float32" and est.iterations == 20


def test_error_shrinks_with_iterations_where_it_converges():
    a = matrix([-3.0, -2.0] + torch.linspace(0.0, 4.0, 20).tolist() + [9.0], seed=1)
    exact = float(torch.linalg.eigvalsh(a)[0])
    # eps = 0: the authors' ‖·‖ + 1e-8 leaves |v| = 1 − O(1e-9), a bias of that order in vᵀHv
    errors = [abs(estimate(a, iterations=k, dtype=D64, eps=0.0).lambda_min - exact) for k in (2, 16, 128, 1024)]
    assert all(later < earlier for earlier, later in zip(errors, errors[1:]))
    assert errors[-1] < 1e-10 * 9.0


def test_close_gap_at_the_bottom_leaves_a_biased_value_after_20_steps():
    # many eigenvalues just above λ_min: after 20 steps the iterate is a mixture, its Rayleigh
    # quotient lies above λ_min by far more than float32 round-off
    a = matrix([-1.0] + torch.linspace(-0.95, 0.5, 60).tolist() + [10.0], seed=2)
    exact = torch.linalg.eigvalsh(a)
    est = estimate(a)
    scale = float(exact.abs().max())
    gap = est.lambda_min - float(exact[0])
    assert gap > 1e-2 * scale  # biased upwards (a Rayleigh quotient never lies below λ_min)
    # the same estimator does converge once it is given enough steps (the gap is the cause)
    assert estimate(a, iterations=4000, dtype=D64).lambda_min - float(exact[0]) < gap / 10


def test_dominant_negative_eigenvalue_makes_the_estimate_lambda_max():
    # |λ_min| > λ_max: step 1 returns μ ≈ λ_min, and H − μI ⪰ 0 has λ_max − μ as its dominant
    # eigenvalue, so step 2 returns λ_max: a positive "λ_min" for an indefinite matrix
    a = matrix([-10.0] + torch.linspace(0.0, 1.0, 20).tolist() + [4.0], seed=3)
    exact = torch.linalg.eigvalsh(a)
    est = estimate(a)
    scale = float(exact.abs().max())
    assert est.shift == pytest.approx(float(exact[0]), abs=1e-3 * scale)
    assert est.lambda_min == pytest.approx(float(exact[-1]), abs=1e-3 * scale)
    assert est.lambda_min > 0 > float(exact[0])  # the sign is wrong


def test_a_hessian_below_the_normalisation_eps_reads_as_zero():
    # the authors normalise by ‖Hv‖ + 1e-8: when ‖H‖ ≪ 1e-8 every step shrinks v by ‖H‖/1e-8, and the
    # estimate underflows to 0 whatever the spectrum: an indefinite matrix at 1e-11 reads "λ_min = 0"
    a = 1e-11 * matrix([-8.0] + torch.linspace(0.0, 2.0, 30).tolist() + [10.0], seed=4)
    exact = torch.linalg.eigvalsh(a)
    assert float(exact[0]) < 0
    est = estimate(a)
    assert abs(est.lambda_min) < 1e-6 * abs(float(exact[0]))  # zero up to underflow, not λ_min
    # the same matrix scaled up to where eps is negligible is estimated well (so eps is the cause)
    up = estimate(a * 1e11)
    assert up.lambda_min == pytest.approx(float(exact[0]) * 1e11, abs=1e-4 * float(exact.abs().max()) * 1e11)


def test_bad_arguments_are_refused():
    a = matrix([1.0, 2.0])
    with pytest.raises(ValueError, match="iterations"):
        estimate(a, iterations=0)
    with pytest.raises(ValueError, match="floating"):
        estimate(a, dtype=torch.int64)

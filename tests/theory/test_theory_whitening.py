"""headgeom.theory.whitening (Thm 3.1): the construction against the defining identities written
out here, the engine's H_eff of the linear head against WᵀAW, loss blocks against
torch.func.hessian, the indefinite signs and the dimension condition. float64 throughout."""
import math

import pytest
import torch
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.objectives import analysis_loss, mse_to_target
from headgeom.theory.whitening import (
    best_fit_isotropy,
    inertia_lower_bound,
    isotropy_error,
    leakage,
    linear_effective_hessian,
    random_subspace,
    sample_loss_block,
    split_eigen,
    whitening_head,
)

D64 = torch.float64


def _rotated(eigs: list[float], seed: int = 0) -> torch.Tensor:
    """Q diag(eigs) Qᵀ with a fixed random orthogonal Q: a symmetric A of known spectrum."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(len(eigs), len(eigs), generator=g, dtype=D64))
    return q @ torch.diag(torch.tensor(eigs, dtype=D64)) @ q.T


def _linear(w: torch.Tensor) -> nn.Linear:
    lin = nn.Linear(w.shape[1], w.shape[0], bias=False).to(D64)
    with torch.no_grad():
        lin.weight.copy_(w)
    return lin


# ------------------------------------------------------------------ positive-definite A
def test_whitening_identity_positive_definite():
    a = _rotated([3.0, 1.0, 0.5, 0.2], seed=1)  # k = 4, κ = 15
    split = split_eigen(a)
    assert (split.n_positive, split.n_negative, split.n_zero) == (4, 0, 0)
    g = torch.Generator().manual_seed(2)
    for _ in range(5):
        b, b_perp = random_subspace(7, 4, g)
        w = whitening_head(split, b)
        assert w.shape == (4, 7)
        h = w.T @ a @ w  # the definition, written here
        torch.testing.assert_close(b.T @ h @ b, torch.eye(4, dtype=D64), rtol=0, atol=1e-12)
        torch.testing.assert_close(h, b @ b.T, rtol=0, atol=1e-12)  # H = P_S: zero on S⊥
        assert isotropy_error(linear_effective_hessian(w, a), b) < 1e-12
        assert leakage(h, b_perp) < 1e-12


def test_engine_matches_formula_for_quadratic_loss():
    """Loss ½ Σ_i u_iᵀ A u_i has ∇²_{u_i} L = A; the engine's blocks of u = W z are WᵀAW, M = 0."""
    a = _rotated([2.0, 1.5, 0.4], seed=3)
    b, _ = random_subspace(5, 3, torch.Generator().manual_seed(4))
    w = whitening_head(split_eigen(a), b)
    loss = lambda u: 0.5 * torch.einsum("nk,kl,nl->", u, a, u)  # noqa: E731
    z = torch.randn(4, 5, dtype=D64, generator=torch.Generator().manual_seed(5))
    eh = effective_hessian(_linear(w), loss, z)
    h, _, m = eh.decomposed_blocks()
    for i in range(4):
        torch.testing.assert_close(h[i], w.T @ a @ w, rtol=0, atol=1e-12)
    assert m.abs().max() == 0
    # and the whole H_eff (dense autograd) is block-diagonal with those blocks
    dense = eh.dense().reshape(4, 5, 4, 5)
    torch.testing.assert_close(dense[1, :, 1, :], b @ b.T, rtol=0, atol=1e-12)
    assert dense[0, :, 1, :].abs().max() < 1e-14


def test_engine_matches_formula_for_mse_to_target():
    """mse_to_target (mean over N rows) has A = I / N; whitening it gives H_eff = P_S per block."""
    n, k, d = 3, 4, 6
    a = torch.eye(k, dtype=D64) / n
    b, _ = random_subspace(d, k, torch.Generator().manual_seed(6))
    w = whitening_head(split_eigen(a), b)
    torch.testing.assert_close(w @ w.T, n * torch.eye(k, dtype=D64), rtol=0, atol=1e-12)  # √N U Bᵀ
    c = torch.randn(n, k, dtype=D64)
    z = torch.randn(n, d, dtype=D64)
    h = effective_hessian(_linear(w), lambda u: mse_to_target(u, c), z).blocks()
    for i in range(n):
        torch.testing.assert_close(h[i], b @ b.T, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ indefinite A
def test_indefinite_signs():
    a = _rotated([2.0, 1.0, -0.5, 0.0], seed=7)
    split = split_eigen(a)
    assert (split.n_positive, split.n_negative, split.n_zero, split.rank) == (2, 1, 1, 3)
    g = torch.Generator().manual_seed(8)
    # the positive part alone is whitened exactly on dim S = n₊
    b2, _ = random_subspace(5, 2, g)
    assert isotropy_error(linear_effective_hessian(whitening_head(split, b2), a), b2) < 1e-12
    # all non-zero eigenvalues with |Λ|: dim S = rank A, B's first column goes to λ = −0.5
    b3, _ = random_subspace(5, 3, g)
    h = linear_effective_hessian(whitening_head(split, b3, part="nonzero"), a)
    v_neg, v_pos = b3[:, 0], b3[:, 1]
    assert abs(v_neg @ h @ v_neg + 1.0) < 1e-12  # vᵀHv = −‖v‖²
    assert abs(v_pos @ h @ v_pos - 1.0) < 1e-12
    q = torch.linalg.eigvalsh(b3.T @ h @ b3)
    torch.testing.assert_close(q, torch.tensor([-1.0, 1.0, 1.0], dtype=D64), rtol=0, atol=1e-12)
    assert abs(isotropy_error(h, b3) - 2.0) < 1e-12


# ------------------------------------------------------------------ dimension condition
def test_dim_s_above_rank_cannot_be_whitened():
    a = _rotated([1.0, 0.6, 0.0], seed=9)  # rank 2, PSD
    split = split_eigen(a)
    b3, _ = random_subspace(4, 3, torch.Generator().manual_seed(10))
    with pytest.raises(ValueError, match="dim S must equal r = 2"):
        whitening_head(split, b3)
    h = linear_effective_hessian(whitening_head(split, b3[:, :2]), a)
    assert abs(isotropy_error(h, b3) - 1.0) < 1e-12  # the third direction gets vᵀHv = 0
    assert best_fit_isotropy(a, 3, restarts=2) >= 1 - 1e-9  # inertia: no W does better
    assert best_fit_isotropy(a, 2, restarts=2) < 1e-6  # while the feasible case is solved
    assert inertia_lower_bound(2, 3) == 1.0 and inertia_lower_bound(2, 2) == 0.0


# ------------------------------------------------------------------ the measured quantities
def test_isotropy_error_and_leakage_on_known_matrices():
    b, b_perp = random_subspace(5, 2, torch.Generator().manual_seed(11))
    h = b @ torch.diag(torch.tensor([1.5, 0.7], dtype=D64)) @ b.T + 0.3 * b_perp @ b_perp.T
    assert abs(isotropy_error(h, b) - 0.5) < 1e-12
    assert abs(leakage(h, b_perp) - 0.3) < 1e-12
    # sampled unit v in S never exceed the reported maximum of |vᵀHv − 1|
    coef = torch.randn(2000, 2, dtype=D64)
    v = (coef / coef.norm(dim=1, keepdim=True)) @ b.T
    sampled = ((v @ h * v).sum(1) - 1).abs().max()
    assert sampled <= 0.5 + 1e-12 and sampled > 0.49
    assert isotropy_error(h, b[:, :0]) == 0.0 and leakage(h, b_perp[:, :0]) == 0.0


def test_random_subspace_is_orthonormal_and_checked():
    b, b_perp = random_subspace(6, 2, torch.Generator().manual_seed(12))
    q = torch.cat([b, b_perp], 1)
    torch.testing.assert_close(q.T @ q, torch.eye(6, dtype=D64), rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="dimension 0..6"):
        random_subspace(6, 7)


# ------------------------------------------------------------------ loss blocks
@pytest.mark.parametrize("name", ["vicreg", "info_nce", "barlow_twins", "negative_cosine"])
def test_sample_loss_block_matches_dense_hessian(name):
    g = torch.Generator().manual_seed(13)
    u, other = torch.randn(5, 4, dtype=D64, generator=g), torch.randn(5, 4, dtype=D64, generator=g)
    loss = analysis_loss(name, other)
    full = torch.func.hessian(loss)(u)
    for i in (0, 3):
        torch.testing.assert_close(sample_loss_block(loss, u, i), full[i, :, i, :], rtol=1e-10, atol=1e-12)


def test_sample_loss_block_readings():
    g = torch.Generator().manual_seed(14)
    u, c = torch.randn(3, 4, dtype=D64, generator=g), torch.randn(3, 4, dtype=D64, generator=g)
    loss = analysis_loss("negative_cosine", c)
    amb = torch.func.hessian(loss)(u)[1, :, 1, :]
    uh = u[1] / u[1].norm()
    p = torch.eye(4, dtype=D64) - torch.outer(uh, uh)
    tan = sample_loss_block(loss, u, 1, "tangential")
    torch.testing.assert_close(tan, p @ amb @ p, rtol=1e-10, atol=1e-12)
    assert split_eigen(tan).n_zero >= 1  # the radial direction
    # the MSE premise is the MSE loss's own block, I / N
    torch.testing.assert_close(sample_loss_block(analysis_loss("mse", c), u, 1), torch.eye(4, dtype=D64) / 3)
    # −cos is 0-homogeneous in u: uᵀAu = 0 with Au = −∇L ≠ 0, so the ambient block is indefinite
    s = split_eigen(amb)
    assert s.n_negative >= 1 and s.n_positive >= 1
    assert abs(float(u[1] @ amb @ u[1])) < 1e-12
    with pytest.raises(ValueError, match="outside the batch"):
        sample_loss_block(loss, u, 3)


# ------------------------------------------------------------------ errors
def test_split_eigen_errors():
    with pytest.raises(ValueError, match="square"):
        split_eigen(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="not symmetric"):
        split_eigen(torch.tensor([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="non-finite"):
        split_eigen(torch.tensor([[math.nan, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="rel_tol"):
        split_eigen(torch.eye(2), rel_tol=0.0)
    with pytest.raises(ValueError, match="part must be"):
        split_eigen(torch.eye(2)).part("negative")


def test_rank_floor_is_relative():
    a = torch.diag(torch.tensor([1e6, 1.0, 1e-5], dtype=D64))  # 1e-5 < 1e-10 · 1e6
    s = split_eigen(a, rel_tol=1e-10)
    assert (s.n_positive, s.n_zero, s.floor) == (2, 1, pytest.approx(1e-4))
    assert s.condition_positive() == pytest.approx(1e6)
    assert split_eigen(-torch.eye(2)).condition_positive() is None

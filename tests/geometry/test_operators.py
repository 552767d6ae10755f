"""SymmetricOperator against dense float64 references and scipy's eigsh."""

import numpy as np
import pytest
import torch
from scipy.sparse.linalg import LinearOperator, aslinearoperator, eigsh

from headgeom.geometry.linalg.operators import SymmetricOperator, as_operator, check_symmetric


def _sym(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    return A + A.T


def _q_diag_qt(lam: torch.Tensor, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(lam.numel(), lam.numel(), generator=g, dtype=torch.float64))
    return Q @ torch.diag(lam) @ Q.T


def test_from_dense_matvec_matmat_dense_match_the_matrix():
    A = _sym(9, 0)
    op = SymmetricOperator.from_dense(A)
    g = torch.Generator().manual_seed(1)
    v, V = torch.randn(9, generator=g, dtype=torch.float64), torch.randn(9, 4, generator=g, dtype=torch.float64)
    assert op.shape == (9, 9) and op.dtype == torch.float64 and op.device == torch.device("cpu")
    torch.testing.assert_close(op.matvec(v), A @ v, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(op @ v, A @ v, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(op.matmat(V), A @ V, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(op @ V, A @ V, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(op.dense(), A, rtol=1e-14, atol=1e-14)


def test_matmat_falls_back_to_stacked_matvecs_and_uses_a_given_matmat():
    A = _sym(6, 2)
    calls = {"mv": 0, "mm": 0}

    def mv(v):
        calls["mv"] += 1
        return A @ v

    def mm(V):
        calls["mm"] += 1
        return A @ V

    V = torch.randn(6, 3, dtype=torch.float64)
    plain = SymmetricOperator(mv, 6)
    torch.testing.assert_close(plain.matmat(V), A @ V, rtol=1e-14, atol=1e-14)
    assert calls == {"mv": 3, "mm": 0}
    batched = SymmetricOperator(mv, 6, matmat=mm)
    torch.testing.assert_close(batched.dense(), A, rtol=1e-14, atol=1e-14)
    assert calls == {"mv": 3, "mm": 1}


def test_to_scipy_eigsh_agrees_with_known_eigenvalues():
    lam = torch.cat([torch.tensor([-9.0, -7.5, -7.0]), torch.linspace(-3, 3, 194), torch.tensor([5.0, 6.0, 8.0])])
    lam = lam.to(torch.float64)
    op = SymmetricOperator.from_dense(_q_diag_qt(lam, 3))
    L = op.to_scipy()
    assert isinstance(L, LinearOperator) and L.shape == (200, 200) and L.dtype == np.float64
    top = np.sort(eigsh(L, k=3, which="LA", return_eigenvectors=False, tol=1e-12))
    low = np.sort(eigsh(L, k=3, which="SA", return_eigenvectors=False, tol=1e-12))
    np.testing.assert_allclose(top, [5.0, 6.0, 8.0], rtol=1e-10)
    np.testing.assert_allclose(low, [-9.0, -7.5, -7.0], rtol=1e-10)
    x = np.random.default_rng(0).standard_normal(200)
    np.testing.assert_allclose(L.rmatvec(x), L.matvec(x), rtol=0, atol=0)
    np.testing.assert_allclose(L.matvec(x[:, None]).ravel(), op.dense().numpy() @ x, rtol=1e-12, atol=1e-12)


def test_to_scipy_of_a_float32_operator_returns_float64():
    A = _sym(5, 4).float()
    L = SymmetricOperator.from_dense(A).to_scipy()
    out = L.matmat(np.eye(5))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, A.double().numpy(), rtol=1e-6, atol=1e-6)


def test_as_operator_wraps_duck_typed_and_scipy_operators():
    A = _sym(7, 5)

    class Duck:
        shape = (7, 7)
        dtype = torch.float64

        def matvec(self, v):
            return A @ v

    torch.testing.assert_close(as_operator(Duck()).dense(), A, rtol=1e-14, atol=1e-14)
    wrapped = as_operator(aslinearoperator(A.numpy()))
    torch.testing.assert_close(wrapped.dense(), A, rtol=1e-14, atol=1e-14)
    op = SymmetricOperator.from_dense(A)
    assert as_operator(op) is op


def test_error_paths_speak_to_the_user():
    A = _sym(4, 6)
    op = SymmetricOperator.from_dense(A)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        op.matvec(torch.zeros(5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(4, m\)"):
        op.matmat(torch.zeros(3, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="operator @ x"):
        op @ torch.zeros(4, 4, 4)
    with pytest.raises(ValueError, match="must return shape"):
        SymmetricOperator(lambda v: v[:2], 4).matvec(torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="positive int"):
        SymmetricOperator(lambda v: v, 0)
    with pytest.raises(TypeError, match="callable"):
        SymmetricOperator("not a function", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="floating"):
        SymmetricOperator(lambda v: v, 3, dtype=torch.int64)
    asym = A.clone()
    asym[0, 1] += 1e-3
    with pytest.raises(ValueError, match="not symmetric"):
        SymmetricOperator.from_dense(asym)
    with pytest.raises(ValueError, match="square"):
        SymmetricOperator.from_dense(torch.zeros(3, 4, dtype=torch.float64))
    bad = A.clone()
    bad[2, 2] = float("nan")
    with pytest.raises(ValueError, match="1 non-finite"):
        SymmetricOperator.from_dense(bad)
    with pytest.raises(TypeError, match="from_dense"):
        as_operator(A)
    with pytest.raises(TypeError, match=".matvec and .shape"):
        as_operator([1, 2, 3])


def test_check_symmetric_tolerance_is_relative():
    A = _sym(6, 7) * 1e6
    B = A.clone()
    B[1, 3] += 1e-9 * A.abs().max()  # below 1e-8 relative: accepted
    check_symmetric(B)
    B[1, 3] += 1e-6 * A.abs().max()
    with pytest.raises(ValueError, match="max\\|A - A\\^T\\| / max\\|A\\|"):
        check_symmetric(B)
    blocks = torch.stack([A, B, A])
    with pytest.raises(ValueError, match=r"blocks \[1\]"):
        check_symmetric(blocks)

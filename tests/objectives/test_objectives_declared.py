"""AnalysisLoss: the one-view loss and its declared Hessian forms, against autograd Hessians."""
from __future__ import annotations

import pytest
import torch
from torch.autograd.functional import hessian

from headgeom.geometry import effective_hessian
from headgeom.objectives import AnalysisLoss, analysis_loss, as_analysis_loss

DT = torch.float64
N, K = 5, 4


def declared_blocks(structure, u: torch.Tensor) -> torch.Tensor:
    """alpha_i I + U_i B_i U_iᵀ (N, k, k) written out."""
    alpha, U, B = structure(u)
    eye = torch.eye(u.shape[1], dtype=u.dtype)
    return torch.stack([alpha[i] * eye + (U[i] @ B[i] @ U[i].T if U is not None else 0) for i in range(len(alpha))])


def autograd_blocks(loss, u: torch.Tensor) -> torch.Tensor:
    n, k = u.shape
    full = hessian(lambda v: loss(v.reshape(n, k)), u.reshape(-1)).reshape(n, k, n, k)
    return torch.stack([full[i, :, i, :] for i in range(n)])


def test_scaled_keeps_value_and_scales_the_declared_hessian():
    g = torch.Generator().manual_seed(0)
    u, c = torch.randn(N, K, generator=g, dtype=DT), torch.randn(N, K, generator=g, dtype=DT)
    base = analysis_loss("negative_cosine", c)
    loss = base.scaled(-2.5, shift=3.0)
    assert float(loss(u)) == pytest.approx(3.0 - 2.5 * float(base(u)), rel=1e-14)
    ref = autograd_blocks(loss, u)
    torch.testing.assert_close(declared_blocks(loss.hessian_structure, u), ref, rtol=1e-10, atol=1e-13)
    other = torch.randn(N, K, generator=g, dtype=DT)
    coupled = analysis_loss("vicreg", other).scaled(0.5)
    torch.testing.assert_close(coupled.diagonal_blocks(u), autograd_blocks(coupled, u), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["negative_cosine", "nt_xent"])
def test_first_rows_holds_the_other_rows_and_carries_declarations(name):
    g = torch.Generator().manual_seed(1)
    u, other = torch.randn(N, K, generator=g, dtype=DT), torch.randn(N, K, generator=g, dtype=DT)
    loss = analysis_loss(name, other)
    b = 2
    sub = loss.first_rows(b, u)
    assert float(sub(u[:b])) == pytest.approx(float(loss(u)), rel=1e-14)
    ref = autograd_blocks(sub, u[:b].clone())
    if name == "negative_cosine":
        assert sub.diagonal_blocks is None
        torch.testing.assert_close(declared_blocks(sub.hessian_structure, u[:b]), ref, rtol=1e-10, atol=1e-13)
    else:
        assert sub.hessian_structure is None
        torch.testing.assert_close(sub.diagonal_blocks(u[:b]), ref, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="first_rows needs"):
        loss.first_rows(N + 1, u)


def test_plain_callables_declare_nothing_and_other_things_are_refused():
    f = lambda u: u.pow(2).sum()  # noqa: E731
    wrapped = as_analysis_loss(f)
    assert wrapped.fn is f and not wrapped.declares
    assert as_analysis_loss(wrapped) is wrapped
    with pytest.raises(TypeError, match="callable"):
        effective_hessian(torch.nn.Identity(), "negative_cosine", torch.randn(2, 3))
    with pytest.raises(TypeError, match="callable"):
        AnalysisLoss(3.0)

"""MoCo v3's loss (headgeom.objectives.mocov3) against the official convention written as a loop
(tests/objectives_reference.py), and its closed-form Hessian against the dense float64 reference.

The loss: rtol 1e-10 against the loop (float64 round-off). The closed forms: the per-sample blocks
of ``mocov3_hessian_structure`` (α I + U B Uᵀ) and ``mocov3_diagonal_blocks`` against the diagonal
blocks of ``torch.func.hessian`` of the loss in q, keys fixed, at several seeds, temperatures and
query norms far from 1 (the normalisation's curvature matters), rtol 1e-9 / atol 1e-12; the
off-diagonal sample blocks of that dense Hessian are zero (the keys are stop-gradient), so the
blocks are the whole Hessian.
"""
import pytest
import torch
from torch.func import hessian

from headgeom.objectives import (
    OBJECTIVES, analysis_loss, mocov3, mocov3_diagonal_blocks, mocov3_hessian_structure, mocov3_symmetric,
)
from objectives_reference import mocov3_ref

DT = torch.float64


def queries_keys(n=5, d=4, seed=0, scale=2.5):
    g = torch.Generator().manual_seed(seed)
    q = scale * torch.randn(n, d, generator=g, dtype=DT)
    k = torch.randn(n, d, generator=g, dtype=DT)
    return q, k


def dense_blocks(q, k, t):
    n, d = q.shape
    full = hessian(lambda x: mocov3(x, k, t))(q).reshape(n, d, n, d).permute(0, 2, 1, 3)  # (N, N, D, D)
    idx = torch.arange(n)
    off = full.clone()
    off[idx, idx] = 0
    return full[idx, idx], off


@pytest.mark.parametrize("t", [0.2, 0.05, 1.0])
def test_mocov3_matches_the_official_convention(t):
    q, k = queries_keys(n=6)
    got = mocov3(q, k, temperature=t)
    ref = mocov3_ref(q.numpy(), k.numpy(), t)
    assert abs(got.item() - ref) <= 1e-10 * max(1.0, abs(ref))
    q2, k2 = queries_keys(n=6, seed=1)
    sym = mocov3_symmetric(q, q2, k, k2, t)
    ref_sym = mocov3_ref(q.numpy(), k2.numpy(), t) + mocov3_ref(q2.numpy(), k.numpy(), t)
    assert abs(sym.item() - ref_sym) <= 1e-10 * max(1.0, abs(ref_sym))


def test_keys_receive_no_gradient_and_the_default_temperature_is_the_papers():
    q, k = queries_keys()
    q.requires_grad_(True)
    k.requires_grad_(True)
    g_q, g_k = torch.autograd.grad(mocov3(q, k), (q, k), allow_unused=True)
    assert g_q.abs().max() > 1e-3 and g_k is None
    assert mocov3(q, k).item() == pytest.approx(mocov3_ref(q.detach().numpy(), k.detach().numpy(), 0.2), rel=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("t", [0.2, 0.07, 1.0])
def test_closed_form_blocks_match_the_dense_hessian(seed, t):
    q, k = queries_keys(n=6, d=5, seed=seed)
    want, off = dense_blocks(q, k, t)
    assert want.abs().max() > 1e-3 and off.abs().max() == 0  # separable in q: the blocks are all of it
    alpha, U, B = mocov3_hessian_structure(q, k, t)
    assert U.shape == (6, 5, 8) and B.shape == (6, 8, 8)
    eye = torch.eye(5, dtype=DT)
    written = torch.stack([alpha[i] * eye + U[i] @ B[i] @ U[i].T for i in range(6)])
    torch.testing.assert_close(written, want, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(mocov3_diagonal_blocks(q, k, t), want, rtol=1e-9, atol=1e-12)


def test_the_registered_analysis_loss_declares_what_the_engine_checks():
    from headgeom.geometry.engine.loss_curvature import coupled_blocks_for, curvature_for

    spec = OBJECTIVES["mocov3"]
    assert spec.hessian_structure is mocov3_hessian_structure and spec.diagonal_blocks is mocov3_diagonal_blocks
    assert not spec.two_view and not spec.batch_coupled and spec.options == ["temperature"]
    q, k = queries_keys(n=4, d=6, seed=3)
    loss = analysis_loss("mocov3", k, temperature=0.3)
    assert loss(q).item() == pytest.approx(mocov3(q, k, 0.3).item(), rel=1e-14)
    for reading in ("ambient", "tangential"):  # each raises if the declaration disagrees with exact HVPs
        assert curvature_for(loss, q, reading) is not None
        assert coupled_blocks_for(loss, q, reading) is not None


def test_bad_inputs_raise_one_clear_error():
    q, k = queries_keys()
    with pytest.raises(ValueError, match="at least 2 samples"):
        mocov3(q[:1], k[:1])
    with pytest.raises(ValueError, match="same shape"):
        mocov3_hessian_structure(q, k[:3])
    with pytest.raises(ValueError, match="temperature"):
        mocov3_diagonal_blocks(q, k, 0.0)

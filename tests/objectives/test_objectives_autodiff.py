"""The objectives under autograd and torch.func: gradcheck / gradgradcheck in float64, the
stop-gradient sides, torch.func.hessian of every analysis_loss against
torch.autograd.functional.hessian, and vmap over Hessian-vector products.

Tolerances: gradcheck defaults (eps 1e-6, atol 1e-5, rtol 1e-3); dense Hessians agree to
1e-10 and are symmetric to 1e-10 (float64 round-off).
"""
import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.func import grad, hessian, jvp, vmap

from headgeom.objectives import (
    OBJECTIVES, analysis_loss, barlow_twins, dino, info_nce, mse_to_target, negative_cosine,
    nt_xent, simsiam_loss, vicreg,
)

DT = torch.float64
N, K = 4, 3


def rand(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=DT) * scale).requires_grad_(True)


# Losses in which both inputs receive gradient: gradcheck checks both.
TWO_SIDED = {
    "nt_xent": lambda a, b: nt_xent(a, b, 0.5),
    "info_nce": lambda a, b: info_nce(a, b, 0.3),
    # small coefficients and std < 1 on some features so every VICReg term is exercised
    "vicreg": lambda a, b: vicreg(a, b, 1.0, 1.0, 1.0),
    "barlow_twins": lambda a, b: barlow_twins(a, b, 0.1),
}


@pytest.mark.parametrize("name", sorted(TWO_SIDED))
def test_gradcheck_two_sided(name):
    a = rand(N, K, seed=1, scale=0.7)
    b = rand(N, K, seed=2, scale=0.7)
    assert gradcheck(TWO_SIDED[name], (a, b))
    assert gradgradcheck(TWO_SIDED[name], (a, b))


def test_gradcheck_stop_gradient_losses_on_the_online_side():
    target = rand(N, K, seed=3).detach()
    u = rand(N, K, seed=4)
    for fn in (mse_to_target, negative_cosine):
        assert gradcheck(lambda x: fn(x, target), (u,))
        assert gradgradcheck(lambda x: fn(x, target), (u,))
    s1, s2 = rand(N, K, seed=5), rand(N, K, seed=6)
    t = [rand(N, K, seed=7).detach(), rand(N, K, seed=8).detach()]
    c = rand(K, seed=9).detach() * 0.1
    assert gradcheck(lambda x, y: dino([x, y], t, c, 0.5, 0.2), (s1, s2))
    assert gradgradcheck(lambda x, y: dino([x, y], t, c, 0.5, 0.2), (s1, s2))


@pytest.mark.parametrize("fn", [mse_to_target, negative_cosine], ids=["mse", "negative_cosine"])
def test_gradient_flows_to_the_online_side_only(fn):
    u, c = rand(N, K, seed=10), rand(N, K, seed=11)
    g_u, g_c = torch.autograd.grad(fn(u, c), (u, c), allow_unused=True)
    assert g_u is not None and g_u.abs().max() > 1e-3
    assert g_c is None or torch.count_nonzero(g_c) == 0
    # and the online gradient is that of the formula with c a constant
    ref_u = u.detach().clone().requires_grad_(True)
    c0 = c.detach()
    if fn is mse_to_target:
        ref = 0.5 * ((ref_u - c0) ** 2).sum() / N
    else:
        ref = -sum((ref_u[i] @ c0[i]) / (ref_u[i].norm() * c0[i].norm()) for i in range(N)) / N
    (g_ref,) = torch.autograd.grad(ref, ref_u)
    torch.testing.assert_close(g_u, g_ref, rtol=1e-12, atol=1e-12)


def test_simsiam_gradients_reach_predictions_not_projections():
    p1, p2, z1, z2 = (rand(N, K, seed=s) for s in range(12, 16))
    grads = torch.autograd.grad(simsiam_loss(p1, p2, z1, z2), (p1, p2, z1, z2), allow_unused=True)
    assert all(g.abs().max() > 1e-3 for g in grads[:2])
    assert all(g is None or torch.count_nonzero(g) == 0 for g in grads[2:])


def test_dino_teacher_and_centre_receive_no_gradient():
    s = [rand(N, K, seed=20), rand(N, K, seed=21), rand(N, K, seed=22)]
    t = [rand(N, K, seed=23), rand(N, K, seed=24)]
    c = rand(1, K, seed=25)
    grads = torch.autograd.grad(dino(s, t, c), (*s, *t, c), allow_unused=True)
    assert all(g.abs().max() > 1e-4 for g in grads[:3])
    assert all(g is None or torch.count_nonzero(g) == 0 for g in grads[3:])


def other_for(name):
    return rand(N, K, seed=30, scale=0.8)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_analysis_loss_hessian_symmetric_and_matches_autograd(name):
    other = other_for(name)
    loss = analysis_loss(name, other)
    u = rand(N, K, seed=31, scale=0.8).detach()
    h_func = hessian(loss)(u).reshape(N * K, N * K)
    h_auto = torch.autograd.functional.hessian(loss, u).reshape(N * K, N * K)
    assert torch.isfinite(h_func).all() and h_func.abs().max() > 1e-3
    torch.testing.assert_close(h_func, h_func.T, rtol=0, atol=1e-10)
    torch.testing.assert_close(h_func, h_auto, rtol=1e-10, atol=1e-10)
    # batch coupling shows up as off-diagonal sample blocks exactly when the spec says so,
    # except info_nce, whose anchor side (u) is separable with the other view fixed
    coupled = OBJECTIVES[name].batch_coupled and name != "info_nce"
    assert (off_block_max(h_func) > 1e-8) == coupled


def off_block_max(h):
    blocks = h.reshape(N, K, N, K).permute(0, 2, 1, 3)
    return (blocks.abs().sum(dim=(2, 3)) * (1 - torch.eye(N, dtype=DT))).max()


def test_info_nce_couples_samples_on_the_positive_side():
    other = other_for("info_nce").detach()
    u = rand(N, K, seed=31, scale=0.8).detach()
    assert off_block_max(hessian(lambda x: info_nce(other, x))(u).reshape(N * K, N * K)) > 1e-3


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_vmapped_hvp_matches_dense_hessian(name):
    loss = analysis_loss(name, other_for(name))
    u = rand(N, K, seed=32, scale=0.8).detach()
    tangents = rand(5, N, K, seed=33).detach()
    hv = vmap(lambda w: jvp(grad(loss), (u,), (w,))[1])(tangents)
    dense = torch.autograd.functional.hessian(loss, u).reshape(N * K, N * K)
    torch.testing.assert_close(hv.reshape(5, -1), tangents.reshape(5, -1) @ dense, rtol=1e-10, atol=1e-10)


def test_analysis_loss_equals_the_loss_with_other_fixed():
    other = rand(N, K, seed=40)
    u = rand(N, K, seed=41)
    for name in ("nt_xent", "info_nce", "vicreg", "barlow_twins", "mse", "negative_cosine"):
        fn = OBJECTIVES[name].fn
        loss = analysis_loss(name, other)
        torch.testing.assert_close(loss(u), fn(u, other.detach()), rtol=1e-14, atol=0)
        (g_other,) = torch.autograd.grad(loss(u), (other,), allow_unused=True)
        assert g_other is None  # other is a detached constant inside the closure
    torch.testing.assert_close(analysis_loss("info_nce", other, temperature=0.3)(u),
                               info_nce(u, other, 0.3), rtol=1e-14, atol=0)


def test_dino_analysis_loss_is_the_cross_view_term():
    # u: student output of global view 0; other: teacher output of global view 1.
    s0, s1 = rand(N, K, seed=42), rand(N, K, seed=43)
    t0, t1 = rand(N, K, seed=44), rand(N, K, seed=45)
    c = rand(1, K, seed=46).detach() * 0.1
    loss = analysis_loss("dino", t1, center=c, student_temp=0.2, teacher_temp=0.05)
    q = torch.softmax((t1.detach() - c) / 0.05, dim=1)
    ref = -(q * torch.log_softmax(s0 / 0.2, dim=1)).sum() / N
    torch.testing.assert_close(loss(s0), ref, rtol=1e-12, atol=1e-12)
    # with two global views the full loss is the mean of the two cross terms
    other_term = analysis_loss("dino", t0, center=c, student_temp=0.2, teacher_temp=0.05)(s1)
    torch.testing.assert_close(dino([s0, s1], [t0, t1], c, 0.2, 0.05),
                               (loss(s0) + other_term) / 2, rtol=1e-12, atol=1e-12)
    # centre zero unless given
    q0 = torch.softmax(t1.detach() / 0.04, dim=1)
    torch.testing.assert_close(analysis_loss("dino", t1)(s0),
                               -(q0 * torch.log_softmax(s0 / 0.1, dim=1)).sum() / N,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_other_float_dtypes_run_and_keep_dtype(name, dtype):
    other = rand(8, K, seed=50).detach()
    u = rand(8, K, seed=51).detach()
    x64 = analysis_loss(name, other)(u)
    x = analysis_loss(name, other.to(dtype))(u.to(dtype))
    assert x.dtype == dtype and x.shape == ()
    tol = 1e-4 if dtype == torch.float32 else 5e-2
    assert abs(x.double().item() - x64.item()) <= tol * max(1.0, abs(x64.item()))

"""Loss HVPs fall back to reverse-over-reverse where forward-mode AD fails (readings.hvp_fn).

The case: a user-written VICReg (plain torch: F.mse_loss against a constant, sqrt(var + eps),
relu(1 − std), off-diagonal covariance) on a Tanh head with train-mode BatchNorm. Forward-mode
AD over its gradient raises "ZeroTensors are immutable"; the engine must still give the dense
float64 reference (tests/geometry_reference.py: torch.autograd.functional, reverse mode only).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.functional import hessian
from torch.func import grad, jvp

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.analysis_facts import residual_gradient
from headgeom.geometry.engine.readings import autograd_loss_hvp, hvp_fn, loss_hvp
from headgeom.objectives import analysis_loss

from geometry_reference import assert_close, diagonal_blocks, reference_parts

DT = torch.float64
N, D, K = 4, 6, 5


def user_vicreg(target: torch.Tensor, eps: float = 1e-4):
    """VICReg as a user would write it, against a constant second view."""
    def loss(u: torch.Tensor) -> torch.Tensor:
        invariance = F.mse_loss(u, target)
        std = torch.sqrt(u.var(dim=0) + eps)
        variance = F.relu(1 - std).mean()
        c = u - u.mean(dim=0)
        cov = c.T @ c / (u.shape[0] - 1)
        off = cov - torch.diag(torch.diag(cov))
        return 25.0 * invariance + 25.0 * variance + off.pow(2).sum() / u.shape[1]
    return loss


def tanh_bn_head(mixed: bool) -> nn.Module:
    """mixed: the last three output columns scaled up so that their std exceeds 1 (hinge off)."""
    torch.manual_seed(0)
    head = nn.Sequential(nn.Linear(D, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, K)).to(DT)
    if mixed:
        with torch.no_grad():
            head[3].weight[2:].mul_(6.0)
    return head.train()


def case(mixed: bool):
    head = tanh_bn_head(mixed)
    g = torch.Generator().manual_seed(3)
    z = torch.randn(N, D, dtype=DT, generator=g)
    target = torch.randn(N, K, dtype=DT, generator=g)
    return head, user_vicreg(target), z


@pytest.mark.parametrize("mixed", [False, True])
def test_user_vicreg_on_train_bn_tanh_head_matches_reference(mixed):
    head, loss, z = case(mixed)
    u = head(z).detach()
    std = torch.sqrt(u.var(dim=0) + 1e-4)
    if mixed:
        assert bool((std > 1).any()) and bool((std < 1).any()), "the case must mix active and inactive hinges"
    # the crash this guards against: plain forward-over-reverse on this loss
    with pytest.raises(RuntimeError, match="ZeroTensor"):
        jvp(grad(loss), (u,), (torch.ones_like(u),))

    h_ref, g_ref, m_ref = reference_parts(head, loss, z)
    eh = effective_hessian(head, loss, z)
    assert eh.info()["train_mode_batchnorm"] and not eh.separable_loss
    assert_close(eh.dense(), h_ref, what="H_eff")
    assert_close(eh.gauss_newton(), g_ref, what="G")
    assert_close(eh.interaction(), m_ref, what="M")
    h, g, m = eh.decomposed_blocks()
    assert_close(h, diagonal_blocks(h_ref, N, D), what="blocks")
    assert_close(g, diagonal_blocks(g_ref, N, D), what="G blocks")
    assert_close(m, diagonal_blocks(m_ref, N, D), what="M blocks")
    v = torch.randn(N * D, dtype=DT, generator=torch.Generator().manual_seed(5))
    assert_close(eh.matvec(v), h_ref @ v, what="matvec")
    assert_close(eh.gauss_newton_matvec(v), g_ref @ v, what="G matvec")


def test_user_vicreg_on_eval_mode_head_blocks_match_reference():
    """The row-wise block paths (structured and sandwich) take loss HVPs under vmap too."""
    head, loss, z = case(True)
    head.eval()
    h_ref, g_ref, _ = reference_parts(head, loss, z)
    for strategy in ("sandwich", "jacobian"):
        eh = effective_hessian(head, loss, z, block_strategy=strategy)
        assert_close(eh.blocks(), diagonal_blocks(h_ref, N, D), what=f"blocks ({strategy})")
        assert_close(eh.gauss_newton_blocks(), diagonal_blocks(g_ref, N, D), what=f"G blocks ({strategy})")


def dense_loss_hessian(loss, u: torch.Tensor, reading: str) -> torch.Tensor:
    """∇²_u L as an (N·K, N·K) matrix by torch.func.hessian; for the tangential reading projected
    on each sample's tangent space, P ∇²L P with P = blockdiag(I − û ûᵀ)."""
    hu = hessian(lambda x: loss(x.reshape(N, K)), u.reshape(-1))
    if reading == "tangential":
        u_hat = u / u.norm(dim=1, keepdim=True)
        p = torch.block_diag(*[torch.eye(K, dtype=DT) - torch.outer(r, r) for r in u_hat])
        hu = p @ hu @ p
    return hu


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
def test_loss_hvp_falls_back_and_equals_dense_hessian(reading):
    _, loss, _ = case(True)
    u = torch.randn(N, K, dtype=DT, generator=torch.Generator().manual_seed(7))
    hu = dense_loss_hessian(loss, u, reading)
    hvp = loss_hvp(loss, u, reading)
    ws = torch.randn(3, N, K, dtype=DT, generator=torch.Generator().manual_seed(8))
    for w in ws:  # first call falls back, later calls go straight to reverse mode
        assert_close(hvp(w).reshape(-1), hu @ w.reshape(-1), what=f"loss HVP ({reading})")
    batched = torch.vmap(hvp)(ws)
    assert_close(batched.reshape(3, -1), ws.reshape(3, -1) @ hu.T, what="vmapped loss HVP")


def test_hvp_fn_keeps_forward_mode_where_it_works():
    """A smooth function: the result equals the dense Hessian product (forward-over-reverse)."""
    f = lambda x: (x.sin() * x.roll(1)).sum() ** 2  # noqa: E731
    x = torch.randn(7, dtype=DT, generator=torch.Generator().manual_seed(9))
    w = torch.randn(7, dtype=DT, generator=torch.Generator().manual_seed(10))
    assert_close(hvp_fn(f, x)(w), hessian(f, x) @ w, what="HVP")


@pytest.mark.parametrize("reading", ["ambient", "tangential"])
@pytest.mark.parametrize("name", ["vicreg", "negative_cosine", "linear", "constant"])
def test_autograd_loss_hvp_equals_the_dense_hessian(name, reading):
    """The declaration checks' HVP (torch.autograd, reverse over reverse) against the dense
    Hessian; a loss linear or constant in u has none (zeros, not an autograd error)."""
    g = torch.Generator().manual_seed(11)
    u = torch.randn(N, K, dtype=DT, generator=g)
    target = torch.randn(N, K, dtype=DT, generator=g)
    loss = {"vicreg": case(True)[1], "negative_cosine": analysis_loss("negative_cosine", target),
            "linear": lambda x: (x * target).sum(), "constant": lambda x: target.sum()}[name]
    hu = dense_loss_hessian(loss, u, reading)
    hvp = autograd_loss_hvp(loss, u, reading)
    for w in torch.randn(2, N, K, dtype=DT, generator=g):  # the graph is kept across calls
        assert_close(hvp(w).reshape(-1), hu @ w.reshape(-1), what=f"{name} autograd HVP ({reading})")
    if name in ("linear", "constant"):
        assert not hu.any() and not hvp(target).any()


@pytest.mark.parametrize("name", ["vicreg", "negative_cosine", "constant"])
def test_residual_gradient_equals_torch_func(name):
    g = torch.Generator().manual_seed(12)
    u = torch.randn(N, K, dtype=DT, generator=g)
    target = torch.randn(N, K, dtype=DT, generator=g)
    loss = {"vicreg": case(True)[1], "negative_cosine": analysis_loss("negative_cosine", target),
            "constant": lambda x: target.sum()}[name]
    with torch.no_grad():  # as a tracker may call the engine
        rho = residual_gradient(loss, u)
    assert torch.equal(rho, grad(loss)(u))
    with pytest.raises(ValueError, match="to a scalar tensor"):
        residual_gradient(lambda x: x, u)

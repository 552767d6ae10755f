"""Collapsed equilibria (headgeom.theory.collapse) checked with plain torch.autograd in float64.

References are written here independently: gradients and Hessians by torch.autograd /
torch.autograd.functional, and the closed form of M for a one-hidden-layer head,
M_i = W1ᵀ diag(σ''(a_i) ⊙ W2ᵀρ_i) W1 with σ'' from double autograd of the activation.
"""
import math

import pytest
import torch
from torch.autograd.functional import hessian, jacobian

from headgeom.geometry import effective_hessian
from headgeom.heads import HeadSpec, ProjectionHead, scale_linear_weights_
from headgeom.theory.collapse import (
    OBJECTIVES,
    collapsed_equilibrium,
    equilibrium_residual,
    left_null_basis,
    pseudo_collapsed_point,
)

D, HIDDEN, K, N = 4, 12, 9, 3
ACTS = ("linear", "relu", "gelu", "silu", "softplus", "tanh")
SMOOTH = ("gelu", "silu", "softplus", "tanh")


def make_head(act: str, seed: int = 0, d: int = D, k: int = K) -> ProjectionHead:
    torch.manual_seed(seed)
    return ProjectionHead(HeadSpec((d, HIDDEN, k), activation=act, bias=False), dtype=torch.float64).eval()


def z_bar(seed: int = 1, d: int = D) -> torch.Tensor:
    return torch.randn(d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def autograd_grads(head, point):
    """(∇_z L, ρ = ∇_u L) by plain torch.autograd."""
    z = point.z.clone().requires_grad_(True)
    u = head(z)
    loss = point.loss()(u)
    gz, gu = torch.autograd.grad(loss, [z, u])
    return gz, gu


def full_hessian(head, point):
    """Dense (N·d, N·d) ∇²_z L(h(z)) by torch.autograd.functional.hessian."""
    loss = point.loss()
    n, d = point.z.shape
    return hessian(lambda zf: loss(head(zf.reshape(n, d))), point.z.reshape(-1))


def test_left_null_basis_full_rank_and_deficient():
    g = torch.Generator().manual_seed(0)
    full = torch.randn(12, 5, generator=g, dtype=torch.float64)
    low = torch.randn(12, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 5, generator=g, dtype=torch.float64)
    for a, m in ((full, 7), (low, 9)):
        b = left_null_basis(a)
        assert b.shape == (12, m)
        torch.testing.assert_close(b.T @ b, torch.eye(m, dtype=torch.float64), rtol=0, atol=1e-12)
        assert (a.T @ b).abs().max() < 1e-12 * a.abs().max()
        # together with the column space of a it spans R^k
        q = torch.linalg.qr(a).Q[:, : 12 - m]
        assert torch.linalg.matrix_rank(torch.cat([q, b], 1)) == 12
    with pytest.raises(ValueError, match=r"matrix \(k, c\)"):
        left_null_basis(torch.ones(3))


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("act", ACTS)
def test_constructed_equilibrium_has_zero_representation_gradient(act, objective):
    head = make_head(act)
    point = collapsed_equilibrium(head, z_bar(), N, objective, generator=torch.Generator().manual_seed(2))
    assert torch.equal(point.z, z_bar()[None].expand(N, -1))  # collapsed: all z_i equal
    gz, rho = autograd_grads(head, point)
    jac = jacobian(lambda x: head(x[None])[0], z_bar())
    scale = float(torch.linalg.matrix_norm(jac, 2)) * float(rho.norm())
    assert float(rho.norm()) > 0.05  # ρ of order 1, not a trivial equilibrium
    assert float(gz.norm()) <= 1e-10 * scale, (float(gz.norm()), scale)
    torch.testing.assert_close(point.rho, rho, rtol=0, atol=1e-12 * float(rho.norm()))
    # every ρ_i is in the left null space of J, and (cosine) tangent to the sphere at u
    assert (rho @ jac).abs().max() <= 1e-12 * scale
    if objective == "negative_cosine":
        assert (rho @ point.u[0]).abs().max() <= 1e-12 * float(rho.norm()) * float(point.u[0].norm())
    res = equilibrium_residual(head, point)
    assert res["relative"] <= 1e-10 and res["rho_design_error"] <= 1e-10
    assert math.isclose(res["rho_norm"], float(rho.norm()), rel_tol=1e-12)


def test_mse_targets_give_the_requested_residual():
    head = make_head("silu")
    point = collapsed_equilibrium(head, z_bar(), N, "mse", residual=0.7)
    with torch.no_grad():
        u = head(point.z)
    torch.testing.assert_close((u - point.target).norm(dim=1), torch.full((N,), 0.7, dtype=torch.float64))
    torch.testing.assert_close(point.rho, (u - point.target) / N)  # ∇ of mean_i ½‖u_i − c_i‖²


def test_cosine_targets_are_at_the_requested_angle():
    head = make_head("tanh")
    point = collapsed_equilibrium(head, z_bar(), N, "negative_cosine", angle=1.0)
    cos = torch.nn.functional.cosine_similarity(point.u, point.target, dim=1)
    torch.testing.assert_close(cos, torch.full((N,), math.cos(1.0), dtype=torch.float64))


def test_linear_head_under_mse_has_m_zero_and_psd_h():
    head = make_head("linear")
    point = collapsed_equilibrium(head, z_bar(), N, "mse")
    eh = effective_hessian(head, point.loss(), point.z, reading="ambient")  # the MSE loss's own Hessian
    _, g, m = eh.decomposed_blocks()
    assert float(m.abs().max()) <= 1e-14 * float(g.abs().max())
    h = full_hessian(head, point)
    w = head.layers[1].weight @ head.layers[0].weight  # the composed linear map (k, d)
    expected = torch.block_diag(*[w.T @ w / N] * N)  # H = I_N ⊗ WᵀW / N for the MSE premise
    torch.testing.assert_close(h, expected, rtol=1e-12, atol=1e-14)
    lam = torch.linalg.eigvalsh(h)
    assert float(lam.min()) >= -1e-10 * float(lam.abs().max())


def test_relu_head_away_from_kinks_has_m_exactly_zero():
    head = make_head("relu")
    for objective in OBJECTIVES:
        point = collapsed_equilibrium(head, z_bar(), N, objective)
        with torch.no_grad():
            pre = head.layers[0](point.z)
        assert float(pre.abs().min()) > 1e-6  # the setting is away from the kinks
        m = effective_hessian(head, point.loss(), point.z, reading="ambient").interaction_blocks()
        assert torch.count_nonzero(m) == 0
        # and then H_eff is the pullback G alone, which under MSE is J_iᵀJ_i / N
        if objective == "mse":
            jac = jacobian(lambda x: head(x[None])[0], z_bar())
            torch.testing.assert_close(full_hessian(head, point), torch.block_diag(*[jac.T @ jac / N] * N),
                                       rtol=1e-12, atol=1e-14)


def _second_derivative(act_module, a):
    a = a.clone().requires_grad_(True)
    (d1,) = torch.autograd.grad(act_module(a).sum(), a, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), a)
    return d2


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("act", SMOOTH)
def test_smooth_head_with_nonzero_rho_has_nonzero_m(act, objective):
    head = make_head(act)
    point = collapsed_equilibrium(head, z_bar(), N, objective, generator=torch.Generator().manual_seed(3))
    m = effective_hessian(head, point.loss(), point.z, reading="ambient").interaction_blocks()
    w1, w2 = head.layers[0].weight.detach(), head.layers[2].weight.detach()
    with torch.no_grad():
        a = point.z @ w1.T  # (N, hidden) pre-activations
    s2 = _second_derivative(head.layers[1], a)
    expected = torch.stack([w1.T @ torch.diag(s2[i] * (w2.T @ point.rho[i])) @ w1 for i in range(N)])
    torch.testing.assert_close(m, expected, rtol=1e-10, atol=1e-14)
    assert float(torch.linalg.matrix_norm(expected).min()) > 1e-6 * float(point.rho.norm())
    # the dense reference H_eff minus the pullback metric reproduces M block by block
    h = full_hessian(head, point).reshape(N, D, N, D)
    g = effective_hessian(head, point.loss(), point.z, reading="ambient").gauss_newton_blocks()
    for i in range(N):
        torch.testing.assert_close(h[i, :, i, :] - g[i], m[i], rtol=1e-9, atol=1e-13)


def test_ambient_and_tangential_pullbacks_agree_at_cosine_equilibria():
    # Euler's identity for the 0-homogeneous −cos: P H P − H = (û ρᵀ + ρ ûᵀ)/‖u‖, and Jᵀρ = 0
    head = make_head("silu")
    point = collapsed_equilibrium(head, z_bar(), N, "negative_cosine")
    g_amb = effective_hessian(head, point.loss(), point.z, reading="ambient").gauss_newton_blocks()
    g_tan = effective_hessian(head, point.loss(), point.z, reading="tangential").gauss_newton_blocks()
    torch.testing.assert_close(g_amb, g_tan, rtol=0, atol=1e-12 * float(g_amb.abs().max()))


def test_pseudo_collapsed_point_is_not_an_equilibrium():
    head = scale_linear_weights_(make_head("silu"), 0.1)
    z = torch.randn(N, D, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for objective in OBJECTIVES:
        point = pseudo_collapsed_point(head, z, objective, generator=torch.Generator().manual_seed(6))
        assert not point.equilibrium and point.null_dim is None
        gz, rho = autograd_grads(head, point)
        torch.testing.assert_close(point.rho, rho, rtol=1e-12, atol=0)
        res = equilibrium_residual(head, point)
        assert math.isclose(res["grad_norm"], float(gz.norm()), rel_tol=1e-12)
        assert res["relative"] > 1e-3  # Jᵀρ is generic here, far from round-off


def test_errors_speak_to_the_user():
    with pytest.raises(ValueError, match="expander head"):
        collapsed_equilibrium(make_head("silu", d=4, k=4), z_bar(), N, "mse")
    with pytest.raises(ValueError, match="expander head"):  # the cosine case also needs uᵀr = 0
        collapsed_equilibrium(make_head("silu", d=4, k=5), z_bar(), N, "negative_cosine")
    head = make_head("silu")
    with pytest.raises(ValueError, match="objective must be one of"):
        collapsed_equilibrium(head, z_bar(), N, "vicreg")
    with pytest.raises(ValueError, match="angle"):
        collapsed_equilibrium(head, z_bar(), N, "negative_cosine", angle=0.0)
    with pytest.raises(ValueError, match="positive int"):
        collapsed_equilibrium(head, z_bar(), 0, "mse")
    with pytest.raises(ValueError, match="residual"):
        collapsed_equilibrium(head, z_bar(), N, "mse", residual=-1.0)
    with pytest.raises(ValueError, match=r"shape \(d,\)"):
        collapsed_equilibrium(head, torch.zeros(2, D, dtype=torch.float64), N, "mse")
    with pytest.raises(ValueError, match=r"shape \(N, d\)"):
        pseudo_collapsed_point(head, z_bar(), "mse")


def test_null_directions_lie_in_the_left_null_basis():
    head = make_head("gelu")
    jac = jacobian(lambda x: head(x[None])[0], z_bar())
    for objective, constraints in (("mse", jac), ("negative_cosine", None)):
        point = collapsed_equilibrium(head, z_bar(), 6, objective, generator=torch.Generator().manual_seed(7))
        if constraints is None:
            constraints = torch.cat([jac, point.u[0][:, None]], 1)
        basis = left_null_basis(constraints)
        assert point.null_dim == basis.shape[1] == K - constraints.shape[1]
        r = point.rho / point.rho.norm(dim=1, keepdim=True)
        torch.testing.assert_close(r @ basis @ basis.T, r, rtol=0, atol=1e-12)


def test_rank_deficient_jacobian_still_gives_an_exact_equilibrium():
    torch.manual_seed(0)  # a linear head through a 2-wide bottleneck: rank J = 2 < d = 4
    head = ProjectionHead(HeadSpec((D, 2, K), activation="linear", bias=False), dtype=torch.float64).eval()
    for objective in OBJECTIVES:
        point = collapsed_equilibrium(head, z_bar(), N, objective)
        assert point.null_dim == K - 2  # u = J z lies in the range of J for a bias-free linear head
        gz, rho = autograd_grads(head, point)
        assert float(rho.norm()) > 0.05 and float(gz.norm()) <= 1e-12 * float(rho.norm())

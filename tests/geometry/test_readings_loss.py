"""Each reading is the Hessian of a stated loss (headgeom.geometry.engine.readings, docs/paper.md §1.3).

- tangential reading of the negative cosine: unchanged when the head output is scaled by α
  (α = 0.1, 1, 10), against the dense float64 reference of the unscaled head; PSD for a linear
  head where cos(u_i, c_i) > 0 (and not where it is < 0), against the formula
  J_iᵀ (s_i / (N ‖u_i‖²)) P_i J_i written here; it differs from the ambient H_eff by the radial
  cross terms Σ_i J_iᵀ(û_i ρ_iᵀ + ρ_i û_iᵀ)J_i / ‖u_i‖.
- the MSE premise is the MSE loss read ambient: the engine equals the dense float64 Hessian of
  z ↦ mean_i ½‖h(z_i) − c_i‖² (torch.autograd.functional, written here).
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian, jacobian

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.readings import READINGS, check_reading
from headgeom.objectives import analysis_loss

from geometry_reference import assert_close, diagonal_blocks, reference_parts

DT = torch.float64
N, D, WIDTH, K = 4, 3, 6, 5


def mlp(activation: type[nn.Module] | None, bias: bool = True, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = [nn.Linear(D, WIDTH, bias=bias)]
    if activation is not None:
        layers.append(activation())
    layers.append(nn.Linear(WIDTH, K, bias=bias))
    return nn.Sequential(*layers).to(DT).eval()


def scaled(head: nn.Sequential, alpha: float) -> nn.Sequential:
    """The head with its output multiplied by alpha (last Linear's weight and bias × alpha)."""
    out = copy.deepcopy(head)
    with torch.no_grad():
        out[-1].weight.mul_(alpha)
        if out[-1].bias is not None:
            out[-1].bias.mul_(alpha)
    return out


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, D, generator=g, dtype=DT), torch.randn(N, K, generator=g, dtype=DT)


def test_only_readings_that_are_hessians_of_a_loss():
    assert set(READINGS) == {"ambient", "tangential"}
    with pytest.raises(ValueError, match="objective 'mse' with reading 'ambient'"):
        check_reading("mse")


@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("declared", [True, False], ids=["declared-loss", "plain-loss"])
def test_tangential_cosine_is_invariant_to_scaling_the_head_output(alpha, declared):
    head = mlp(nn.SiLU)
    z, c = batch()
    loss = analysis_loss("negative_cosine", c)
    plain = (lambda u: -torch.nn.functional.cosine_similarity(u, c, dim=1).mean())  # noqa: E731
    h_ref, g_ref, m_ref = reference_parts(head, plain, z, "tangential")  # the unscaled head
    eh = effective_hessian(scaled(head, alpha), loss if declared else plain, z, reading="tangential")
    assert torch.linalg.matrix_norm(m_ref) > 1e-3 * torch.linalg.matrix_norm(h_ref)  # M matters here
    assert_close(eh.dense(), h_ref, rtol=1e-8, atol=1e-12, what=f"H_eff, alpha={alpha}")
    assert_close(eh.gauss_newton(), g_ref, rtol=1e-8, atol=1e-12, what=f"G, alpha={alpha}")
    assert_close(eh.interaction(), m_ref, rtol=1e-8, atol=1e-12, what=f"M, alpha={alpha}")
    h_blocks, _, m_blocks = eh.decomposed_blocks()
    assert_close(h_blocks, diagonal_blocks(h_ref, N, D), rtol=1e-8, atol=1e-12, what="H_eff blocks")
    assert_close(m_blocks, diagonal_blocks(m_ref, N, D), rtol=1e-8, atol=1e-12, what="M blocks")


def _linear_tangential_formula(w: torch.Tensor, u: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Block i of H_eff(tangential) for u = W z under −mean cos: Wᵀ (s_i / (N ‖u_i‖²)) P_i W."""
    blocks = []
    for ui, ci in zip(u, c):
        n2 = float(ui @ ui)
        s = float(ui @ ci) / (n2 ** 0.5 * float(ci.norm()))
        p = torch.eye(K, dtype=DT) - torch.outer(ui, ui) / n2
        blocks.append(w.T @ (s / (N * n2) * p) @ w)
    return torch.block_diag(*blocks)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["cos>0", "cos<0"])
def test_tangential_cosine_of_a_linear_head_is_psd_exactly_where_cos_is_positive(sign):
    head = mlp(None, bias=False)
    z, noise = batch(2)
    with torch.no_grad():
        u = head(z)
    c = sign * u + 0.3 * noise * u.norm(dim=1, keepdim=True) / K ** 0.5
    cos = torch.nn.functional.cosine_similarity(u, c, dim=1)
    assert bool((sign * cos > 0).all())
    h = effective_hessian(head, analysis_loss("negative_cosine", c), z, reading="tangential").dense()
    w = head[1].weight @ head[0].weight
    assert_close(h, _linear_tangential_formula(w, u, c), rtol=1e-9, atol=1e-14, what="linear tangential H_eff")
    lam = torch.linalg.eigvalsh(h)
    floor = 1e-10 * float(lam.abs().max())
    if sign > 0:
        assert float(lam.min()) >= -floor
    else:  # the same head with targets behind it: negative definite on the tangent directions
        assert float(lam.max()) <= floor and float(lam.min()) < -floor


def test_tangential_differs_from_ambient_by_the_radial_cross_terms():
    """H_tan − H_amb = Σ_i J_iᵀ (û_i ρ_iᵀ + ρ_i û_iᵀ) J_i / ‖u_i‖ for a loss invariant to each row's scale."""
    head = mlp(nn.Tanh)
    z, c = batch(3)
    loss = analysis_loss("negative_cosine", c)
    h_amb = effective_hessian(head, loss, z, reading="ambient").dense()
    h_tan = effective_hessian(head, loss, z, reading="tangential").dense()
    u = head(z).detach().requires_grad_(True)
    (rho,) = torch.autograd.grad(-torch.nn.functional.cosine_similarity(u, c, dim=1).mean(), u)
    u = u.detach()
    blocks = []
    for i in range(N):
        j = jacobian(lambda zi: head(zi[None])[0], z[i])
        uh = u[i] / u[i].norm()
        blocks.append(j.T @ (torch.outer(uh, rho[i]) + torch.outer(rho[i], uh)) @ j / u[i].norm())
    assert_close(h_tan - h_amb, torch.block_diag(*blocks), rtol=1e-8, atol=1e-13, what="radial cross terms")


@pytest.mark.parametrize("activation", [nn.SiLU, nn.ReLU, None], ids=["silu", "relu", "linear"])
def test_mse_premise_is_the_mse_loss_read_ambient(activation):
    head = mlp(activation)
    z, c = batch(4)
    eh = effective_hessian(head, analysis_loss("mse", c), z, reading="ambient")
    zf = z.reshape(-1)
    dense = hessian(lambda x: 0.5 * ((head(x.reshape(N, D)) - c) ** 2).sum(1).mean(), zf)
    assert_close(eh.dense(), dense, rtol=1e-9, atol=1e-13, what="dense H_eff of the MSE loss")
    assert_close(eh.blocks(), diagonal_blocks(dense, N, D), rtol=1e-9, atol=1e-13, what="blocks (declared path)")
    # ρ is the MSE loss's own: (u − c) / N
    with torch.no_grad():
        assert_close(eh.rho, (head(z) - c) / N, rtol=1e-12, atol=1e-15, what="rho of the MSE loss")

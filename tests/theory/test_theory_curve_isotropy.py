"""headgeom.theory.curve_isotropy (C3): the fit's closed-form H_eff against dense float64 autograd and the
engine, the isotropy measures against separate formulas, exactly isotropic constructions, the
bias-free linear barrier under the cosine loss, the flat control, and the fitter's bookkeeping.

Tolerances: closed form vs autograd / engine, relative 1e-12 of max|H| (float64 round-off of a few
dozen flops); isotropy measures 1e-12; constructed isotropic heads 1e-10.
"""
import math

import pytest
import torch
from torch.func import grad, hessian, vmap

from headgeom.geometry import effective_hessian
from headgeom.objectives.cosine import negative_cosine
from headgeom.objectives.mse import mse_to_target
from headgeom.theory.curve_isotropy import (ACTIVATIONS, LOSSES, activation_derivatives, fit_isotropy,
                                            fixed_target, fourier_curve, head_from_params, head_spec, heff_blocks,
                                            init_params, isotropy, isotropy_objective, linear_cosine_lower_bound,
                                            loss_derivatives, mlp_forward, mlp_geometry, point_loss, tail_improvement)

D, K, T = 3, 5, 7


def _problem(seed=0, d=D, k=K, t=T):
    return fourier_curve(d, 3, 0.5, seed).points(t), fixed_target(k, seed)


def _rel(a, b):
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-300)


def test_curve_is_closed_deterministic_and_seeded():
    c0, c0b, c1 = fourier_curve(4, 3, 0.5, 0), fourier_curve(4, 3, 0.5, 0), fourier_curve(4, 3, 0.5, 1)
    t = torch.tensor([0.0, 0.3, 1.0], dtype=torch.float64)
    assert torch.allclose(c0(t)[0], c0(t)[2], atol=1e-14)  # period 1
    assert torch.equal(c0.points(9), c0b.points(9)) and not torch.allclose(c0.points(9), c1.points(9))
    # against the formula written out
    m = torch.arange(1, 4, dtype=torch.float64)
    ref = c0.center + (torch.cos(2 * math.pi * 0.3 * m)[:, None] * c0.cos_coef
                       + torch.sin(2 * math.pi * 0.3 * m)[:, None] * c0.sin_coef).sum(0)
    assert torch.allclose(c0(t)[1], ref, atol=1e-14)
    with pytest.raises(ValueError, match="radius"):
        fourier_curve(3, 2, 0.0)


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
def test_activation_derivatives_match_autograd(act):
    a = torch.linspace(-4, 4, 41, dtype=torch.float64)
    s, d1, d2 = activation_derivatives(act, a)
    f = ACTIVATIONS[act]
    assert torch.allclose(s, f(a), atol=1e-14)
    assert torch.allclose(d1, vmap(grad(f))(a), atol=1e-13)
    assert torch.allclose(d2, vmap(grad(grad(f)))(a), atol=1e-12)


@pytest.mark.parametrize("name", LOSSES)
def test_loss_derivatives_match_autograd(name):
    u = torch.randn(6, K, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    c = fixed_target(K, 2)
    rho, a = loss_derivatives(name, c, u)
    f = point_loss(name, c)
    assert torch.allclose(rho, vmap(grad(f))(u), atol=1e-13)
    assert torch.allclose(a, vmap(hessian(f))(u), atol=1e-12)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("act,depth,bias", [("silu", 0, True), ("silu", 2, True), ("tanh", 1, False),
                                            ("gelu", 2, True), ("softplus", 1, True)])
def test_closed_form_heff_matches_dense_autograd_and_engine(loss, act, depth, bias):
    z, c = _problem(1)
    spec = head_spec(D, K, depth, 6, act, bias)
    params = init_params(spec, 4)
    geo = mlp_geometry(params, act, loss, c, z)
    # dense float64 autograd: torch.func.hessian of the per-point composite
    ref = heff_blocks(lambda zi: mlp_forward(params, zi, act), point_loss(loss, c), z)
    assert _rel(geo.h, ref) <= 1e-12
    # headgeom's engine on a ProjectionHead holding the same weights, loss from headgeom.objectives
    head = head_from_params(spec, params)
    assert torch.allclose(head(z), mlp_forward(params, z, act), atol=1e-14)
    obj = negative_cosine if loss == "cosine" else mse_to_target
    h, g, m = effective_hessian(head, lambda u: obj(u, c.expand_as(u)) * u.shape[0], z).decomposed_blocks()
    assert _rel(geo.h, h) <= 1e-12 and _rel(geo.g, g) <= 1e-12
    assert float((geo.m - m).abs().max()) <= 1e-12 * float(h.abs().max())
    if depth == 0:
        assert float(geo.m.abs().max()) == 0.0  # linear head: M = 0 exactly
    else:
        assert float(geo.m.abs().max()) > 1e-6 * float(geo.h.abs().max())


def test_fit_gradient_matches_differentiating_through_torch_func_hessian():
    z, c = _problem(2)
    spec = head_spec(D, K, 2, 5, "silu", True)
    params = {k: v.requires_grad_(True) for k, v in init_params(spec, 1).items()}
    j = isotropy_objective(mlp_geometry(params, "silu", "cosine", c, z).h)
    ours = torch.autograd.grad(j, list(params.values()))
    loss = point_loss("cosine", c)
    ref = grad(lambda p: isotropy_objective(heff_blocks(lambda zi: mlp_forward(p, zi, "silu"), loss, z)))(
        {k: v.detach() for k, v in params.items()})
    for (name, _), g in zip(params.items(), ours):
        assert torch.allclose(g, ref[name], rtol=1e-10, atol=1e-12), name


def test_isotropy_measures_against_separate_formulas():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, 4, dtype=torch.float64, generator=gen)
    h = x @ x.transpose(1, 2) + 0.5 * torch.eye(4, dtype=torch.float64)
    iso = isotropy(h)
    eye = torch.eye(4, dtype=torch.float64)
    assert math.isclose(iso.eps_iso, float(torch.linalg.matrix_norm(h - eye, ord=2).max()), rel_tol=1e-12)
    assert math.isclose(iso.eps_kappa, float(torch.linalg.cond(h).max()) - 1, rel_tol=1e-10)
    # best scalar by a brute-force search over c
    cs = torch.linspace(0, 20, 40001, dtype=torch.float64)
    brute = max(float(((hi[None] - cs[:, None, None] * eye) ** 2).sum((1, 2)).sqrt().min() / hi.norm()) for hi in h)
    assert math.isclose(iso.rel_fro, brute, rel_tol=1e-5)
    assert iso.n_indefinite == 0 and iso.as_dict()["eps_kappa"] == iso.eps_kappa
    # a scaled identity is perfectly isotropic up to scale, not at unit scale
    two = isotropy(2 * eye.expand(3, 4, 4))
    assert two.eps_kappa == 0 and two.rel_fro == 0 and math.isclose(two.eps_iso, 1.0)
    bad = isotropy(torch.diag_embed(torch.tensor([[1.0, -0.1], [1.0, 2.0]], dtype=torch.float64)))
    assert bad.n_indefinite == 1 and math.isinf(bad.eps_kappa) and bad.as_dict()["eps_kappa"] == "inf"


def test_orthonormal_linear_head_is_exactly_isotropic_under_mse():
    z, c = _problem(3)
    q, _ = torch.linalg.qr(torch.randn(K, D, dtype=torch.float64, generator=torch.Generator().manual_seed(5)))
    params = {"W0": q, "b0": torch.randn(K, dtype=torch.float64)}  # any bias: the flat metric does not care
    iso = isotropy(mlp_geometry(params, "silu", "mse", c, z).h)
    assert iso.eps_iso <= 1e-12 and iso.eps_kappa <= 1e-12 and iso.rel_fro <= 1e-12


def test_constructed_isotropic_head_under_cosine_through_M():
    """h(z) = cos φ(z) ĉ + sin φ(z) e with e ⊥ ĉ and φ = arccos(−q(z)), q = ½‖z − z0‖² − ½: then
    −cos(h(z), c) = q(z) and H_eff = I exactly, with G and M both non-zero."""
    c = fixed_target(K, 0)
    c_hat = c / c.norm()
    e = torch.randn(K, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    e = e - (e @ c_hat) * c_hat
    e = e / e.norm()

    z = fourier_curve(D, 3, 0.3, 0).points(9)
    z0 = z.mean(0)

    def q(zi):
        return 0.5 * ((zi - z0) ** 2).sum() - 0.5

    def head(zi):
        phi = torch.arccos(-q(zi))
        return torch.cos(phi) * c_hat + torch.sin(phi) * e

    assert float(vmap(q)(z).abs().max()) < 0.9  # stays inside arccos's domain
    iso = isotropy(heff_blocks(head, point_loss("cosine", c), z))
    assert iso.eps_iso <= 1e-10 and iso.eps_kappa <= 1e-10
    eh = effective_hessian(lambda zz: vmap(head)(zz), lambda u: negative_cosine(u, c.expand_as(u)) * u.shape[0], z)
    h, g, m = eh.decomposed_blocks()
    assert isotropy(h).eps_iso <= 1e-10 and float(m.abs().max()) > 0.1  # M does part of the work


def test_bias_free_linear_head_under_cosine_is_never_isotropic():
    """Euler: L∘W is 0-homogeneous, ẑᵀHẑ = 0, so ‖H − I‖₂ ≥ 1 and H is not positive definite anywhere."""
    z, c = _problem(4)
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        w = torch.randn(K, D, dtype=torch.float64, generator=gen)
        scale = float(w.norm() ** 2 / (z ** 2).sum(1).min())  # |H| ~ |W|²/|Wz|² ~ 1/|z|²
        assert float(linear_cosine_lower_bound(w, z).abs().max()) <= 1e-12 * scale
    spec = head_spec(D, K, 0, 0, bias=False)
    fit = fit_isotropy(init_params(spec, 0), "silu", "cosine", c, z, adam_steps=30, lbfgs_iters=60)
    geo = mlp_geometry(fit.params, "silu", "cosine", c, z)
    radial = torch.einsum("td,tde,te->t", z, geo.h, z) / (z * z).sum(1)
    assert float(radial.abs().max()) <= 1e-10 * max(1.0, float(geo.h.abs().max()))
    iso = isotropy(geo.h)
    assert iso.eps_iso >= 1 - 1e-9 and iso.n_indefinite == T and math.isinf(iso.eps_kappa)


def test_linear_fit_reaches_the_flat_control_and_reports_convergence():
    z, c = _problem(5)
    spec = head_spec(D, K, 0, 0)
    fit = fit_isotropy(init_params(spec, 1), "silu", "mse", c, z, adam_steps=0, lbfgs_iters=100)
    iso = isotropy(mlp_geometry(fit.params, "silu", "mse", c, z).h)
    assert iso.eps_kappa <= 1e-6 and fit.objective_final <= 1e-12
    assert fit.converged and fit.stop_reason == "tolerance" and fit.lbfgs_iterations < 100


def test_mlp_fit_returns_its_best_point_and_bookkeeping():
    z, c = _problem(6)
    spec = head_spec(D, K, 1, 6, "tanh")
    fit = fit_isotropy(init_params(spec, 0), "tanh", "cosine", c, z, adam_steps=15, lbfgs_iters=15)
    assert fit.adam_steps == 15 and 1 <= fit.lbfgs_iterations <= 15 and fit.func_evals >= fit.lbfgs_iterations
    assert len(fit.history) == fit.adam_steps + fit.func_evals
    assert fit.objective_final == pytest.approx(min(fit.history), rel=1e-12)
    assert fit.objective_final < fit.objective_initial and fit.grad_norm >= 0
    again = isotropy_objective(mlp_geometry(fit.params, "tanh", "cosine", c, z).h)
    assert float(again) == pytest.approx(fit.objective_final, rel=1e-12)
    assert fit.stop_reason in ("budget", "plateau", "tolerance") and fit.converged == (fit.stop_reason != "budget")


def test_tail_improvement_is_the_plateau_rule():
    # 20 finite values: the last 2 (10%) improve the best from 4.0 to 3.0, a relative 0.25; NaN is skipped
    history = [10.0 - 0.5 * i for i in range(13)] + [float("nan")] + [4.5] * 5 + [3.0, 3.5]
    assert tail_improvement(history) == pytest.approx(0.25)
    assert tail_improvement([5.0, 4.0, 4.0]) is None  # fewer than twice the tail
    assert tail_improvement([2.0, 1.0, 1.0, 1.0]) == 0.0  # the last 2 found nothing better: a plateau
    # the fit labels a budget stop "plateau" exactly when this is within plateau_tol
    z, c = _problem(6)
    spec = head_spec(D, K, 1, 6, "tanh")
    fit = fit_isotropy(init_params(spec, 0), "tanh", "cosine", c, z, adam_steps=10, lbfgs_iters=5, plateau_tol=1.0)
    improvement = tail_improvement(fit.history)
    assert fit.stop_reason == "tolerance" or (fit.stop_reason == "plateau") == (improvement <= 1.0)


def test_non_finite_objective_stops_the_fit():
    z, c = _problem(7)
    params = {"W0": torch.zeros(K, D, dtype=torch.float64)}  # u = 0: the cosine is undefined
    fit = fit_isotropy(params, "silu", "cosine", c, z, adam_steps=5, lbfgs_iters=5)
    assert fit.stop_reason == "non-finite" and not fit.converged


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match="relu"):
        head_spec(3, 4, 1, 8, "relu")
    with pytest.raises(ValueError, match="depth"):
        head_spec(3, 4, -1, 8)
    with pytest.raises(ValueError, match="huber"):
        point_loss("huber", torch.ones(3))
    with pytest.raises(ValueError, match="W0"):
        mlp_geometry({"b0": torch.ones(2)}, "silu", "mse", torch.ones(2), torch.ones(3, 2))

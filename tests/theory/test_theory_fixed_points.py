"""headgeom.theory.fixed_points (the premise of Thm 3.1, ∇_u L(u*) = 0): the solver against closed forms (MSE:
u* = c; the cosine loss: u*_i on the ray of ±c_i with A = ±P/(N‖u‖²)), against the losses' independent numpy
formulas (tests/objectives_reference.py) by central differences, on a built saddle (the solver does not pick
minima), and the gauges against the invariances they claim. float64 throughout."""
import numpy as np
import pytest
import torch

from headgeom.objectives import analysis_loss
from headgeom.theory.fixed_points import (FEATURE_AFFINE, FEATURE_SHIFT, NONE, ROW_SCALE, ROW_SHIFT, gradient_norm,
                                          loss_gauge, stationary_point)
from headgeom.theory.whitening import sample_loss_block, split_eigen
from objectives_reference import barlow_ref, info_nce_ref, mse_ref, negative_cosine_ref, vicreg_ref

D64 = torch.float64
N, K = 6, 4
REFERENCES = {"mse": lambda u, c: mse_ref(u, c), "negative_cosine": negative_cosine_ref,
              "info_nce": lambda u, c: info_nce_ref(u, c, 0.1), "vicreg": vicreg_ref,
              "barlow_twins": lambda u, c: barlow_ref(u, c, eps=0.0)}
OPTIONS = {"barlow_twins": {"eps": 0.0}}


def _pair(seed: int, noise: float = 0.3, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(u0, the other view u0 + noise · ξ), both (N, K), entries of size ``scale``."""
    g = torch.Generator().manual_seed(seed)
    u0 = scale * torch.randn(N, K, generator=g, dtype=D64)
    return u0, u0 + noise * scale * torch.randn(N, K, generator=g, dtype=D64)


def _fd_directional(ref, u: np.ndarray, c: np.ndarray, v: np.ndarray, h: float = 1e-5) -> float:
    """(L(u + h v) − L(u − h v)) / 2h of the numpy formula: an independent gradient check."""
    return (ref(u + h * v, c) - ref(u - h * v, c)) / (2 * h)


def test_mse_fixed_point_is_the_target():
    u0, c = _pair(0)
    loss = analysis_loss("mse", c)
    fp = stationary_point(loss, u0)
    assert torch.allclose(fp.u, c, atol=1e-14) and fp.stop == "tolerance" and fp.reached(1e-12)
    # the start's gradient against the hand formula (u − c)/N of ½‖u − c‖² averaged over the batch
    assert fp.grad_norm_start == pytest.approx(float(((u0 - c) / N).norm()), rel=1e-12)
    assert split_eigen(sample_loss_block(loss, fp.u, 0)).eigenvalues.tolist() == pytest.approx([1 / N] * K)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cosine_fixed_points_are_the_rays_of_the_target(sign):
    """Started near c the solver reaches the minimum u ∥ c, started near −c the maximum u ∥ −c: it does not pick
    minima."""
    c, near = _pair(1, noise=0.05)
    u0 = sign * near
    loss = analysis_loss("negative_cosine", c)
    fp = stationary_point(loss, u0, ROW_SCALE)
    assert fp.reached(1e-12)
    cos = torch.nn.functional.cosine_similarity(fp.u, c, dim=1)
    assert torch.allclose(cos, torch.full((N,), sign, dtype=D64), atol=1e-12)
    assert torch.allclose(fp.u.norm(dim=1), u0.norm(dim=1), rtol=1e-12)  # the gauge keeps each row's scale
    # A = ±P/(N‖u‖²) there: k − 1 eigenvalues ±1/(N‖u‖²) and the radial null; a maximum has n₋ = k − 1
    for i in range(N):
        split = split_eigen(sample_loss_block(loss, fp.u, i))
        lam = 1 / (N * float(fp.u[i].norm()) ** 2)
        expected = sorted([0.0] + [sign * lam] * (K - 1))
        assert split.eigenvalues.tolist() == pytest.approx(expected, abs=1e-12 * lam)
        assert (split.n_negative, split.n_zero) == ((0, 1) if sign > 0 else (K - 1, 1))


def test_solver_reaches_a_saddle_it_starts_near():
    """A quadratic with one negative direction per row: its only stationary point is a saddle, which the solver
    reaches in a few damped Newton steps (it does not look for minima)."""
    w = torch.tensor([1.0, 2.0, -0.5, 3.0], dtype=D64)
    loss = lambda u: 0.5 * ((u - 1.0) ** 2 * w).sum()  # noqa: E731
    fp = stationary_point(loss, torch.zeros(N, K, dtype=D64))
    assert torch.allclose(fp.u, torch.ones(N, K, dtype=D64), atol=1e-14) and fp.iterations <= 3
    assert split_eigen(sample_loss_block(loss, fp.u, 0)).n_negative == 1


@pytest.mark.parametrize("objective", ["info_nce", "vicreg", "barlow_twins"])
def test_batch_losses_reach_fixed_points_checked_apart_from_the_solver(objective):
    u0, c = _pair(2, scale=0.3)  # feature spreads below VICReg's hinge at std 1, where the loss is smooth
    loss = analysis_loss(objective, c, **OPTIONS.get(objective, {}))
    fp = stationary_point(loss, u0, loss_gauge(objective, OPTIONS.get(objective)))
    assert fp.stop == "tolerance" and fp.reached(1e-12)
    assert gradient_norm(loss, fp.u) == fp.grad_norm <= 1e-12 * fp.grad_norm_start
    # central differences of the numpy formula: every directional derivative vanishes at u*, not at u0
    ref, rng = REFERENCES[objective], np.random.default_rng(0)
    cn = c.numpy()
    for _ in range(4):
        v = rng.standard_normal((N, K))
        at_start = abs(_fd_directional(ref, u0.numpy(), cn, v))
        assert abs(_fd_directional(ref, fp.u.numpy(), cn, v)) <= 1e-6 * max(at_start, 1e-3)


@pytest.mark.parametrize("objective, options, gauge", [
    ("negative_cosine", {}, ROW_SCALE), ("info_nce", {}, ROW_SCALE), ("nt_xent", {}, ROW_SCALE),
    ("mocov3", {}, ROW_SCALE), ("dino", {}, ROW_SHIFT),
    ("barlow_twins", {"eps": 0.0}, FEATURE_AFFINE), ("barlow_twins", {}, FEATURE_SHIFT), ("vicreg", {}, NONE),
    ("mse", {}, NONE)])
def test_gauges_are_invariances_of_their_losses(objective, options, gauge):
    assert loss_gauge(objective, options) is gauge
    u0, c = _pair(3)
    u = u0 + torch.randn(N, K, generator=torch.Generator().manual_seed(9), dtype=D64)
    loss = analysis_loss(objective, c, **options)
    assert float(loss(gauge.fix(u, u0))) == pytest.approx(float(loss(u)), rel=1e-12)
    x = u.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(loss(x), x)
    t = gauge.tangents(u)
    assert t.shape[1] == N * K and all(abs(float(x)) <= 1e-12 * float(g.norm()) for x in t @ g.flatten())


def test_barlow_twins_eps_breaks_the_scale_invariance():
    """With eps > 0 in sqrt(var + eps), scaling a feature changes the loss: why C1 sets eps = 0."""
    u0, c = _pair(4)
    scaled = u0 * torch.tensor([1.0, 3.0, 1.0, 1.0], dtype=D64)
    eps_loss, exact = analysis_loss("barlow_twins", c), analysis_loss("barlow_twins", c, eps=0.0)
    assert float(exact(scaled)) == pytest.approx(float(exact(u0)), rel=1e-13)
    assert abs(float(eps_loss(scaled)) - float(eps_loss(u0))) > 1e-8


def test_vicreg_minimum_on_its_hinge_is_no_fixed_point():
    """Feature spreads near 1: VICReg's minimum sits on the kink of max(0, 1 − std_j), where ∇L jumps; the solver
    finds no point with ∇L = 0 and says so (the caller's tolerance then leaves the trial undecided)."""
    u0, c = _pair(0, noise=0.1)
    fp = stationary_point(analysis_loss("vicreg", c), u0)
    assert fp.stop in ("no progress", "iterations") and not fp.reached(1e-3)
    ac = fp.u - fp.u.mean(dim=0)
    assert float((torch.sqrt(ac.var(dim=0) + 1e-4) - 1).abs().min()) < 1e-12  # a feature sits on the kink


def test_bad_start_is_refused():
    with pytest.raises(ValueError, match=r"\(N, k\)"):
        stationary_point(lambda u: u.sum(), torch.zeros(3, dtype=D64))

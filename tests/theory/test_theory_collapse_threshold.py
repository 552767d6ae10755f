"""C4 thresholds against a closed form: a two-unit tanh head on a scalar representation.

With d = 1, h(z) = W2 tanh(w1 z) (w1 ∈ R², W2 ∈ R^{k×2}), a = w1 z̄:
J = W2 (tanh'(a) ⊙ w1) ∈ R^k and ∇²_z h = W2 (tanh''(a) ⊙ w1²) =: W2 q. At an MSE equilibrium
ρ_i = t r_i / N with r_i ⊥ J unit, so the 1×1 block is H_i(t) = (‖J‖² + t r_iᵀW2 q) / N and
H_eff first turns negative at t* = ‖J‖² / max_i(−r_iᵀ W2 q) (the floor, 1e-10·max|λ|, moves
it by a relative 1e-10, far inside the bisection tolerance).
"""
import math

import pytest
import torch
from torch import nn

from headgeom.experiments.c4_collapse import C4Config, build_head
from headgeom.theory.collapse import collapsed_equilibrium
from headgeom.theory.collapse_threshold import (
    BELOW_RANGE,
    BRACKETED,
    NONE_IN_RANGE,
    first_negative,
    lambda_min_at,
    log_grid,
    threshold_sweep,
)

W1 = torch.tensor([[0.9], [-1.3]], dtype=torch.float64)  # (hidden=2, d=1)
W2 = torch.tensor([[0.7, -0.4], [0.2, 1.1], [-0.8, 0.5]], dtype=torch.float64)  # (k=3, hidden=2)
Z_BAR = torch.tensor([0.6], dtype=torch.float64)
N, SEED, REL_TOL = 4, 1, 1e-3


def _head(activation: nn.Module) -> nn.Sequential:
    head = nn.Sequential(nn.Linear(1, 2, bias=False), activation, nn.Linear(2, 3, bias=False)).double()
    with torch.no_grad():
        head[0].weight.copy_(W1)
        head[2].weight.copy_(W2)
    return head


def _closed_form_threshold() -> float:
    a = (W1 @ Z_BAR)  # (2,)
    th = torch.tanh(a)
    d1, d2 = 1 - th ** 2, -2 * th * (1 - th ** 2)
    jac = W2 @ (d1 * W1[:, 0])
    q = W2 @ (d2 * W1[:, 0] ** 2)
    # the sweep's null directions: the same generator seed as threshold_sweep, at residual 1
    point = collapsed_equilibrium(_head(nn.Tanh()), Z_BAR, N, "mse", residual=1.0,
                                  generator=torch.Generator().manual_seed(SEED))
    r = point.rho * N  # (N, k), unit rows ⊥ J
    assert torch.allclose(r @ jac, torch.zeros(N, dtype=torch.float64), atol=1e-12)
    worst = float((-(r @ q)).max())
    assert worst > 0, "this draw has no direction with negative curvature; pick another SEED"
    return float(jac @ jac) / worst


def test_threshold_matches_the_closed_form_within_the_stated_tolerance():
    t_star = _closed_form_threshold()
    grid = log_grid(1e-3, 1e3, 12)
    assert grid[0] < t_star < grid[-1]
    out = threshold_sweep(_head(nn.Tanh()), Z_BAR, N, "mse", grid, seed=SEED, rel_floor=1e-10, rel_tol=REL_TOL)
    assert out["status"] == BRACKETED and out["magnitude"] == "residual"
    assert t_star * (1 - 1e-8) <= out["threshold"] <= t_star * (1 + REL_TOL) * (1 + 1e-8), (out["threshold"], t_star)
    # the closed form is the exact crossing (no grid): t* itself, to round-off
    assert out["closed_form_status"] == "closed form"
    assert out["threshold_closed_form"] == pytest.approx(t_star, rel=1e-9)
    # the curve: λ_min(t) = min_i (‖J‖² + t r_iᵀW2q)/N is positive below t*, negative above
    for x, lam in zip(grid, out["lambda_min"]):
        assert (lam < 0) == (x > t_star)


def test_linear_head_has_no_threshold_under_mse():
    out = threshold_sweep(_head(nn.Identity()), Z_BAR, N, "mse", log_grid(1e-3, 1e3, 8), seed=SEED,
                          rel_floor=1e-10, rel_tol=REL_TOL)
    assert out["status"] == NONE_IN_RANGE and out["threshold"] is None
    assert out["threshold_closed_form"] is None and out["closed_form_status"] == "no crossing"
    assert all(lam >= -fl for lam, fl in zip(out["lambda_min"], out["floor"]))


def test_first_negative_bisects_brackets_and_reports_the_edges():
    grid = log_grid(1e-2, 1e2, 9)
    thr, status, flags = first_negative(lambda x: x > 0.37, grid, 1e-4)
    assert status == BRACKETED and 0.37 <= thr <= 0.37 * (1 + 1e-4)
    assert flags == [x > 0.37 for x in grid]
    assert first_negative(lambda x: True, grid, 1e-4)[:2] == (grid[0], BELOW_RANGE)
    assert first_negative(lambda x: False, grid, 1e-4)[:2] == (None, NONE_IN_RANGE)
    with pytest.raises(ValueError, match="rel_tol"):
        first_negative(lambda x: True, grid, 0.0)


def test_log_grid_spans_and_validates():
    g = log_grid(1e-3, math.pi / 2, 12)
    assert len(g) == 12 and math.isclose(g[0], 1e-3) and math.isclose(g[-1], math.pi / 2)
    assert all(b / a == pytest.approx(g[1] / g[0]) for a, b in zip(g, g[1:]))
    with pytest.raises(ValueError, match="log grid"):
        log_grid(0.0, 1.0, 5)


@pytest.mark.parametrize("reading", ["mse", "ambient", "tangential"])
def test_the_two_term_sweep_matches_direct_evaluations(reading):
    """The sweep evaluates H_eff exactly at two anchors and extends it as A + t B (MSE) or
    cos θ A + sin θ B (cosine); a direct equilibrium at other magnitudes must agree."""
    cfg = C4Config(d=3, hidden=6, k=5)
    head = build_head(cfg, "silu", 0)
    z = torch.randn(3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    grid = log_grid(1e-2, 5.0, 4) if reading == "mse" else log_grid(1e-2, 1.4, 4)
    out = threshold_sweep(head, z, 2, reading, grid, seed=SEED, rel_floor=1e-10, rel_tol=0.1)
    for x, lam in zip(grid, out["lambda_min"]):
        direct = lambda_min_at(head, z, 2, reading, x, seed=SEED, rel_floor=1e-10)["lambda_min"]
        assert lam == pytest.approx(direct, rel=1e-9, abs=1e-12 * max(abs(v) for v in out["lambda_min"]))


@pytest.mark.parametrize("activation,reading", [(a, r) for a in ("silu", "gelu", "tanh") for r in ("mse", "ambient")])
def test_the_closed_form_agrees_with_the_bisection_sweep(activation, reading):
    # the sweep needs lambda_min < -floor (floor = 1e-10 max|lambda|), so it sits at or above the exact crossing,
    # by the bisection's factor 1 + rel_tol plus the floor's shift (relative 6e-4 for the flat tanh curve)
    cfg = C4Config(d=4, hidden=12, k=9)
    head = build_head(cfg, activation, 2, 0.1)
    z = torch.randn(4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    grid = log_grid(1e-3, 10.0, 12) if reading == "mse" else log_grid(1e-3, 0.99 * math.pi / 2, 12)
    out = threshold_sweep(head, z, 3, reading, grid, seed=SEED, rel_floor=1e-10, rel_tol=1e-4)
    assert out["status"] == BRACKETED and out["closed_form_status"] == "closed form"
    closed, swept = out["threshold_closed_form"], out["threshold"]
    assert closed * (1 - 1e-9) <= swept <= closed * 1.01, (closed, swept)
    # and directly: just below the closed form H_eff is PSD, just above it is not
    below = lambda_min_at(head, z, 3, reading, closed * (1 - 1e-3), seed=SEED, rel_floor=1e-10)
    above = lambda_min_at(head, z, 3, reading, closed * (1 + 1e-3), seed=SEED, rel_floor=1e-10)
    assert below["lambda_min"] > 0 > above["lambda_min"]


@pytest.mark.parametrize("activation,reading", [(a, r) for a in ("silu", "gelu", "softplus") for r in ("mse", "ambient")])
def test_the_sign_change_at_the_threshold_against_dense_autograd_hessians(activation, reading):
    """Thm 4.1's identity at constructed equilibria, checked without the engine: the full Hessian ∇²_z L(h(z)) by
    torch.autograd.functional.hessian (float64; for the MSE loss and the ambient reading it is H_eff itself) is PSD a
    factor 1 - CROSSING_MARGIN below the closed-form threshold and indefinite 1 + CROSSING_MARGIN above it; the
    sweep's own check says the same."""
    from torch.autograd.functional import hessian

    from headgeom.theory.collapse_threshold import CROSSING_MARGIN, OBJECTIVE_OF_READING

    cfg = C4Config(d=3, hidden=8, k=6)
    head = build_head(cfg, activation, 4, 0.1)
    z = torch.randn(3, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    grid = log_grid(1e-3, 10.0, 6) if reading == "mse" else log_grid(1e-3, 0.99 * math.pi / 2, 6)
    out = threshold_sweep(head, z, 2, reading, grid, seed=SEED, rel_floor=1e-10, rel_tol=0.1)
    assert out["closed_form_status"] == "closed form" and out["crossing_ok"] is True
    t_star = out["threshold_closed_form"]
    for factor, negative in ((1 - CROSSING_MARGIN, False), (1 + CROSSING_MARGIN, True)):
        design = {"residual": t_star * factor} if reading == "mse" else {"angle": t_star * factor}
        point = collapsed_equilibrium(head, z, 2, OBJECTIVE_OF_READING[reading],
                                      generator=torch.Generator().manual_seed(SEED), **design)
        loss = point.loss()
        full = hessian(lambda zf: loss(head(zf.reshape(2, 3))), point.z.reshape(-1))
        lam = torch.linalg.eigvalsh(full)
        assert (float(lam.min()) < -1e-9 * float(lam.abs().max())) == negative, (factor, lam)


def test_crossing_check_on_a_built_family():
    # A + t B with A = I, B = diag(-1, 2): λ_min = 1 - t, crossing at t* = 1
    a, b = torch.eye(2, dtype=torch.float64)[None], torch.diag(torch.tensor([-1.0, 2.0], dtype=torch.float64))[None]

    def at(t):
        lam = float(torch.linalg.eigvalsh(a + t * b).min())
        return {"lambda_min": lam, "negative": lam < -1e-12}

    from headgeom.theory.collapse_threshold import closed_form_threshold, crossing_check

    t_star, status = closed_form_threshold(a, b, "residual")
    assert status == "closed form" and t_star == pytest.approx(1.0)
    check = crossing_check(at, t_star, 0.05)
    assert check["crossing_ok"] and check["crossing_lambda_min_below"] == pytest.approx(0.05)
    assert check["crossing_lambda_min_above"] == pytest.approx(-0.05)
    assert not crossing_check(at, 2.0, 0.05)["crossing_ok"]  # a wrong threshold fails the check

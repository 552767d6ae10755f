"""The closed-form crossing of A + tB and a state's threshold ratio, against formulas written here:
diagonal pairs, a brute-force scan of λ_min(A + tB), and a one-hidden-unit head derived by hand."""
import math

import pytest
import torch
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.geometry.linalg.threshold import crossing, pullback_and_ratio, threshold_ratio


def test_diagonal_pairs_cross_at_the_smallest_ratio_of_their_entries():
    a = torch.diag(torch.tensor([2.0, 1.0, 4.0], dtype=torch.float64))
    b = torch.diag(torch.tensor([-1.0, 0.5, -8.0], dtype=torch.float64))
    # entry j turns negative at t = a_j / (-b_j) for b_j < 0: 2.0 and 0.5; the first is 0.5
    assert float(crossing(a, b)) == pytest.approx(0.5, rel=1e-14)
    assert math.isinf(float(crossing(a, b.abs())))  # B ⪰ 0: never
    assert math.isnan(float(crossing(torch.diag(torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)), b)))


def positive_and_symmetric(n: int, d: int, seed: int, shift: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, d, d) random positive definite blocks X Xᵀ + shift·I, and random symmetric ones Y + Yᵀ."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, d, generator=gen, dtype=torch.float64)
    y = torch.randn(n, d, d, generator=gen, dtype=torch.float64)
    return x @ x.transpose(1, 2) + shift * torch.eye(d, dtype=torch.float64), y + y.transpose(1, 2)


def test_the_crossing_matches_a_brute_force_scan_of_lambda_min():
    a, b = positive_and_symmetric(5, 6, seed=3, shift=0.1)
    t = crossing(a, b)
    for i in range(5):
        lam = lambda s: float(torch.linalg.eigvalsh(a[i] + s * b[i]).min())
        assert lam(float(t[i]) * (1 - 1e-6)) > 0 > lam(float(t[i]) * (1 + 1e-6))
        assert abs(lam(float(t[i]))) <= 1e-9 * float(torch.linalg.eigvalsh(a[i]).abs().max())


def test_the_ratio_of_a_one_hidden_unit_head_is_the_hand_derived_one():
    # d = 1, h(z) = v s(w z), v in R^3, MSE loss 1/2 |h(z) - c|^2 at one sample, away from equilibrium:
    # G = |v|^2 w^2 s'(a)^2, M = (rho . v) w^2 s''(a), a = w z, rho = h - c, so r = -M / G
    w, z, v = 1.3, 0.4, torch.tensor([0.5, -1.2, 0.8], dtype=torch.float64)
    c = torch.tensor([2.0, 1.0, -0.5], dtype=torch.float64)
    head = nn.Sequential(nn.Linear(1, 1, bias=False), nn.Tanh(), nn.Linear(1, 3, bias=False)).double()
    with torch.no_grad():
        head[0].weight.fill_(w)
        head[2].weight.copy_(v[:, None])
    a = w * z
    s1, s2 = 1 - math.tanh(a) ** 2, -2 * math.tanh(a) * (1 - math.tanh(a) ** 2)
    rho = v * math.tanh(a) - c
    g_hand = float(v @ v) * w ** 2 * s1 ** 2
    m_hand = float(rho @ v) * w ** 2 * s2
    eh = effective_hessian(head, lambda u: 0.5 * ((u - c) ** 2).sum(), torch.tensor([[z]], dtype=torch.float64))
    _, g, m = eh.decomposed_blocks()
    assert float(g) == pytest.approx(g_hand, rel=1e-12) and float(m) == pytest.approx(m_hand, rel=1e-12)
    assert float(threshold_ratio(g, m)) == pytest.approx(-m_hand / g_hand, rel=1e-12)
    # past its own threshold (r > 1) exactly when H_eff = G + M < 0
    assert (float(threshold_ratio(g, m)) > 1) == (g_hand + m_hand < 0)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="square blocks of one shape"):
        crossing(torch.eye(3), torch.eye(2))


def test_pullback_and_ratio_shares_one_eigendecomposition_and_matches_each_part():
    g, m = positive_and_symmetric(4, 5, seed=5, shift=0.05)
    lam, r = pullback_and_ratio(g, m)
    assert torch.allclose(lam, torch.linalg.eigvalsh(g).amin(dim=-1), rtol=1e-12, atol=0)
    assert torch.equal(r, threshold_ratio(g, m))
    # r > 1 exactly where G + M has a negative eigenvalue
    assert torch.equal(r > 1, torch.linalg.eigvalsh(g + m).amin(dim=-1) < 0)

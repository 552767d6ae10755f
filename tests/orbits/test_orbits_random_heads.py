"""The random-head control (headgeom.orbits.random_heads) on built orbit sets with known answers: orbits on a
sphere that a fixed linear map contracts by a known factor (closed-form selectivity), isometries as controls
(selectivity exactly 1), BatchNorm calibration against a hand computation and against PyTorch's own train
mode, and the learned-selectivity increase against its definition."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from headgeom.heads import head_from
from headgeom.orbits.bootstrap import Resamples, bootstrap_counts, bootstrap_indices
from headgeom.orbits.random_heads import (calibrate_batchnorm, excess_increase, random_head_control, random_heads,
                                          selectivity_rows)

pytestmark = pytest.mark.usefixtures("one_thread")


def sphere_orbits(n: int = 6, k: int = 8, theta: float = 0.4, seed: int = 0) -> torch.Tensor:
    """u_ik = cos θ c_i + sin θ v_ik: orthonormal centres c_i (first n coordinates), orbit directions v_ik in
    the next 2 coordinates, unit and summing to 0 over k (a circle); every point has norm 1, each orbit's spread
    is sin²θ and its mean cos θ c_i."""
    d = n + 2
    z = torch.zeros(n, k, d, dtype=torch.float64)
    phase = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 * math.pi
    for i in range(n):
        a = phase[i] + 2 * math.pi * torch.arange(k, dtype=torch.float64) / k
        z[i, :, i] = math.cos(theta)
        z[i, :, n] = math.sin(theta) * torch.cos(a)
        z[i, :, n + 1] = math.sin(theta) * torch.sin(a)
    return z


def contraction(n: int, factor: float) -> torch.Tensor:
    """The linear map P_centres + factor · P_orbit directions, as a (d, d) matrix."""
    m = torch.eye(n + 2, dtype=torch.float64)
    m[n, n] = m[n + 1, n + 1] = factor
    return m


def closed_form_selectivity(n: int, theta: float, factor: float) -> float:
    """[spread/global](z) / [spread/global](h) with spread = sin²θ and global = sin²θ + cos²θ (1 − 1/n) (the
    orbit means cos θ c_i, c_i orthonormal: their variance is cos²θ (1 − 1/n)); h's angle tan θ' = a tan θ."""
    def ratio(t: float) -> float:
        return math.sin(t) ** 2 / (math.sin(t) ** 2 + math.cos(t) ** 2 * (1 - 1 / n))
    return ratio(theta) / ratio(math.atan(factor * math.tan(theta)))


def test_selectivity_rows_match_the_closed_form_on_contracted_sphere_orbits():
    n, theta, a = 6, 0.4, 0.25
    z = sphere_orbits(n, theta=theta)
    h = z @ contraction(n, a).T
    rows = selectivity_rows(z, h, torch.ones(3, n, dtype=torch.float64))
    want = closed_form_selectivity(n, theta, a)
    assert rows["selectivity"] == pytest.approx(torch.full((4,), want, dtype=torch.float64), rel=1e-12)
    theta_h = math.atan(a * math.tan(theta))
    assert float(rows["compression"][0]) == pytest.approx(math.sin(theta) ** 2 / math.sin(theta_h) ** 2, rel=1e-12)


def test_selectivity_rows_match_an_independent_numpy_computation_under_weights():
    g = torch.Generator().manual_seed(3)
    z = torch.randn(5, 6, 4, generator=g, dtype=torch.float64) + 2.0
    h = torch.randn(5, 6, 7, generator=g, dtype=torch.float64)
    w = torch.tensor([[2.0, 0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 3.0, 0.0, 1.0]], dtype=torch.float64)

    def stats(f: np.ndarray, wi: np.ndarray) -> tuple[float, float]:  # (weighted mean spread, global spread)
        u = f / np.linalg.norm(f, axis=-1, keepdims=True)
        pts = np.repeat(u, wi.astype(int), axis=0).reshape(-1, u.shape[-1])  # repeated images stacked
        per = np.repeat(((u - u.mean(1, keepdims=True)) ** 2).sum(-1).mean(1), wi.astype(int))
        return per.mean(), ((pts - pts.mean(0)) ** 2).sum(-1).mean()

    rows = selectivity_rows(z, h, w)
    for r, wi in enumerate(w.numpy(), start=1):
        (sz, gz), (sh, gh) = stats(z.numpy(), wi), stats(h.numpy(), wi)
        assert float(rows["selectivity"][r]) == pytest.approx((sz / gz) / (sh / gh), rel=1e-10)


class Isometry(nn.Module):
    """A head that rotates its input by a random orthogonal matrix (drawn at reset_parameters): it keeps every
    angle, so its selectivity is exactly 1."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d, d))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        q, _ = torch.linalg.qr(torch.randn(self.weight.shape, dtype=torch.float64))
        with torch.no_grad():
            self.weight.copy_(q.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.T


def test_control_of_isometries_is_one_and_the_trained_contraction_keeps_its_known_selectivity():
    n, theta, a = 6, 0.4, 0.25
    z = sphere_orbits(n, k=8, theta=theta)
    h = z @ contraction(n, a).T
    labels = torch.arange(n) % 2
    rs = Resamples(bootstrap_counts(bootstrap_indices(n, 200, 0, strata=labels), n), labels)
    c = random_head_control(z, h, Isometry(n + 2), rs, draws=5, seed=0, levels=(0.9, 0.99), keep_rows=True)
    for bn in ("stored", "init"):  # no BatchNorm: both settings are the same heads
        assert c[bn]["selectivity"] == pytest.approx([1.0] * 5, rel=1e-5)  # float32 heads
        assert c[bn]["median_selectivity"] == pytest.approx(1.0, rel=1e-5)
        vs = c[bn]["vs_selectivity"]
        assert vs["value"] == pytest.approx(closed_form_selectivity(n, theta, a), rel=1e-5)
        assert set(vs["ci_at"]) == {"0.9", "0.99"}
    assert c["trained_selectivity"] == pytest.approx(closed_form_selectivity(n, theta, a), rel=1e-12)
    assert len(c["rows"]["trained"]) == len(c["rows"]["stored"]) == 200 + n


def test_random_heads_are_seeded_draws_at_default_initialisation():
    spec = "6-16-8:relu:nobias:bn:last=bn"
    a, b = random_heads(spec, 3, seed=1), random_heads(spec, 3, seed=1)
    w = [h.layers[0].weight.detach() for h in a]
    assert all(torch.equal(x.layers[0].weight, y.layers[0].weight) for x, y in zip(a, b))  # reproducible
    assert not torch.equal(w[0], w[1]) and not torch.equal(w[0], random_heads(spec, 1, seed=2)[0].layers[0].weight)
    bound = 1 / math.sqrt(6)  # nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert all(float(x.abs().max()) <= bound for x in w) and float(w[0].abs().max()) > 0.8 * bound
    assert all(not h.training for h in a)
    template = head_from(spec)
    state = torch.random.get_rng_state()
    random_heads(spec, 2, seed=3)
    random_heads(template, 2, seed=3)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's random stream is left where it was
    with pytest.raises(ValueError, match="draws >= 1"):
        random_heads(spec, 0)


def test_batchnorm_calibration_standardises_over_the_stored_points_as_train_mode_would():
    torch.manual_seed(0)
    head = head_from("5-12-12-6:silu:nobias:bn:last=bn")
    x = 3.0 + 2.0 * torch.randn(40, 5)
    ref = head_from("5-12-12-6:silu:nobias:bn:last=bn")
    ref.load_state_dict(head.state_dict())
    out = calibrate_batchnorm(head, x)
    assert not head.training
    assert torch.allclose(head(x), out, atol=1e-6)  # the stored statistics give the calibrated output in eval mode
    with torch.no_grad():
        ref.train()
        train_out = ref(x)  # PyTorch's own batch statistics over the same points
    assert torch.allclose(out, train_out, atol=1e-4)
    # hand computation for the first BN: its input is x W1ᵀ; mean and biased variance over the 40 points
    pre = x @ head.layers[0].weight.T
    bn = head.layers[1]
    assert torch.allclose(bn.running_mean, pre.mean(0), atol=1e-5)
    assert torch.allclose(bn.running_var, pre.var(0, unbiased=False), rtol=1e-5)
    last = out.double()  # the last BN standardises exactly (up to eps)
    assert last.mean(0).abs().max() < 1e-5 and torch.allclose(last.var(0, unbiased=False),
                                                              torch.ones(6, dtype=torch.float64), atol=1e-3)


def test_the_two_batchnorm_settings_differ_for_a_bn_head():
    z = 5.0 + torch.randn(6, 5, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    labels = torch.arange(6) % 2
    rs = Resamples(bootstrap_counts(bootstrap_indices(6, 50, 0, strata=labels), 6), labels)
    c = random_head_control(z, z, "4-16-8:relu:nobias:bn:last=bn", rs, draws=4, seed=0)
    assert c["trained_selectivity"] == pytest.approx(1.0)  # the trained "head" is the identity
    assert c["stored"]["selectivity"] != pytest.approx(c["init"]["selectivity"], rel=1e-3)


def _control(trained: float, median: float, draws: list[float], noise: torch.Tensor) -> dict:
    """A random_head_control result with rows: the trained and median selectivities times exp(noise)."""
    return {"trained_selectivity": trained, "rows": {"trained": (trained * noise.exp()).tolist(),
                                                     "stored": (median * (0.5 * noise).exp()).tolist()},
            "stored": {"median_selectivity": median, "selectivity": draws}}


def test_excess_increase_is_the_log_ratio_of_learned_selectivities_with_paired_rows():
    n, b = 6, 300
    g = torch.Generator().manual_seed(0)
    noise = 0.05 * torch.randn(b + n, generator=g, dtype=torch.float64)
    by = {1: _control(0.8, 0.85, [0.8, 0.9], noise), 2: _control(1.5, 0.6, [0.5, 0.7], noise),
          3: _control(2.0, 0.5, [0.4, 0.6], 2 * noise)}
    out = excess_increase(by, b, torch.arange(n) % 2, levels=(0.9,))
    want = math.log(2.0 / 0.5) - math.log(0.8 / 0.85)
    assert out["delta"]["value"] == pytest.approx(want) and "0.9" in out["delta"]["ci_at"]
    assert out["excess"] == pytest.approx({1: 0.8 / 0.85, 2: 1.5 / 0.6, 3: 4.0})
    assert out["trained_delta"] == pytest.approx(math.log(2.0 / 0.8))
    assert out["control_deltas"] == pytest.approx([math.log(0.4 / 0.8), math.log(0.6 / 0.9)])
    lo, hi = out["delta"]["ci"]
    assert lo < want < hi and hi - lo < 0.3  # the rows' noise is small and shared: a tight interval
    with pytest.raises(ValueError, match="resampled differently"):
        excess_increase({1: by[1], 3: {**by[3], "rows": {"trained": [1.0], "stored": [1.0]}}}, b)
    with pytest.raises(ValueError, match="leave-one-out"):
        excess_increase(by, b, torch.arange(n + 1) % 2)

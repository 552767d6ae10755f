"""nn.RMSNorm and F.rms_norm on the structured path (headgeom/geometry/layers/rms_norm.py).

References: torch.autograd.functional on the module itself (the layer's J and second derivative)
and tests/geometry_reference.py (dense float64 H_eff, G, M of whole heads); neither shares code
with headgeom.geometry. Random weights, several seeds; relative error ≤ 1e-10 (tests/layer_reference.py).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.geometry.layers import FUNCTION_RULES, NotAChain, rule_for_module
from headgeom.heads import L2Normalize

from layer_reference import (DT, assert_head_exact_under_losses, assert_layer_matches_autograd,
                             assert_traced_head_exact)

SEEDS = (0, 1, 2)
N, D = 3, 6


def _rms_norm(width: int, seed: int, eps: float | None = None, affine: bool = True) -> nn.RMSNorm:
    norm = nn.RMSNorm(width, eps=eps, elementwise_affine=affine).to(DT)
    if affine:
        with torch.no_grad():
            norm.weight.copy_(0.5 + torch.rand(width, generator=torch.Generator().manual_seed(200 + seed), dtype=DT))
    return norm


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("eps", [None, 1e-6, 0.5])
@pytest.mark.parametrize("affine", [False, True])
def test_rms_norm_matches_autograd(seed, eps, affine):
    norm = _rms_norm(8, seed, eps, affine)
    assert_layer_matches_autograd(norm, rule_for_module(norm)(norm), 8, seed, f"RMSNorm(eps={eps})")


def test_f_rms_norm_matches_autograd():
    weight = torch.linspace(0.5, 1.5, 8, dtype=DT)
    layers = FUNCTION_RULES[F.rms_norm](((8,), weight), {"eps": 1e-4})
    assert_layer_matches_autograd(lambda x: F.rms_norm(x, (8,), weight, 1e-4), layers, 8, 5, "F.rms_norm")


def _heads(seed: int) -> dict[str, nn.Module]:
    torch.manual_seed(seed)
    return {
        # RMSNorm before an activation: its term with the shared first Jacobian
        "rms-silu": nn.Sequential(nn.Linear(D, 8), _rms_norm(8, seed), nn.SiLU(), nn.Linear(8, 5)),
        # GELU, then RMSNorm as the last nonlinearity before an L2-normalised output (DINO-like)
        "gelu-rms-l2": nn.Sequential(nn.Linear(D, 8), nn.GELU(), nn.Linear(8, 7), _rms_norm(7, seed, eps=1e-5),
                                     nn.Linear(7, 4), L2Normalize()),
        # RMSNorm of z itself (the identity as the shared Jacobian)
        "rms-first": nn.Sequential(_rms_norm(D, seed, eps=1e-3), nn.Linear(D, 7), nn.Tanh(), nn.Linear(7, 5)),
    }


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["rms-silu", "gelu-rms-l2", "rms-first"])
def test_heads_with_rms_norm_are_exact(seed, name):
    assert_head_exact_under_losses(_heads(seed)[name].to(DT).eval(), N, D, seed, name)


class _OwnForward(nn.Module):
    """A head with its own forward calling F.rms_norm: found by tracing."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 8), nn.Linear(8, 5)

    def forward(self, x):
        return self.fc2(F.silu(F.rms_norm(self.fc1(x), (8,), eps=1e-5)))


def test_a_traced_rms_norm_head_is_structured_and_exact():
    torch.manual_seed(3)
    assert_traced_head_exact(_OwnForward().to(DT), N, D, "traced F.rms_norm")


def test_rms_norm_over_two_dims_is_not_a_chain():
    norm = nn.RMSNorm((2, 4))
    with pytest.raises(NotAChain, match="2 trailing dims"):
        rule_for_module(norm)(norm)

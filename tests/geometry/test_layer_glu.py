"""nn.GLU and F.glu on the structured path (headgeom/geometry/layers/glu.py).

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

from layer_reference import (DT, assert_head_exact_under_losses, assert_layer_matches_autograd,
                             assert_traced_head_exact)

SEEDS = (0, 1, 2)
N, D = 3, 6


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dim", [-1, 1])
def test_glu_matches_autograd(seed, dim):
    glu = nn.GLU(dim)
    assert_layer_matches_autograd(glu, rule_for_module(glu)(glu), 10, seed, f"GLU(dim={dim})")


def test_f_glu_matches_autograd():
    assert_layer_matches_autograd(lambda x: F.glu(x), FUNCTION_RULES[F.glu]((), {}), 10, 4, "F.glu")


def _heads(seed: int) -> dict[str, nn.Module]:
    torch.manual_seed(seed)
    return {
        # the gate as the only nonlinearity: its term with the shared first Jacobian, and the middle factor
        "glu": nn.Sequential(nn.Linear(D, 10), nn.GLU(), nn.Linear(5, 4)),
        # SiLU, then GLU as the last nonlinearity, then a LayerNorm output (its γ, β folded)
        "silu-glu-ln": nn.Sequential(nn.Linear(D, 8), nn.SiLU(), nn.Linear(8, 10), nn.GLU(), nn.Linear(5, 6),
                                     nn.LayerNorm(6)),
        # GLU on z itself (the identity as the shared Jacobian), then a bottleneck and GELU
        "glu-first": nn.Sequential(nn.GLU(), nn.Linear(D // 2, 7), nn.GELU(), nn.Linear(7, 5)),
    }


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["glu", "silu-glu-ln", "glu-first"])
def test_heads_with_glu_are_exact(seed, name):
    assert_head_exact_under_losses(_heads(seed)[name].to(DT).eval(), N, D, seed, name)


class _OwnForward(nn.Module):
    """A head with its own forward calling F.glu: found by tracing."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 10), nn.Linear(5, 4)

    def forward(self, x):
        return self.fc2(F.glu(self.fc1(x), dim=-1))


def test_a_traced_glu_head_is_structured_and_exact():
    torch.manual_seed(3)
    assert_traced_head_exact(_OwnForward().to(DT), N, D, "traced F.glu")


def test_glu_over_the_batch_dim_is_not_a_chain():
    with pytest.raises(NotAChain, match="dim=0"):
        rule_for_module(nn.GLU(0))(nn.GLU(0))

"""nn.GroupNorm and F.group_norm on the structured path (headgeom/geometry/layers/group_norm.py).

References: torch.autograd.functional on the module itself (the layer's J and second derivative)
and tests/geometry_reference.py (dense float64 H_eff, G, M of whole heads); neither shares code
with headgeom.geometry. Random weights, several seeds; relative error ≤ 1e-10 (tests/layer_reference.py).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.geometry.layers import FUNCTION_RULES, NotAChain, rule_for_module
from headgeom.objectives import analysis_loss

from layer_reference import (DT, assert_head_exact_under_losses, assert_layer_matches_autograd,
                             assert_traced_head_exact)

SEEDS = (0, 1, 2)
N, D = 3, 6


def _group_norm(groups: int, width: int, seed: int, affine: bool = True) -> nn.GroupNorm:
    gn = nn.GroupNorm(groups, width, eps=1e-3, affine=affine).to(DT)
    if affine:
        gen = torch.Generator().manual_seed(100 + seed)
        with torch.no_grad():
            gn.weight.copy_(0.5 + torch.rand(width, generator=gen, dtype=DT))
            gn.bias.copy_(0.3 * torch.randn(width, generator=gen, dtype=DT))
    return gn


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("groups", [1, 2, 4])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_matches_autograd(seed, groups, affine):
    gn = _group_norm(groups, 8, seed, affine)
    assert_layer_matches_autograd(gn, rule_for_module(gn)(gn), 8, seed, f"GroupNorm({groups}, 8)")


def test_f_group_norm_matches_autograd():
    gn = _group_norm(2, 8, 0)
    layers = FUNCTION_RULES[F.group_norm]((2, gn.weight, gn.bias), {"eps": 1e-3})  # as a traced forward calls it
    assert_layer_matches_autograd(lambda x: F.group_norm(x, 2, gn.weight, gn.bias, eps=1e-3), layers, 8, 0,
                                  "F.group_norm")


def _heads(seed: int) -> dict[str, nn.Module]:
    torch.manual_seed(seed)
    return {
        # GroupNorm between Linears, before an activation: its term with the shared first Jacobian
        "gn-silu": nn.Sequential(nn.Linear(D, 8), _group_norm(2, 8, seed), nn.SiLU(), nn.Linear(8, 5)),
        # GroupNorm as the last nonlinearity (the sandwich's middle factor), after LayerNorm and GELU
        "ln-gelu-gn": nn.Sequential(nn.Linear(D, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 8),
                                    _group_norm(4, 8, seed), nn.Linear(8, 5)),
        # first layer: a shared Jacobian that is the identity; then tanh and a bottleneck
        "gn-first": nn.Sequential(_group_norm(3, D, seed), nn.Linear(D, 7), nn.Tanh(), nn.Linear(7, 4)),
    }


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["gn-silu", "ln-gelu-gn", "gn-first"])
def test_heads_with_group_norm_are_exact(seed, name):
    assert_head_exact_under_losses(_heads(seed)[name].to(DT).eval(), N, D, seed, name)


class _OwnForward(nn.Module):
    """A head with its own forward calling F.group_norm: found by tracing."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 8), nn.Linear(8, 5)
        self.gamma = nn.Parameter(torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return self.fc2(F.silu(F.group_norm(self.fc1(x), 2, self.gamma, None, 1e-4)))


def test_a_traced_group_norm_head_is_structured_and_exact():
    torch.manual_seed(3)
    assert_traced_head_exact(_OwnForward().to(DT), N, D, "traced F.group_norm")


def test_group_norm_says_structured_and_sandwiches_by_default():
    head = _heads(0)["gn-silu"].to(DT)
    z = torch.randn(N, D, dtype=DT)
    eh = effective_hessian(head, analysis_loss("negative_cosine", torch.randn(N, 5, dtype=DT)), z)
    assert eh.info()["discovered_by"] == "sequential" and eh.info()["block_path"] == "structured-mlp"
    assert [type(m).__name__ for m in eh.structured_layers] == ["Linear", "GroupNormalize", "Linear", "SiLU", "Linear"]


def test_f_group_norm_with_a_bad_group_count_is_not_a_chain():
    with pytest.raises(NotAChain, match="num_groups"):
        FUNCTION_RULES[F.group_norm]((0,), {})

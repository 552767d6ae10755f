"""The layer protocol is open: a layer kind registered from outside the package (here, from this
test file) takes the structured path, with no edit of the engine (headgeom/geometry/layers/base.py).

The kind: a softmax over the features, y = softmax(x), written with its closed-form derivatives
(p = y, q = g ⊙ p, t = gᵀp):

    J = diag p − p pᵀ,        S = ∇²⟨g, y⟩ = diag(p ⊙ (g − t)) − (q pᵀ + p qᵀ) + 2 t p pᵀ

and nothing else: the protocol's dense defaults give every product from J and S. References:
autograd on the module (the layer) and tests/geometry_reference.py (the heads); relative error ≤ 1e-10.
"""
from __future__ import annotations

import pytest
import torch
from torch import Tensor, nn

from headgeom.geometry import effective_hessian
from headgeom.geometry.layers import (CHAIN_LAYERS, MODULE_RULES, ChainLayer, LayerPass, chain_layer, module_rule,
                                      rule_for_module)
from headgeom.objectives import analysis_loss

from layer_reference import DT, assert_head_exact, assert_layer_matches_autograd

N, D = 3, 5


class FeatureSoftmax(nn.Module):
    """A user's module: softmax over the features."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.softmax(x, dim=-1)


class SoftmaxPass(LayerPass):
    def __init__(self, y: Tensor, g: Tensor | None = None) -> None:
        self.y, self.g = y, g

    def rows(self, sel):
        return SoftmaxPass(self.y[sel], None if self.g is None else self.g[sel])

    def backward(self, g: Tensor) -> Tensor:
        self.g = g
        return (self.dense_jacobian().transpose(1, 2) @ g[:, :, None])[:, :, 0]

    def dense_jacobian(self) -> Tensor:
        p = self.y
        return torch.diag_embed(p) - p[:, :, None] * p[:, None, :]

    def dense_second(self) -> Tensor:
        p, g = self.y, self.g
        q, t = g * p, (g * p).sum(-1, keepdim=True)
        outer = lambda a, b: a[:, :, None] * b[:, None, :]  # noqa: E731
        return torch.diag_embed(p * (g - t)) - outer(q, p) - outer(p, q) + 2.0 * t[:, :, None] * outer(p, p)


class SoftmaxLayer(ChainLayer):
    def forward(self, x: Tensor) -> SoftmaxPass:
        return SoftmaxPass(torch.softmax(x, dim=-1))


@pytest.fixture()
def registered():
    """FeatureSoftmax registered as a chain layer with a module rule, for one test."""
    chain_layer(FeatureSoftmax)(SoftmaxLayer)
    module_rule(FeatureSoftmax)(lambda module: [module])
    yield
    del CHAIN_LAYERS[FeatureSoftmax], MODULE_RULES[FeatureSoftmax]


def _head() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, 6), FeatureSoftmax(), nn.Linear(6, 7), nn.SiLU(), nn.Linear(7, 4)).to(DT)


def _problem():
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(N, D, generator=gen, dtype=DT)
    return z, analysis_loss("negative_cosine", torch.randn(N, 4, generator=gen, dtype=DT))


def test_unregistered_the_head_takes_the_generic_path():
    z, loss = _problem()
    info = effective_hessian(_head(), loss, z).info()
    assert info["block_path"] == "generic-torch.func"
    assert "no layer rule for softmax" in info["discovered_by"]  # traced into its forward


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_registered_kind_matches_autograd(registered, seed):
    module = FeatureSoftmax()
    assert_layer_matches_autograd(module, rule_for_module(module)(module), 6, seed, "FeatureSoftmax")


def test_registered_from_outside_the_head_is_structured_and_exact(registered):
    z, loss = _problem()
    head = _head()
    eh = effective_hessian(head, loss, z)
    assert eh.info()["discovered_by"] == "sequential" and eh.info()["block_path"] == "structured-mlp"
    assert eh.block_path() == "sandwich+declared-curvature"
    assert_head_exact(head, loss, z, "FeatureSoftmax head")
    # and as the last nonlinearity (the sandwich's middle factor from the dense defaults)
    torch.manual_seed(2)
    last = nn.Sequential(nn.Linear(D, 6), nn.Tanh(), nn.Linear(6, 6), FeatureSoftmax(), nn.Linear(6, 4)).to(DT)
    assert_head_exact(last, loss, z, "FeatureSoftmax last")


def test_a_rule_whose_module_has_no_chain_layer_is_not_a_chain():
    module_rule(FeatureSoftmax)(lambda module: [module])  # a rule, but no ChainLayer for what it returns
    try:
        z, loss = _problem()
        info = effective_hessian(_head(), loss, z).info()
    finally:
        del MODULE_RULES[FeatureSoftmax]
    assert info["block_path"] == "generic-torch.func"
    assert "no chain layer registered for FeatureSoftmax" in info["discovered_by"]

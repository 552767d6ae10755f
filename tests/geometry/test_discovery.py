"""Heads written as users write them, discovered into chains by tracing, and what falls back and why.

Each head's blocks are checked against the dense float64 reference of tests/geometry_reference.py
(torch.autograd.functional.hessian of the composed loss; relative error <= 1e-9), whichever path
``eh.info()["discovered_by"]`` reports.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.discovery import discover
from headgeom.geometry.engine.head_cache import HeadCache
from headgeom.geometry.layers import MODULE_RULES
from headgeom.geometry.engine.chain import flatten_layers, fuse_affine_runs
from headgeom.heads import L2Normalize, head_from
from headgeom.objectives import analysis_loss, negative_cosine

from geometry_reference import diagonal_blocks, reference_parts
from official_models import DINOHead

DT = torch.float64
N, D = 3, 4


class TwoLayer(nn.Module):
    """A head with its own forward: fc2(silu(fc1(x)))."""

    def __init__(self, d=D, w=6, k=5):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, w), nn.Linear(w, k)

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(x)))


class MethodsMLP(nn.Module):
    """Tensor methods and torch functions between Linears, and a shape check as users write one."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(D, 6), nn.Linear(6, 6), nn.Linear(6, 5)

    def forward(self, x, return_hidden=False):
        if x.shape[-1] != D:
            raise ValueError("wrong width")
        x = torch.tanh(self.a(x))
        x = self.b(x).sigmoid()
        x = F.softplus(self.c(x), beta=2.0)
        return x


class LNGELU(nn.Module):
    """A LayerNorm + GELU head (ViT style), with a parameter used through F.linear."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, 6)
        self.norm = nn.LayerNorm(6)
        self.w_out = nn.Parameter(torch.randn(5, 6) / 3)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.3, 0.3)

    def forward(self, x):
        return F.linear(F.gelu(self.norm(self.fc1(x))), self.w_out)


class LightlyProjectionHead(nn.Module):
    """lightly's ProjectionHead layout: a ``self.layers`` Sequential built from blocks."""

    def __init__(self, blocks):
        super().__init__()
        layers = []
        for input_dim, output_dim, batch_norm, non_linearity in blocks:
            use_bias = not bool(batch_norm)
            layers.append(nn.Linear(input_dim, output_dim, bias=use_bias))
            if batch_norm:
                layers.append(batch_norm)
            if non_linearity:
                layers.append(non_linearity)
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        projection = self.layers(x)
        return projection


class DataDependent(TwoLayer):
    """Control flow on the values (an overflow guard, as training code writes one): not traceable,
    and not vmappable either."""

    def forward(self, x):
        h = F.silu(self.fc1(x))
        if (h.abs() > 1e6).any():
            h = h.clamp(-1e6, 1e6)
        return self.fc2(h)


class Residual(TwoLayer):
    """A skip connection: not a chain."""

    def __init__(self):
        super().__init__(D, D, 5)

    def forward(self, x):
        return self.fc2(x + torch.tanh(self.fc1(x)))


def _lightly():
    torch.manual_seed(3)
    bn = nn.BatchNorm1d(6)
    head = LightlyProjectionHead([(D, 6, bn, nn.ReLU()), (6, 6, None, nn.GELU()), (6, 5, None, None)])
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return head.eval()


def _seeded(make, seed):
    torch.manual_seed(seed)
    return make()


HEADS = {
    "dino-legacy-wn": (lambda: _seeded(lambda: DINOHead(D, 12, hidden_dim=8, bottleneck_dim=3), 1), "traced"),
    "dino-param-wn": (lambda: _seeded(lambda: DINOHead(D, 12, hidden_dim=8, bottleneck_dim=3, new_weight_norm=True),
                                      2), "traced"),
    "two-layer": (lambda: _seeded(TwoLayer, 4), "traced"),
    "methods": (lambda: _seeded(MethodsMLP, 5), "traced"),
    "ln-gelu": (lambda: _seeded(LNGELU, 6), "traced"),
    "lightly": (_lightly, "traced"),
    "headgeom-spec": (lambda: _seeded(lambda: head_from("4-8-8-12:gelu:dino=3"), 7), "traced"),
    "sequential": (lambda: _seeded(lambda: nn.Sequential(nn.Linear(D, 6), nn.Tanh(), nn.Linear(6, 5)), 8),
                   "sequential"),
    "data-dependent": (lambda: _seeded(DataDependent, 9), "generic (forward has data-dependent control flow"),
    "residual": (lambda: _seeded(Residual, 10), "generic ("),
}


def _problem(head, loss_name):
    g = torch.Generator().manual_seed(11)
    z = torch.randn(N, D, generator=g, dtype=DT)
    with torch.no_grad():
        k = head(z).shape[1]
    target = torch.randn(N, k, generator=g, dtype=DT)
    if loss_name == "dino":
        return z, analysis_loss("dino", 5.0 * target), None
    return z, analysis_loss("negative_cosine", target), (lambda u: negative_cosine(u, target))


def _assert_relative(got, want, what):
    err = float((got - want).abs().max())
    assert err <= 1e-9 * float(want.abs().max()), f"{what}: relative error {err / float(want.abs().max()):.3g}"


@pytest.mark.parametrize("name", list(HEADS))
def test_every_head_is_exact_and_says_how_it_was_discovered(name):
    make, how = HEADS[name]
    head = make().to(DT)
    losses = ("negative_cosine", "dino") if name.startswith("dino") else ("negative_cosine",)
    for loss_name in losses:
        z, loss, _ = _problem(head, loss_name)
        ref_h, ref_g, ref_m = (diagonal_blocks(p, N, D) for p in reference_parts(head, loss, z))
        eh = effective_hessian(head, loss, z, chunk_size=2)
        assert eh.info()["discovered_by"].startswith(how), eh.info()["discovered_by"]
        assert eh.structured == (not how.startswith("generic"))
        for part, got, want in zip("HGM", eh.decomposed_blocks(), (ref_h, ref_g, ref_m)):
            _assert_relative(got, want, f"{name}/{loss_name} {part}")
        _assert_relative(eh.blocks(), ref_h, f"{name}/{loss_name} blocks()")


def _discovered_by(head):
    z, loss, _ = _problem(head, "negative_cosine")
    return effective_hessian(head, loss, z).info()["discovered_by"]


def test_fallback_reasons_name_the_cause():
    assert "data-dependent control flow" in _discovered_by(HEADS["data-dependent"][0]().to(DT))
    assert "residual connection" in _discovered_by(HEADS["residual"][0]().to(DT))
    frozen = HEADS["two-layer"][0]().to(DT)
    assert _discovered_by(lambda x: frozen(x)) == "generic (a callable, not an nn.Module)"
    assert "BatchNorm in train mode" in _discovered_by(_lightly().to(DT).train())


@pytest.mark.parametrize("name", ["two-layer", "lightly", "dino-legacy-wn"])
def test_traced_chain_is_the_chain_of_the_identical_sequential(name):
    """Tracing produces what walking the same layers as an nn.Sequential produces."""
    head = HEADS[name][0]().to(DT)
    traced = fuse_affine_runs(flatten_layers(head, (N, D)))
    if name == "two-layer":
        seq = nn.Sequential(head.fc1, nn.SiLU(), head.fc2)
    elif name == "lightly":
        seq = head.layers
    else:
        seq = nn.Sequential(*head.mlp, L2Normalize(), head.last_layer)
    walked = fuse_affine_runs(flatten_layers(seq))
    assert discover(seq).how == "sequential"
    assert [type(a).__name__ for a in walked] == [type(b).__name__.replace("Elementwise", "SiLU") for b in traced]
    for a, b in zip(walked, traced):
        if isinstance(a, nn.Linear):
            assert torch.equal(a.weight, b.weight) and (a.bias is None) == (b.bias is None)
    z = torch.randn(N, D, dtype=DT)
    with torch.no_grad():
        out = head(z)
        for chain in (walked, traced):
            x = z
            for layer in chain:
                x = layer(x)
            torch.testing.assert_close(x, out, rtol=1e-12, atol=1e-14)


def test_a_chain_that_does_not_reproduce_the_output_is_not_used(monkeypatch):
    """The numerical guard: a rule that drops a layer's effect gives a wrong chain, and the generic path runs."""
    class Doubling(nn.Module):
        def forward(self, x):
            return 2.0 * x

    head = nn.Sequential(nn.Linear(D, 5), nn.Tanh(), Doubling()).to(DT)
    monkeypatch.setitem(MODULE_RULES, Doubling, lambda m: [])  # a wrong rule: the identity
    z, loss, _ = _problem(head, "negative_cosine")
    eh = effective_hessian(head, loss, z)
    assert not eh.structured
    assert eh.info()["discovered_by"] == "generic (the sequential chain does not reproduce the head's output on the first rows)"
    _assert_relative(eh.blocks(), diagonal_blocks(reference_parts(head, loss, z)[0], N, D), "guarded fallback")


@pytest.mark.parametrize("name", ["two-layer", "dino-legacy-wn", "dino-param-wn"])
def test_in_place_weight_changes_invalidate_the_traced_chain(name):
    head = HEADS[name][0]()  # float32, as a training run holds it
    z, loss, _ = _problem(head.to(DT), "negative_cosine")
    head = head.float()
    cache = HeadCache()
    first = effective_hessian(head, loss, z, cache=cache)
    assert effective_hessian(head, loss, z, cache=cache).head is first.head  # unchanged: the copy (and its chain) reused
    assert first.info()["discovered_by"] == "traced"
    with torch.no_grad():
        linear = head.fc1 if name == "two-layer" else head.mlp[0]
        linear.weight.data.add_(0.25)  # bypasses the version counter
        if name == "dino-legacy-wn":
            head.last_layer.weight_v.data.mul_(1.5).add_(0.1)
        elif name == "dino-param-wn":
            head.last_layer.parametrizations.weight.original1.data.mul_(1.5).add_(0.1)
    second = effective_hessian(head, loss, z, cache=cache)
    assert second.head is not first.head and second.structured
    ref = diagonal_blocks(reference_parts(copy.deepcopy(head).to(DT), loss, z)[0], N, D)
    _assert_relative(second.blocks(), ref, f"{name} after the change")

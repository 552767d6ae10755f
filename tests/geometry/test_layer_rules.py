"""Every registered layer rule against autograd: the chain a rule yields has the call's value, Jacobian
and second derivative (u, J_iᵀ, M_i = ∇²⟨ρ_i, f(x_i)⟩ from the structured chain pass).

The reference is torch.autograd.functional on the module or function call itself, row by row.
Every registered rule must have an example here (adding a layer type = one rule, one registration,
one example).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.functional import hessian, jacobian

from headgeom.geometry.layers import FUNCTION_RULES, MODULE_RULES, NotAChain, is_elementwise, rule_for_module
from headgeom.geometry.engine.chain import chain_pass, fuse_affine_runs
from headgeom.geometry.layers import ChannelAffine, GroupNormalize, RMSNormalize, RowNorm
from headgeom.heads import ACTIVATION_REGISTRY, L2Normalize

DT = torch.float64
S, W = 3, 6  # W even (GLU halves it) and a multiple of GroupNorm's 3 groups


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _bn() -> nn.BatchNorm1d:
    bn = nn.BatchNorm1d(W).to(DT)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5, generator=_gen(1))
        bn.running_var.uniform_(0.5, 2.0, generator=_gen(2))
        bn.weight.uniform_(0.5, 1.5, generator=_gen(3))
        bn.bias.uniform_(-0.3, 0.3, generator=_gen(4))
    return bn.eval()


def _ln() -> nn.LayerNorm:
    ln = nn.LayerNorm(W, eps=1e-5).to(DT)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5, generator=_gen(5))
        ln.bias.uniform_(-0.3, 0.3, generator=_gen(6))
    return ln


def _affine_norm(norm: nn.Module) -> nn.Module:
    """A norm module with its γ (and β) away from 1 (and 0)."""
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5, generator=_gen(14))
        if getattr(norm, "bias", None) is not None:
            norm.bias.uniform_(-0.3, 0.3, generator=_gen(15))
    return norm


def _linear() -> nn.Linear:
    torch.manual_seed(7)
    return nn.Linear(W, 4).to(DT)


WEIGHT = torch.randn(4, W, generator=_gen(8), dtype=DT)
BIAS = torch.randn(4, generator=_gen(9), dtype=DT)
GAMMA, BETA = torch.rand(W, generator=_gen(10), dtype=DT) + 0.5, torch.randn(W, generator=_gen(11), dtype=DT)

# module rules: key -> a module of that type
MODULE_EXAMPLES = {
    nn.Linear: _linear,
    nn.Identity: nn.Identity,
    ChannelAffine: lambda: ChannelAffine(GAMMA, BETA),
    nn.BatchNorm1d: _bn,
    nn.Dropout: lambda: nn.Dropout(0.3).eval(),
    nn.LayerNorm: _ln,
    L2Normalize: lambda: L2Normalize(1e-6),
    RowNorm: lambda: RowNorm("ln", 1e-5),
    nn.ReLU: nn.ReLU, nn.GELU: lambda: nn.GELU(approximate="tanh"), nn.SiLU: nn.SiLU,
    nn.Softplus: lambda: nn.Softplus(beta=2.0), nn.Tanh: nn.Tanh, nn.ELU: lambda: nn.ELU(alpha=0.7),
    nn.Sigmoid: nn.Sigmoid, nn.LeakyReLU: lambda: nn.LeakyReLU(0.1), nn.Mish: nn.Mish,
    nn.CELU: lambda: nn.CELU(0.5), nn.SELU: nn.SELU, nn.Hardtanh: lambda: nn.Hardtanh(-0.5, 0.5),
    nn.ReLU6: nn.ReLU6, nn.Softsign: nn.Softsign, nn.Tanhshrink: nn.Tanhshrink,
    nn.GroupNorm: lambda: _affine_norm(nn.GroupNorm(3, W, eps=1e-3)), GroupNormalize: lambda: GroupNormalize(1, 1e-5),
    nn.GLU: lambda: nn.GLU(dim=1), nn.RMSNorm: lambda: _affine_norm(nn.RMSNorm(W)), RMSNormalize: lambda: RMSNormalize(0.1),
}

# function rules: key -> (the function as called, the arguments after the input, keyword arguments)
FUNCTION_EXAMPLES = {
    F.linear: (F.linear, (WEIGHT,), {"bias": BIAS}),
    F.dropout: (F.dropout, (0.5,), {"training": False}),
    F.layer_norm: (F.layer_norm, ((W,), GAMMA, BETA), {"eps": 1e-5}),
    F.normalize: (F.normalize, (), {"dim": -1, "p": 2}),
    F.relu: (F.relu, (), {}), torch.relu: (torch.relu, (), {}),
    F.gelu: (F.gelu, (), {"approximate": "tanh"}), F.silu: (F.silu, (), {"inplace": False}),
    F.softplus: (F.softplus, (2.0, 20.0), {}), torch.tanh: (torch.tanh, (), {}), F.tanh: (F.tanh, (), {}),
    F.elu: (F.elu, (0.7,), {}), torch.sigmoid: (torch.sigmoid, (), {}), F.sigmoid: (F.sigmoid, (), {}),
    F.leaky_relu: (F.leaky_relu, (), {"negative_slope": 0.1}), F.mish: (F.mish, (), {}),
    F.celu: (F.celu, (), {"alpha": 0.5}), torch.celu: (torch.celu, (), {}), F.selu: (F.selu, (), {}),
    torch.selu: (torch.selu, (), {}), F.hardtanh: (F.hardtanh, (-0.5, 0.5), {}), F.relu6: (F.relu6, (), {}),
    F.softsign: (F.softsign, (), {}), F.tanhshrink: (F.tanhshrink, (), {}),
    "relu": (Tensor.relu, (), {}), "tanh": (Tensor.tanh, (), {}), "sigmoid": (Tensor.sigmoid, (), {}),
    F.group_norm: (F.group_norm, (2, GAMMA, BETA), {"eps": 1e-4}), F.glu: (F.glu, (), {"dim": -1}),
    F.rms_norm: (F.rms_norm, ((W,), GAMMA), {}),
}


def test_every_registered_rule_has_an_example():
    assert set(MODULE_RULES) == set(MODULE_EXAMPLES)
    assert set(FUNCTION_RULES) == set(FUNCTION_EXAMPLES)


def test_activations_come_from_the_one_registry():
    """The engine recognises exactly the registry's activations (module types, functions, methods)."""
    for act in ACTIVATION_REGISTRY.values():
        if act.module is not None:
            assert is_elementwise(act.module()) and rule_for_module(act.module()) is not None
        for fn in act.functions:
            assert fn in FUNCTION_RULES
        for method in act.methods:
            assert method in FUNCTION_RULES


def _check_chain(f, layers: list[nn.Module], what: str) -> None:
    """The chain of ``layers`` against autograd on f, row by row: u, J_iᵀ and M_i = ∇²⟨ρ_i, f(x_i)⟩."""
    x = 1.5 * torch.randn(S, W, generator=_gen(12), dtype=DT)
    with torch.no_grad():
        u = f(x)
    rho = torch.randn(u.shape, generator=_gen(13), dtype=DT)
    out = chain_pass(fuse_affine_runs(layers), x, rho)
    scale = max(1.0, float(u.abs().max()))
    torch.testing.assert_close(out.u, u, rtol=1e-12, atol=1e-12 * scale, msg=f"{what}: u")
    for i in range(S):
        row = lambda r: f(r[None])[0]  # noqa: E731
        jac = jacobian(row, x[i])
        sec = hessian(lambda r: (rho[i] * row(r)).sum(), x[i])
        for got, want, name in ((out.jt[i], jac.T, "J^T"), (out.interaction[i], sec, "M")):
            err = float((got - want).abs().max())
            assert err <= 1e-9 * max(1.0, float(want.abs().max())), f"{what}: {name} row {i}: error {err:.3g}"


@pytest.mark.parametrize("key", list(MODULE_EXAMPLES), ids=lambda k: k.__name__)
def test_module_rule_matches_autograd(key):
    module = MODULE_EXAMPLES[key]().to(DT)
    rule = rule_for_module(module)
    assert rule is MODULE_RULES[key]
    _check_chain(module, rule(module), key.__name__)


@pytest.mark.parametrize("key", list(FUNCTION_EXAMPLES), ids=lambda k: k if isinstance(k, str) else k.__name__)
def test_function_rule_matches_autograd(key):
    fn, args, kwargs = FUNCTION_EXAMPLES[key]
    layers = FUNCTION_RULES[key](args, kwargs)
    _check_chain(lambda x: fn(x, *args, **kwargs), layers, str(key))


@pytest.mark.parametrize("case", ["bn-train", "dropout-train", "f-dropout-train", "normalize-p1", "normalize-dim0",
                                  "ln-2d", "tensor-arg"])
def test_rules_refuse_what_is_not_a_chain_link(case):
    with pytest.raises(NotAChain):
        if case == "bn-train":
            MODULE_RULES[nn.BatchNorm1d](nn.BatchNorm1d(W).train())
        elif case == "dropout-train":
            MODULE_RULES[nn.Dropout](nn.Dropout(0.1).train())
        elif case == "f-dropout-train":
            FUNCTION_RULES[F.dropout]((0.1,), {"training": True})
        elif case == "normalize-p1":
            FUNCTION_RULES[F.normalize]((), {"p": 1})
        elif case == "normalize-dim0":
            FUNCTION_RULES[F.normalize]((), {"dim": 0})
        elif case == "ln-2d":
            MODULE_RULES[nn.LayerNorm](nn.LayerNorm((2, W)))
        else:
            FUNCTION_RULES[F.softplus]((torch.ones(W),), {})


def test_a_subclass_with_its_own_forward_has_no_rule():
    class Doubled(nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    class Plain(nn.Linear):  # keeps Linear's forward: the Linear rule applies
        pass

    assert rule_for_module(Doubled(2, 3)) is None
    assert rule_for_module(Plain(2, 3)) is MODULE_RULES[nn.Linear]
    wn = torch.nn.utils.parametrizations.weight_norm(nn.Linear(2, 3))  # a generated subclass of Linear
    assert type(wn) is not nn.Linear and rule_for_module(wn) is MODULE_RULES[nn.Linear]

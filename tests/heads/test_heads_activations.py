"""Activation registry: every name builds the standard torch module with the right maths."""
import math

import pytest
import torch
from torch import nn

from headgeom.heads import ACTIVATION_REGISTRY, ACTIVATIONS, ALIASES, canonical_act, get_act, is_identity, valid_activation_names

# Written from the brief, independently of the registry: name -> torch type.
EXPECTED_TYPES = {
    "linear": nn.Identity, "identity": nn.Identity,
    "relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "swish": nn.SiLU,
    "softplus": nn.Softplus, "tanh": nn.Tanh, "elu": nn.ELU,
}


def _phi(x):  # standard normal CDF
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


# Independent float64 formulas.
FORMULAS = {
    "linear": lambda x: x,
    "relu": lambda x: torch.where(x > 0, x, torch.zeros_like(x)),
    "gelu": lambda x: x * _phi(x),
    "silu": lambda x: x / (1.0 + torch.exp(-x)),
    "softplus": lambda x: torch.log1p(torch.exp(x)),
    "tanh": lambda x: (torch.exp(x) - torch.exp(-x)) / (torch.exp(x) + torch.exp(-x)),
    "elu": lambda x: torch.where(x > 0, x, torch.exp(x) - 1.0),
}


def test_registry_covers_exactly_the_required_names():
    assert set(valid_activation_names()) == set(EXPECTED_TYPES)
    assert set(ACTIVATIONS) == {"linear", "relu", "gelu", "silu", "softplus", "tanh", "elu"}
    assert ALIASES == {"identity": "linear", "swish": "silu"}


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPES))
def test_every_name_builds_its_torch_module(name):
    module = get_act(name)
    assert type(module) is EXPECTED_TYPES[name]
    assert get_act(name) is not module  # a fresh module every call


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_activation_values_match_formula(name):
    x = torch.linspace(-4.0, 4.0, 101, dtype=torch.float64)
    torch.testing.assert_close(get_act(name)(x), FORMULAS[name](x), rtol=1e-12, atol=1e-12)


def test_softplus_beta_and_elu_alpha_are_passed():
    x = torch.linspace(-3.0, 3.0, 61, dtype=torch.float64)
    sp = get_act("softplus", beta=5)
    assert isinstance(sp, nn.Softplus) and sp.beta == 5.0
    torch.testing.assert_close(sp(x), torch.log1p(torch.exp(5.0 * x)) / 5.0, rtol=1e-12, atol=1e-12)
    elu = get_act("elu", alpha=0.5)
    assert isinstance(elu, nn.ELU) and elu.alpha == 0.5
    torch.testing.assert_close(elu(x), torch.where(x > 0, x, 0.5 * (torch.exp(x) - 1)), rtol=1e-12, atol=1e-12)
    gelu = get_act("gelu", approximate="tanh")
    assert gelu.approximate == "tanh"
    tanh_formula = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    torch.testing.assert_close(gelu(x), tanh_formula, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_has_curvature_matches_autograd_second_derivative(name):
    # σ'' by autograd at points away from 0 (ReLU's kink): zero iff has_curvature is False.
    x = torch.cat([torch.linspace(-3, -0.1, 20), torch.linspace(0.1, 3, 20)]).double().requires_grad_(True)
    y = get_act(name)(x)
    (d1,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    d2 = torch.autograd.grad(d1.sum(), x, allow_unused=True)[0] if d1.requires_grad else None
    nonzero = d2 is not None and bool((d2.abs() > 1e-8).any())
    assert nonzero == ACTIVATIONS[name].has_curvature


def test_aliases_and_case():
    assert canonical_act("Swish") == "silu"
    assert canonical_act(" IDENTITY ") == "linear"
    assert is_identity("identity") and is_identity("linear") and not is_identity("relu")


def test_unknown_name_lists_valid_ones():
    with pytest.raises(ValueError) as err:
        get_act("sigmoidal")
    msg = str(err.value)
    assert "'sigmoidal'" in msg
    for name in EXPECTED_TYPES:
        assert name in msg
    with pytest.raises(TypeError, match="must be a str"):
        canonical_act(3)


@pytest.mark.parametrize(
    "name, kwargs, exc, fragment",
    [
        ("relu", {"beta": 2.0}, ValueError, "takes no keyword 'beta'"),
        ("linear", {"alpha": 1.0}, ValueError, "takes no keyword 'alpha'"),
        ("softplus", {"beta": -1.0}, ValueError, "must be > 0"),
        ("softplus", {"beta": float("inf")}, ValueError, "finite"),
        ("softplus", {"beta": "5"}, TypeError, "must be a number"),
        ("softplus", {"beta": True}, TypeError, "must be a number"),
        ("gelu", {"approximate": "erf"}, ValueError, "none, tanh"),
        ("elu", {"gamma": 1.0}, ValueError, "its keywords are: alpha"),
    ],
)
def test_bad_kwargs_raise_with_message(name, kwargs, exc, fragment):
    with pytest.raises(exc, match=fragment):
        get_act(name, **kwargs)


@pytest.mark.parametrize("name", sorted(n for n, a in ACTIVATION_REGISTRY.items() if a.module is not None))
def test_registry_functions_and_methods_compute_the_module_map(name):
    """Each registered function and tensor method is the same map as the module (default options),
    and σ'' is non-zero iff has_curvature, for the activations head specs cannot name too."""
    act = ACTIVATION_REGISTRY[name]
    x = torch.cat([torch.linspace(-3, -0.1, 20), torch.linspace(0.1, 3, 20)]).double().requires_grad_(True)
    y = act.module()(x)
    for fn in act.functions:
        torch.testing.assert_close(fn(x), y, rtol=1e-14, atol=1e-14)
    for method in act.methods:
        torch.testing.assert_close(getattr(x, method)(), y, rtol=1e-14, atol=1e-14)
    (d1,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    d2 = torch.autograd.grad(d1.sum(), x, allow_unused=True)[0] if d1.requires_grad else None
    assert (d2 is not None and bool((d2.abs() > 1e-8).any())) == act.has_curvature
    assert act.in_specs == (name in ACTIVATIONS)

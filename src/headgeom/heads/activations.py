"""Activation registry: name -> plain torch module (timm-style ``get_act``), shared by heads and engine.

Every element-wise activation is registered once here (``ACTIVATION_REGISTRY``): its torch module
type, the functions and tensor methods that compute it (``F.silu``, ``torch.tanh``, ``x.sigmoid()``)
and, for those a head spec may name (``in_specs``), the keyword arguments it accepts, so that
``HeadSpec`` validation, the compact string form and the builder share one vocabulary
(``ACTIVATIONS``, the spec view of the registry). The geometry engine recognises an activation
by the module type or function registered here (:mod:`headgeom.geometry.layers.registry`): a new
activation is one entry below.

``has_curvature`` records whether σ'' is non-zero on a set of positive measure: per
docs/paper.md §1 the interaction term M vanishes for linear heads and almost everywhere for
ReLU heads, and is generically non-zero for the smooth ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ActParam:
    """One keyword argument of an activation: type, default and allowed values."""

    kind: type  # float or str
    default: Any
    positive: bool = False  # floats only: must be > 0
    choices: tuple[str, ...] | None = None  # strings only


@dataclass(frozen=True)
class ActivationDef:
    """A registered activation.

    ``build(**kwargs)`` returns a fresh module; it is None for the identity, which a head
    represents by *no module at all* (a "linear" head is consecutive Linears).
    ``primary`` names the keyword the compact string sets with ``name=value``.
    ``module`` is the torch module type the engine recognises (None: the identity);
    ``functions`` and ``methods`` compute the same map on a tensor (for heads with their own
    forward); ``in_specs`` says whether head specs may name it.
    """

    name: str
    build: Callable[..., nn.Module] | None
    params: dict[str, ActParam] = field(default_factory=dict)
    primary: str | None = None
    has_curvature: bool = True
    module: type[nn.Module] | None = None
    functions: tuple[Callable, ...] = ()
    methods: tuple[str, ...] = ()
    in_specs: bool = True


def _def(name: str, module: type[nn.Module], functions: tuple = (), methods: tuple = (), *,
         params: dict[str, ActParam] | None = None, primary: str | None = None, curvature: bool = True,
         in_specs: bool = True) -> ActivationDef:
    return ActivationDef(name, module, params or {}, primary, curvature, module, functions, methods, in_specs)


ACTIVATION_REGISTRY: dict[str, ActivationDef] = {a.name: a for a in (
    ActivationDef("linear", None, has_curvature=False),
    _def("relu", nn.ReLU, (F.relu, torch.relu), ("relu",), curvature=False),
    _def("gelu", nn.GELU, (F.gelu,), params={"approximate": ActParam(str, "none", choices=("none", "tanh"))},
         primary="approximate"),
    _def("silu", nn.SiLU, (F.silu,)),
    _def("softplus", nn.Softplus, (F.softplus,), primary="beta",
         params={"beta": ActParam(float, 1.0, positive=True), "threshold": ActParam(float, 20.0, positive=True)}),
    _def("tanh", nn.Tanh, (torch.tanh, F.tanh), ("tanh",)),
    _def("elu", nn.ELU, (F.elu,), params={"alpha": ActParam(float, 1.0)}, primary="alpha"),
    # recognised by the engine in users' heads; not (yet) offered by head specs
    _def("sigmoid", nn.Sigmoid, (torch.sigmoid, F.sigmoid), ("sigmoid",), in_specs=False),
    _def("leaky_relu", nn.LeakyReLU, (F.leaky_relu,), curvature=False, in_specs=False),
    _def("mish", nn.Mish, (F.mish,), in_specs=False),
    _def("celu", nn.CELU, (F.celu, torch.celu), in_specs=False),
    _def("selu", nn.SELU, (F.selu, torch.selu), in_specs=False),
    _def("hardtanh", nn.Hardtanh, (F.hardtanh,), curvature=False, in_specs=False),
    _def("relu6", nn.ReLU6, (F.relu6,), curvature=False, in_specs=False),
    _def("softsign", nn.Softsign, (F.softsign,), in_specs=False),
    _def("tanhshrink", nn.Tanhshrink, (F.tanhshrink,), in_specs=False),
)}

# the names a head spec may use: a view of the one registry, not a second list
ACTIVATIONS: dict[str, ActivationDef] = {n: a for n, a in ACTIVATION_REGISTRY.items() if a.in_specs}

ALIASES: dict[str, str] = {"identity": "linear", "swish": "silu"}


def valid_activation_names() -> list[str]:
    """Every accepted name, canonical ones first, then aliases."""
    return sorted(ACTIVATIONS) + sorted(ALIASES)


def canonical_act(name: str) -> str:
    """The registry name for ``name`` (aliases resolved, case-insensitive).

    >>> canonical_act("Swish")
    'silu'
    """
    if not isinstance(name, str):
        raise TypeError(f"activation name must be a str, got {type(name).__name__} {name!r}")
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in ACTIVATIONS:
        raise ValueError(
            f"unknown activation {name!r}; valid names are {', '.join(valid_activation_names())} "
            f"(for example activation='silu')"
        )
    return key


def get_activation_def(name: str) -> ActivationDef:
    """The registry entry for ``name`` (aliases allowed)."""
    return ACTIVATIONS[canonical_act(name)]


def is_identity(name: str) -> bool:
    """True for "linear"/"identity": such a head puts no module between its Linears."""
    return canonical_act(name) == "linear"


def check_act_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Validate and coerce keyword arguments for activation ``name``.

    Returns a new dict with values of the declared type (ints become floats). Raises
    ValueError/TypeError naming the activation, the keyword and the value.
    """
    act = get_activation_def(name)
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key not in act.params:
            allowed = ", ".join(sorted(act.params)) or "none"
            raise ValueError(
                f"activation {act.name!r} takes no keyword {key!r} (value {value!r}); "
                f"its keywords are: {allowed}"
            )
        p = act.params[key]
        if p.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(
                    f"{act.name} {key} must be a number, got {type(value).__name__} {value!r}"
                )
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"{act.name} {key} must be finite, got {value!r}")
            if p.positive and value <= 0:
                raise ValueError(f"{act.name} {key} must be > 0, got {value!r}; e.g. {key}={p.default}")
        else:
            if not isinstance(value, str):
                raise TypeError(f"{act.name} {key} must be a str, got {type(value).__name__} {value!r}")
            if p.choices is not None and value not in p.choices:
                raise ValueError(
                    f"{act.name} {key} must be one of {', '.join(p.choices)}, got {value!r}"
                )
        out[key] = value
    return out


def get_act(name: str, **kwargs: Any) -> nn.Module:
    """A fresh activation module, e.g. ``get_act("softplus", beta=5.0)``.

    The identity ("linear") returns ``nn.Identity()`` for use elsewhere; ProjectionHead
    omits it entirely instead.
    """
    act = get_activation_def(name)
    kwargs = check_act_kwargs(act.name, kwargs)
    if act.build is None:
        return nn.Identity()
    return act.build(**kwargs)

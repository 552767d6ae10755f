"""Activation registry: name -> plain torch module (timm-style ``get_act``).

Every activation a head may use is registered once here, with the keyword arguments it
accepts, so that ``HeadSpec`` validation, the compact string form and the builder share
one vocabulary. The modules built are the standard torch ones (nn.ReLU, nn.GELU, nn.SiLU,
nn.Softplus, nn.Tanh, nn.ELU), because the geometry engine recognises them by type.

``has_curvature`` records whether σ'' is non-zero on a set of positive measure: per
docs/paper.md §1 the interaction term M vanishes for linear heads and almost everywhere for
ReLU heads, and is generically non-zero for the smooth ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

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
    """

    name: str
    build: Callable[..., nn.Module] | None
    params: dict[str, ActParam] = field(default_factory=dict)
    primary: str | None = None
    has_curvature: bool = True


ACTIVATIONS: dict[str, ActivationDef] = {
    "linear": ActivationDef("linear", None, has_curvature=False),
    "relu": ActivationDef("relu", nn.ReLU, has_curvature=False),
    "gelu": ActivationDef(
        "gelu", nn.GELU, {"approximate": ActParam(str, "none", choices=("none", "tanh"))}, "approximate"
    ),
    "silu": ActivationDef("silu", nn.SiLU),
    "softplus": ActivationDef(
        "softplus",
        nn.Softplus,
        {"beta": ActParam(float, 1.0, positive=True), "threshold": ActParam(float, 20.0, positive=True)},
        "beta",
    ),
    "tanh": ActivationDef("tanh", nn.Tanh),
    "elu": ActivationDef("elu", nn.ELU, {"alpha": ActParam(float, 1.0)}, "alpha"),
}

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

"""Layer rules: what one call in a head's forward becomes in the chain the structured block path runs on.

The structured passes (:mod:`headgeom.geometry.mlp_structure`, :mod:`headgeom.geometry.mlp_sandwich`)
run on a chain of a few layer kinds: ``nn.Linear`` (weight-normed by either torch API too: its
weight is read as g·V/‖V‖), eval-mode ``nn.BatchNorm1d``, element-wise activations (a registered
module, or :class:`Elementwise` for one called as a function), :class:`RowNorm` (LayerNorm's
normalisation, L2-normalisation), :class:`ChannelAffine` (LayerNorm's γ, β) and ``nn.Identity``.

A rule maps one call to such layers, or raises :class:`NotAChain` with the reason:

- a *module rule* ``rule(module) -> layers`` is registered by module type (``@module_rule(nn.LayerNorm)``);
  it applies to a subclass only when the subclass keeps the registered forward (torch's
  parametrised ``ParametrizedLinear`` does; a user's ``class MyLinear(nn.Linear)`` with its own
  forward is traced into instead);
- a *function rule* ``rule(args, kwargs) -> layers`` is registered by function (``F.normalize``)
  or tensor-method name (``"sigmoid"``); ``args`` are the call's arguments after the input.

The element-wise activations come from the one registry of :mod:`headgeom.heads.activations`
(module type, functions, methods), shared with the heads. Adding a layer type = one rule here,
its registration, and one example in tests/geometry/test_layer_rules.py (a test fails for a
registered rule without one).
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.heads.activations import ACTIVATION_REGISTRY
from headgeom.heads.build import L2Normalize
from headgeom.heads.offset import OutputOffset

from .norm_structure import ChannelAffine, RowNorm

ModuleRule = Callable[[nn.Module], list[nn.Module]]
FunctionRule = Callable[[tuple, dict], list[nn.Module]]

MODULE_RULES: dict[type, ModuleRule] = {}
FUNCTION_RULES: dict[Callable | str, FunctionRule] = {}  # a str names a tensor method (x.tanh())


class NotAChain(Exception):
    """The head (or one call in it) is not a chain of registered layers; the message says why."""


class Elementwise(nn.Module):
    """An element-wise activation called as a function: ``fn(x, *args, **kwargs)`` (F.silu, torch.tanh, ...)."""

    def __init__(self, fn: Callable, args: tuple = (), kwargs: dict | None = None) -> None:
        super().__init__()
        self.fn, self.args, self.kwargs = fn, tuple(args), dict(kwargs or {})

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x, *self.args, **self.kwargs)

    def extra_repr(self) -> str:
        return f"{getattr(self.fn, '__name__', self.fn)}, args={self.args}, kwargs={self.kwargs}"


def module_rule(*types: type) -> Callable[[ModuleRule], ModuleRule]:
    """Register ``rule`` for module types."""
    def register(rule: ModuleRule) -> ModuleRule:
        for t in types:
            MODULE_RULES[t] = rule
        return rule
    return register


def function_rule(*targets: Callable | str) -> Callable[[FunctionRule], FunctionRule]:
    """Register ``rule`` for functions or tensor-method names."""
    def register(rule: FunctionRule) -> FunctionRule:
        for t in targets:
            FUNCTION_RULES[t] = rule
        return rule
    return register


def rule_for_module(module: nn.Module) -> ModuleRule | None:
    """The rule of the nearest registered class in the module's MRO, if the module keeps its forward."""
    for cls in type(module).__mro__:
        if cls in MODULE_RULES:
            return MODULE_RULES[cls] if type(module).forward is cls.forward else None
    return None


def _named(args: tuple, kwargs: dict, names: tuple[str, ...], defaults: dict[str, Any], what: str) -> dict:
    """A call's arguments after the input, by name."""
    if len(args) > len(names):
        raise NotAChain(f"{what} called with {len(args) + 1} positional arguments")
    out = dict(defaults)
    out.update(zip(names, args))
    out.update(kwargs)
    return out


# ---------------------------------------------------------------------------------------- affine
@module_rule(nn.Linear, nn.Identity, ChannelAffine)
def _as_is(module: nn.Module) -> list[nn.Module]:
    return [module]


@module_rule(OutputOffset)
def _output_offset(module: OutputOffset) -> list[nn.Module]:
    """x + b (the induced collapse's fixed offset): a ChannelAffine with unit scale."""
    return [ChannelAffine(torch.ones_like(module.shift), module.shift)]


def fixed_linear(w: Tensor, b: Tensor | None) -> nn.Linear:
    """An nn.Linear holding ``w`` and ``b`` (detached, frozen) as they are: no random initialisation
    to overwrite (a full pass over W), and not ``torch.nn.utils.skip_init``, whose meta-device
    construction imports sympy (about a second on a process's first call)."""
    lin = nn.Linear.__new__(nn.Linear)
    nn.Module.__init__(lin)
    lin.in_features, lin.out_features = w.shape[1], w.shape[0]
    lin.weight = nn.Parameter(w.detach(), requires_grad=False)
    lin.register_parameter("bias", None if b is None else nn.Parameter(b.detach(), requires_grad=False))
    return lin


@function_rule(F.linear)
def _linear_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = _named(args, kwargs, ("weight", "bias"), {"bias": None}, "F.linear")
    w, b = a["weight"], a["bias"]
    if not isinstance(w, Tensor) or w.ndim != 2 or (b is not None and not isinstance(b, Tensor)):
        raise NotAChain("F.linear with a weight that is not a 2-D tensor of the head")
    return [fixed_linear(w, b)]


@module_rule(nn.BatchNorm1d)
def _batchnorm(module: nn.BatchNorm1d) -> list[nn.Module]:
    if module.training or module.running_mean is None:
        raise NotAChain("BatchNorm1d in train mode normalises with batch statistics (it couples the samples)")
    return [module]


@module_rule(nn.Dropout)
def _dropout(module: nn.Dropout) -> list[nn.Module]:
    if module.training and module.p != 0:
        raise NotAChain("Dropout in train mode is random")
    return []


@function_rule(F.dropout)
def _dropout_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = _named(args, kwargs, ("p", "training", "inplace"), {"p": 0.5, "training": True}, "F.dropout")
    if a["training"] and a["p"] != 0:
        raise NotAChain("F.dropout with training=True is random")
    return []


# ---------------------------------------------------------------------------------------- row norms
@module_rule(nn.LayerNorm)
def _layer_norm(module: nn.LayerNorm) -> list[nn.Module]:
    return _layer_norm_layers(tuple(module.normalized_shape), module.weight, module.bias, module.eps)


@function_rule(F.layer_norm)
def _layer_norm_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = _named(args, kwargs, ("normalized_shape", "weight", "bias", "eps"),
               {"weight": None, "bias": None, "eps": 1e-5}, "F.layer_norm")
    shape = a["normalized_shape"]
    return _layer_norm_layers(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,),
                              a["weight"], a["bias"], a["eps"])


def _layer_norm_layers(shape: tuple, weight: Tensor | None, bias: Tensor | None, eps: float) -> list[nn.Module]:
    """RowNorm("ln") and, when LayerNorm has γ or β, a ChannelAffine (folded into the next Linear)."""
    if len(shape) != 1:
        raise NotAChain(f"LayerNorm over {len(shape)} trailing dims (the chain normalises each row)")
    out: list[nn.Module] = [RowNorm("ln", eps)]
    if weight is not None or bias is not None:
        like = weight if weight is not None else bias
        ones = torch.ones(shape[0], dtype=like.dtype, device=like.device)
        scale = weight.detach() if weight is not None else ones
        shift = bias.detach() if bias is not None else torch.zeros_like(ones)
        out.append(ChannelAffine(scale, shift))
    return out


@module_rule(L2Normalize)
def _l2_module(module: L2Normalize) -> list[nn.Module]:
    return [RowNorm("l2", module.eps)]


@module_rule(RowNorm)
def _row_norm(module: RowNorm) -> list[nn.Module]:
    return [module]


@function_rule(F.normalize)
def _normalize_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = _named(args, kwargs, ("p", "dim", "eps", "out"), {"p": 2.0, "dim": 1, "eps": 1e-12, "out": None},
               "F.normalize")
    if a["p"] != 2 or a["dim"] not in (1, -1) or a["out"] is not None:
        raise NotAChain(f"F.normalize with p={a['p']}, dim={a['dim']} (the chain has the L2 norm over the features)")
    return [RowNorm("l2", float(a["eps"]))]


# ---------------------------------------------------------------------------------------- activations
def _elementwise_rule(fn: Callable) -> FunctionRule:
    """The rule of an activation function: Elementwise(fn, its constant arguments), ``inplace`` dropped."""
    try:
        names = tuple(list(inspect.signature(fn).parameters)[1:])
    except (TypeError, ValueError):  # a builtin (torch.tanh, F.gelu): arguments kept as given
        names = None

    def rule(args: tuple, kwargs: dict) -> list[nn.Module]:
        if names is not None:
            kwargs = _named(args, kwargs, names, {}, getattr(fn, "__name__", str(fn)))
            args = ()
        kwargs = {k: v for k, v in kwargs.items() if k != "inplace"}
        if any(isinstance(v, Tensor) for v in (*args, *kwargs.values())):
            raise NotAChain(f"{getattr(fn, '__name__', fn)} with a tensor argument (not element-wise)")
        return [Elementwise(fn, args, kwargs)]
    return rule


for _act in ACTIVATION_REGISTRY.values():
    if _act.module is not None:
        MODULE_RULES[_act.module] = _as_is
    for _fn in _act.functions:
        FUNCTION_RULES[_fn] = _elementwise_rule(_fn)
    for _method in _act.methods:
        FUNCTION_RULES[_method] = _elementwise_rule(getattr(Tensor, _method))

ELEMENTWISE_TYPES: tuple[type[nn.Module], ...] = (Elementwise,) + tuple(
    a.module for a in ACTIVATION_REGISTRY.values() if a.module is not None)


def is_elementwise(layer: nn.Module) -> bool:
    """True for a chain layer that is an element-wise activation (registered module or Elementwise)."""
    return isinstance(layer, ELEMENTWISE_TYPES)

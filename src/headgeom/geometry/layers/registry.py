"""The registry of layers: what a call in a head's forward becomes in a chain, and what each chain
module is to the structured passes.

Two tables, filled by the layer files of this package (and by anyone else: registering needs no
edit of the engine):

- **rules** map one call in a head's forward to chain modules, or raise :class:`NotAChain` with the
  reason. A *module rule* ``rule(module) -> modules`` is registered by module type
  (``@module_rule(nn.LayerNorm)``); it applies to a subclass only when the subclass keeps the
  registered forward (torch's parametrised ``ParametrizedLinear`` does; a user's
  ``class MyLinear(nn.Linear)`` with its own forward is traced into instead). A *function rule*
  ``rule(args, kwargs) -> modules`` is registered by function (``F.normalize``) or tensor-method
  name (``"sigmoid"``); ``args`` are the call's arguments after the input.
- **chain layers** map a chain module's type to its :class:`~headgeom.geometry.layers.base.ChainLayer`
  class (``@chain_layer(nn.Linear)``), the protocol the passes run: :func:`layer_of` binds one.

Adding a layer kind = one file with its ChainLayer, its rules, and a test against autograd;
tests/geometry/test_layer_rules.py fails for a registered rule without an example.
"""
from __future__ import annotations

from typing import Any, Callable

from torch import nn

from .base import ChainLayer

ModuleRule = Callable[[nn.Module], list[nn.Module]]
FunctionRule = Callable[[tuple, dict], list[nn.Module]]

MODULE_RULES: dict[type, ModuleRule] = {}
FUNCTION_RULES: dict[Callable | str, FunctionRule] = {}  # a str names a tensor method (x.tanh())
CHAIN_LAYERS: dict[type, type[ChainLayer]] = {}


class NotAChain(Exception):
    """The head (or one call in it) is not a chain of registered layers; the message says why."""


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


def chain_layer(*types: type) -> Callable[[type[ChainLayer]], type[ChainLayer]]:
    """Register a ChainLayer class as what chain modules of ``types`` are to the passes."""
    def register(cls: type[ChainLayer]) -> type[ChainLayer]:
        for t in types:
            CHAIN_LAYERS[t] = cls
        return cls
    return register


def as_is(module: nn.Module) -> list[nn.Module]:
    """The module rule of a module that is its own chain layer."""
    return [module]


def rule_for_module(module: nn.Module) -> ModuleRule | None:
    """The rule of the nearest registered class in the module's MRO, if the module keeps its forward."""
    for cls in type(module).__mro__:
        if cls in MODULE_RULES:
            return MODULE_RULES[cls] if type(module).forward is cls.forward else None
    return None


def layer_of(module: nn.Module) -> ChainLayer:
    """The ChainLayer of a chain module (nearest registered class in its MRO), bound to it."""
    for cls in type(module).__mro__:
        if cls in CHAIN_LAYERS:
            return CHAIN_LAYERS[cls](module)
    raise NotAChain(f"no chain layer registered for {type(module).__name__} (a rule returned it)")


def call_arguments(args: tuple, kwargs: dict, names: tuple[str, ...], defaults: dict[str, Any], what: str) -> dict:
    """A call's arguments after the input, by name (for function rules)."""
    if len(args) > len(names):
        raise NotAChain(f"{what} called with {len(args) + 1} positional arguments")
    out = dict(defaults)
    out.update(zip(names, args))
    out.update(kwargs)
    return out

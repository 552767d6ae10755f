"""Structure discovery: the chain of registered layers a head's forward computes, or why there is none.

Two front ends produce the same chain of :mod:`headgeom.geometry.layers.registry`:

- ``sequential``: an ``nn.Sequential`` (nested too) whose every child has a rule is its children in
  order (its forward is that chain by definition);
- ``traced``: any other module's forward is traced by ``torch.fx`` into a graph, and the graph must
  be a chain: one input, each call reading the previous call's result and only it (other
  arguments constants or the head's own tensors), each result read once, the last returned. Each
  call must have a rule: a module by type, a function (``F.normalize``, ``F.silu``, ``torch.tanh``)
  or a tensor method (``x.sigmoid()``). During tracing the input's shape is the analysed batch's,
  so a forward that checks ``z.shape`` traces; control flow on values (``if x.norm() > 1``) does
  not, and a residual connection (``x + f(x)``) or a branch is not a chain.

What is not a chain is analysed by the generic exact path, with the reason in ``eh.info()``
("discovered_by"). The engine checks that the discovered chain reproduces the head's output before
using it (:func:`headgeom.geometry.engine.analysis_facts.verified_chain`).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.fx as fx
from torch import nn

from ..layers import FUNCTION_RULES, NotAChain, layer_of, rule_for_module


@dataclass(frozen=True)
class Discovery:
    """The head's chain (None: no chain), how it was found ("sequential", "traced", "generic"), and why not."""

    layers: list[nn.Module] | None
    how: str
    reason: str = ""

    def describe(self) -> str:
        """"sequential", "traced" or "generic (<reason>)", as ``eh.info()["discovered_by"]`` reads."""
        return self.how if self.layers is not None else f"generic ({self.reason})"


def discover(module: nn.Module, input_shape: tuple[int, ...] | None = None) -> Discovery:
    """The (unfolded) chain of ``module``: walked if it is an nn.Sequential of ruled layers, else traced."""
    if _is_plain_sequential(module):
        try:
            return Discovery(_with_layers(walk_sequential(module)), "sequential")
        except NotAChain:
            pass  # a child without a rule may still trace into ruled calls
    try:
        return Discovery(_with_layers(trace_chain(module, input_shape)), "traced")
    except NotAChain as e:
        return Discovery(None, "generic", str(e))


def _with_layers(chain: list[nn.Module]) -> list[nn.Module]:
    """The chain, once every module in it has a registered chain layer (else NotAChain says which)."""
    for module in chain:
        layer_of(module)
    return chain


def _is_plain_sequential(module: nn.Module) -> bool:
    return isinstance(module, nn.Sequential) and type(module).forward is nn.Sequential.forward


def walk_sequential(seq: nn.Sequential) -> list[nn.Module]:
    """The chain of an nn.Sequential whose children (nested Sequentials included) all have rules."""
    out: list[nn.Module] = []
    for child in seq:
        if _is_plain_sequential(child):
            out.extend(walk_sequential(child))
            continue
        rule = rule_for_module(child)
        if rule is None:
            raise NotAChain(f"no layer rule for {type(child).__name__}")
        out.extend(rule(child))
    return out


class _InputProxy(fx.Proxy):
    """The head's input while tracing: its shape is the analysed batch's, so shape checks trace."""

    def __init__(self, node: fx.Node, tracer: fx.Tracer, shape: tuple[int, ...]) -> None:
        super().__init__(node, tracer)
        self._known_shape = torch.Size(shape)

    @property
    def shape(self) -> torch.Size:
        return self._known_shape

    @property
    def ndim(self) -> int:
        return len(self._known_shape)

    def size(self, dim: int | None = None):
        return self._known_shape if dim is None else self._known_shape[dim]

    def dim(self) -> int:
        return len(self._known_shape)


class _ChainTracer(fx.Tracer):
    """torch.fx tracing that keeps every module with a layer rule as one call."""

    def __init__(self, input_shape: tuple[int, ...] | None) -> None:
        super().__init__()
        self.input_shape = input_shape
        self._input_seen = False

    def is_leaf_module(self, m: nn.Module, module_qualified_name: str) -> bool:
        return rule_for_module(m) is not None or super().is_leaf_module(m, module_qualified_name)

    def proxy(self, node: fx.Node) -> fx.Proxy:
        if node.op == "placeholder" and not self._input_seen and self.input_shape is not None:
            self._input_seen = True
            return _InputProxy(node, self, self.input_shape)
        return super().proxy(node)


def _concrete_args(module: nn.Module) -> dict:
    """Every forward argument after the first at its default (a head is called as head(z))."""
    params = list(inspect.signature(module.forward).parameters.values())
    if not params:
        raise NotAChain("forward takes no input")
    out = {}
    for p in params[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            raise NotAChain(f"forward needs a second input {p.name!r}")
        out[p.name] = p.default
    return out


def trace_chain(module: nn.Module, input_shape: tuple[int, ...] | None = None) -> list[nn.Module]:
    """The chain of layers ``module.forward`` computes, by torch.fx; raises NotAChain with the reason."""
    tracer = _ChainTracer(input_shape)
    try:
        graph = tracer.trace(module, concrete_args=_concrete_args(module) or None)
    except NotAChain:
        raise
    except fx.proxy.TraceError as e:
        raise NotAChain(f"forward has data-dependent control flow (torch.fx: {str(e).splitlines()[0]})") from None
    except Exception as e:  # user code that cannot run on symbolic values
        first = (str(e).splitlines() or [""])[0]
        raise NotAChain(f"forward cannot be traced by torch.fx ({type(e).__name__}: {first})") from None
    return chain_of_graph(graph, module)


def _resolve(root: nn.Module, arg):
    """A call argument as a value: the head's tensors for get_attr nodes, constants as they are."""
    def one(a):
        if isinstance(a, fx.Node):
            if a.op != "get_attr":
                raise NotAChain(f"{a.name} is not a constant")
            value = root
            for atom in str(a.target).split("."):
                value = getattr(value, atom)
            return value
        return a
    return fx.node.map_aggregate(arg, one)


def _what(node: fx.Node) -> str:
    target = node.target
    if node.op == "call_module":
        return f"module {target}"
    return getattr(target, "__name__", str(target))


def chain_of_graph(graph: fx.Graph, root: nn.Module) -> list[nn.Module]:
    """The chain of a traced forward (see the module docstring for what a chain is)."""
    nodes = list(graph.nodes)
    inputs = [n for n in nodes if n.op == "placeholder"]
    current = inputs[0]
    depends = {current}  # the calls that read the input; the others are constants (fx's checks of defaults)
    layers: list[nn.Module] = []
    for node in nodes:
        if node.op in ("placeholder", "get_attr"):
            continue
        if node.op != "output" and not any(n in depends for n in node.all_input_nodes):
            continue
        depends.add(node)
        if node.op == "output":
            if node.args[0] is not current:
                raise NotAChain("forward does not return the last layer's result alone")
            if len(current.users) != 1:
                raise NotAChain(f"{current.name} is used {len(current.users)} times (a residual connection or a branch)")
            return layers
        values = [n for n in node.all_input_nodes if n.op != "get_attr"]
        if not values:
            raise NotAChain(f"{_what(node)} computes a value that does not depend on the input")
        if len(values) > 1:
            raise NotAChain(f"{_what(node)} combines {', '.join(n.name for n in values)} "
                            "(a residual connection or a branch)")
        if values[0] is not current or not node.args or node.args[0] is not current:
            raise NotAChain(f"{_what(node)} reads {values[0].name}, not the previous layer's result (a branch)")
        if len(current.users) != 1:
            raise NotAChain(f"{current.name} is used {len(current.users)} times (a residual connection or a branch)")
        if node.op == "call_module":
            sub = root.get_submodule(str(node.target))
            rule = rule_for_module(sub)
            if rule is None:
                raise NotAChain(f"no layer rule for {type(sub).__name__} ({node.target})")
            layers.extend(rule(sub))
        else:
            rule = FUNCTION_RULES.get(node.target)
            if rule is None:
                raise NotAChain(f"no layer rule for {_what(node)}")
            layers.extend(rule(_resolve(root, tuple(node.args[1:])), _resolve(root, dict(node.kwargs))))
        current = node
    raise NotAChain("forward returns nothing")

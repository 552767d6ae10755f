"""Element-wise activations y = σ(x): J = diag σ'(x), S = ∇²⟨g, y⟩ = diag(σ''(x) ⊙ g).

σ' and σ'' come from autograd on the activation module itself, so every element-wise module is
exact, including ReLU (σ'' = 0) and thresholded softplus. The activations are those of the one
registry :data:`headgeom.heads.activations.ACTIVATION_REGISTRY` (module type, functions, tensor
methods), shared with the heads; one called as a function is an :class:`Elementwise` module.

A diagonal J and S make every product a scaling: pre diag(σ') costs a pass over pre, and the
interaction term pre diag(c) preᵀ is a weighted Gram (row tiles of the upper triangle,
:mod:`headgeom.geometry.linalg.weighted_gram`).
"""
from __future__ import annotations

import inspect
from typing import Callable

import torch
from torch import Tensor, nn

from headgeom.heads.activations import ACTIVATION_REGISTRY

from ..linalg.weighted_gram import symmetric_bmm, weighted_gram
from ..linalg.workspace import Workspace, work_buffer
from .base import ChainLayer, LayerPass, RowSelection, TailBlocks
from .registry import CHAIN_LAYERS, FUNCTION_RULES, MODULE_RULES, FunctionRule, NotAChain, as_is, call_arguments


class Elementwise(nn.Module):
    """An element-wise activation called as a function: ``fn(x, *args, **kwargs)`` (F.silu, torch.tanh, ...)."""

    def __init__(self, fn: Callable, args: tuple = (), kwargs: dict | None = None) -> None:
        super().__init__()
        self.fn, self.args, self.kwargs = fn, tuple(args), dict(kwargs or {})

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x, *self.args, **self.kwargs)

    def extra_repr(self) -> str:
        return f"{getattr(self.fn, '__name__', self.fn)}, args={self.args}, kwargs={self.kwargs}"


def activation_derivatives(act: nn.Module, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """σ(a), σ'(a), σ''(a) element-wise, from autograd on the module itself."""
    with torch.enable_grad():
        a_ = a.detach().requires_grad_(True)
        y = act(a_)
        (d1,) = torch.autograd.grad(y.sum(), a_, create_graph=True)
        if d1.requires_grad:
            (d2,) = torch.autograd.grad(d1.sum(), a_, allow_unused=True)
        else:
            d2 = None
    d2 = torch.zeros_like(a) if d2 is None else d2.detach()
    return y.detach(), d1.detach(), d2


class ElementwisePass(LayerPass):
    """σ, σ', σ'' on s rows; after :meth:`backward`, c = σ'' ⊙ g (S = diag c)."""

    def __init__(self, y: Tensor, d1: Tensor, d2: Tensor, c: Tensor | None = None) -> None:
        self.y, self.d1, self.d2, self.c = y, d1, d2, c

    def rows(self, sel: RowSelection) -> "ElementwisePass":
        return ElementwisePass(self.y[sel], self.d1[sel], self.d2[sel], None if self.c is None else self.c[sel])

    def backward(self, g: Tensor) -> Tensor:
        self.c = self.d2 * g
        return g * self.d1

    def dense_jacobian(self) -> Tensor:
        return torch.diag_embed(self.d1)

    def dense_second(self) -> Tensor:
        return torch.diag_embed(self.c)

    def pull_jt(self, pre: Tensor) -> Tensor:
        return pre * self.d1[:, None, :]

    def pull_through(self, pre: Tensor, weights: list[Tensor], workspace: Workspace | None = None) -> Tensor:
        if pre.ndim == 2 and len(weights) == 1 and weights[0].numel() <= pre.numel():
            # (W diag σ') A with the shared A: scaling W's columns reads contiguous memory, scaling
            # Aᵀ (strided) was ~1.5x slower at equal sizes; the transposed view is kept for what
            # follows. The scaled W lives in a reused buffer (a fresh chunk-sized tensor per chunk
            # costs its page faults: ~3x the product itself). A W larger than A (the DINO head:
            # 2048² against 384 × 2048) is not scaled: A's copy is the smaller pass. The product goes
            # into a reused buffer too (the caller's passes only read it, within the chunk).
            w = weights[0]
            s, d = self.d1.shape[0], pre.shape[0]
            scaled = work_buffer(workspace, "scaled-weight", s * w.numel(), pre).view(s, *w.shape)
            torch.mul(w, self.d1[:, None, :], out=scaled)
            pulled = work_buffer(workspace, "pulled-jacobian", s * w.shape[0] * d, pre).view(s * w.shape[0], d)
            torch.mm(scaled.view(-1, w.shape[1]), pre.T, out=pulled)  # one GEMM for the chunk: (s·w_out, w) × (w, d)
            return pulled.view(s, w.shape[0], d).transpose(1, 2)
        return super().pull_through(pre, weights, workspace)

    def interaction_into(self, pre: Tensor, out: Tensor, accumulate: bool = False, gram: Tensor | None = None,
                         workspace: Workspace | None = None) -> None:
        if pre.ndim == 2 and not accumulate:  # the shared Jacobian: a weighted Gram
            weighted_gram(pre, self.c, out=out, workspace=workspace)
            return
        if accumulate and not bool((self.c != 0).any()):  # ReLU-like: nothing to add
            return
        if pre.ndim == 2:
            pre = pre.expand(self.c.shape[0], *pre.shape)
        symmetric_bmm(pre * self.c[:, None, :], pre, out, accumulate=accumulate)

    def sandwich(self, k: Tensor) -> Tensor:
        return k * self.d1[:, :, None] * self.d1[:, None, :]

    def middle(self, tail: TailBlocks, with_second: bool, workspace: Workspace | None = None) -> Tensor:
        # D K D (+ diag c) written once into a reused buffer; a declared K is scaled as it is formed
        s, m = self.d1.shape
        mid = tail(self.d1, work_buffer(workspace, "middle", s * m * m, self.d1).view(s, m, m))
        if with_second:
            mid.diagonal(dim1=1, dim2=2).add_(self.c)
        return mid


class ElementwiseLayer(ChainLayer):
    """An element-wise activation module (a registered one or :class:`Elementwise`)."""

    def forward(self, x: Tensor) -> ElementwisePass:
        return ElementwisePass(*activation_derivatives(self.module, x))


def _elementwise_rule(fn: Callable) -> FunctionRule:
    """The rule of an activation function: Elementwise(fn, its constant arguments), ``inplace`` dropped."""
    try:
        names = tuple(list(inspect.signature(fn).parameters)[1:])
    except (TypeError, ValueError):  # a builtin (torch.tanh, F.gelu): arguments kept as given
        names = None

    def rule(args: tuple, kwargs: dict) -> list[nn.Module]:
        if names is not None:
            kwargs = call_arguments(args, kwargs, names, {}, getattr(fn, "__name__", str(fn)))
            args = ()
        kwargs = {k: v for k, v in kwargs.items() if k != "inplace"}
        if any(isinstance(v, Tensor) for v in (*args, *kwargs.values())):
            raise NotAChain(f"{getattr(fn, '__name__', fn)} with a tensor argument (not element-wise)")
        return [Elementwise(fn, args, kwargs)]
    return rule


ELEMENTWISE_TYPES: tuple[type[nn.Module], ...] = (Elementwise,) + tuple(
    a.module for a in ACTIVATION_REGISTRY.values() if a.module is not None)

for _type in ELEMENTWISE_TYPES:
    CHAIN_LAYERS[_type] = ElementwiseLayer
for _act in ACTIVATION_REGISTRY.values():
    if _act.module is not None:
        MODULE_RULES[_act.module] = as_is
    for _fn in _act.functions:
        FUNCTION_RULES[_fn] = _elementwise_rule(_fn)
    for _method in _act.methods:
        FUNCTION_RULES[_method] = _elementwise_rule(getattr(Tensor, _method))


def is_elementwise(layer: nn.Module) -> bool:
    """True for a chain layer that is an element-wise activation (registered module or Elementwise)."""
    return isinstance(layer, ELEMENTWISE_TYPES)

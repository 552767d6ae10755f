"""``nn.Linear`` and ``F.linear``: the affine layer every chain is built around.

A weight-normed Linear (either torch API) is a Linear whose weight is read as g·V/‖V‖
(:func:`effective_weight`). Consecutive affine layers are folded into one Linear holding its
weight as it is at analysis time (:func:`fixed_linear`, :func:`headgeom.geometry.engine.chain.fuse_affine_runs`).
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.weight_norm import WeightNorm

from .base import AffineLayer
from .registry import NotAChain, as_is, call_arguments, chain_layer, function_rule, module_rule


def effective_weight(linear: nn.Linear) -> Tensor:
    """The weight a Linear multiplies by now: g·V/‖V‖ for a weight-normed one.

    With torch.nn.utils.parametrizations.weight_norm ``linear.weight`` is computed on access;
    the older torch.nn.utils.weight_norm stores a tensor refreshed only by a forward pre-hook
    (stale after an update of weight_v or a cast of the module), so it is recomputed here.
    """
    for hook in linear._forward_pre_hooks.values():
        if isinstance(hook, WeightNorm) and hook.name == "weight":
            return hook.compute_weight(linear)
    return linear.weight


def fixed_linear(w: Tensor, b: Tensor | None) -> nn.Linear:
    """An nn.Linear holding ``w`` and ``b`` (detached, frozen) as they are: no random initialisation
    to overwrite (a full pass over W, and a draw from the global random stream), and not
    ``torch.nn.utils.skip_init``, whose meta-device construction imports sympy (about a second on a
    process's first call)."""
    lin = nn.Linear.__new__(nn.Linear)
    nn.Module.__init__(lin)
    lin.in_features, lin.out_features = w.shape[1], w.shape[0]
    lin.weight = nn.Parameter(w.detach(), requires_grad=False)
    lin.register_parameter("bias", None if b is None else nn.Parameter(b.detach(), requires_grad=False))
    return lin


@chain_layer(nn.Linear)
class LinearLayer(AffineLayer):
    """y = x Wᵀ + b, W the effective weight."""

    def affine(self) -> tuple[Tensor, Tensor | None]:
        return effective_weight(self.module), self.module.bias


module_rule(nn.Linear)(as_is)


@function_rule(F.linear)
def _linear_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = call_arguments(args, kwargs, ("weight", "bias"), {"bias": None}, "F.linear")
    w, b = a["weight"], a["bias"]
    if not isinstance(w, Tensor) or w.ndim != 2 or (b is not None and not isinstance(b, Tensor)):
        raise NotAChain("F.linear with a weight that is not a 2-D tensor of the head")
    return [fixed_linear(w, b)]

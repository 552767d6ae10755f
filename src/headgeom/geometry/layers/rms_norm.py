"""``nn.RMSNorm`` (and ``F.rms_norm``) over the features: y = x / r, r = √(|x|²/w + eps), then γ.

The normalisation is the L2 form of :mod:`headgeom.geometry.layers.row_norm` with another scale
(docs/paper.md §1). With ê = x / (r √w) and c = 1/r:

    J = c (I − ê êᵀ),        S = ∇²⟨g, y⟩ = (c²/√w) [ −(g êᵀ + ê gᵀ) − s I + 3 s ê êᵀ ],  s = gᵀê

(from ∂r/∂x = x/(w r), eps included in r), so its state is a
:class:`~headgeom.geometry.layers.row_norm.RowNormPass` with E = ê and ``second_scale`` = 1/√w:
every product is the l2 one's. γ follows as a :class:`~headgeom.geometry.layers.affine.ChannelAffine`
folded into the next Linear. ``eps=None`` is torch's default, the machine epsilon of the input's dtype.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .affine import channel_affine
from .base import ChainLayer
from .registry import NotAChain, as_is, call_arguments, chain_layer, function_rule, module_rule
from .row_norm import RowNormPass


class RMSNormalize(nn.Module):
    """RMSNorm's normalisation of rows, without γ (``eps=None``: the dtype's machine epsilon)."""

    def __init__(self, eps: float | None) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, (x.shape[-1],), eps=self.eps)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"


@chain_layer(RMSNormalize)
class RMSNormLayer(ChainLayer):
    """RMSNorm's normalisation: the l2 form of RowNormPass, scaled."""

    def forward(self, x: Tensor) -> RowNormPass:
        w = x.shape[1]
        eps = torch.finfo(x.dtype).eps if self.module.eps is None else self.module.eps
        inv = torch.rsqrt((x * x).mean(dim=1) + eps)  # c = 1/r
        y = x * inv[:, None]
        return RowNormPass(y=y, c=inv, e=(y / math.sqrt(w))[..., None], second_scale=1.0 / math.sqrt(w))


module_rule(RMSNormalize)(as_is)


def _rms_layers(shape: tuple, weight: Tensor | None, eps: float | None) -> list[nn.Module]:
    if len(shape) != 1:
        raise NotAChain(f"RMSNorm over {len(shape)} trailing dims (the chain normalises each row)")
    return [RMSNormalize(None if eps is None else float(eps)), *channel_affine(weight, None, shape[0])]


@module_rule(nn.RMSNorm)
def _rms_norm(module: nn.RMSNorm) -> list[nn.Module]:
    return _rms_layers(tuple(module.normalized_shape), module.weight, module.eps)


@function_rule(F.rms_norm)
def _rms_norm_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = call_arguments(args, kwargs, ("normalized_shape", "weight", "eps"), {"weight": None, "eps": None},
                       "F.rms_norm")
    shape = a["normalized_shape"]
    return _rms_layers(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), a["weight"], a["eps"])

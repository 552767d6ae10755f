"""The other affine layers: eval-mode ``nn.BatchNorm1d``, a per-channel scale and shift
(:class:`ChannelAffine`: LayerNorm's, GroupNorm's and RMSNorm's γ, β), and the calls that are the
identity in a chain (``nn.Identity``, ``nn.Dropout`` and ``F.dropout`` when not training).

Each is x ↦ x ⊙ scale + shift, folded into its neighbouring Linear by
:func:`headgeom.geometry.engine.chain.fuse_affine_runs`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import AffineLayer, AffinePass
from .registry import NotAChain, as_is, call_arguments, chain_layer, function_rule, module_rule


class ChannelAffine(nn.Module):
    """x ⊙ scale + shift per channel (a norm's γ, β), folded into a neighbouring Linear."""

    def __init__(self, scale: Tensor, shift: Tensor) -> None:
        super().__init__()
        self.scale, self.shift = scale, shift

    def forward(self, x: Tensor) -> Tensor:
        return x * self.scale + self.shift


def channel_affine(weight: Tensor | None, bias: Tensor | None, width: int) -> list[nn.Module]:
    """[ChannelAffine(γ or 1, β or 0)] when a norm has γ or β, else [] (the norms' rules end with it)."""
    if weight is None and bias is None:
        return []
    like = weight if weight is not None else bias
    ones = torch.ones(width, dtype=like.dtype, device=like.device)
    scale = weight.detach() if weight is not None else ones
    shift = bias.detach() if bias is not None else torch.zeros_like(ones)
    return [ChannelAffine(scale, shift)]


class _ScaleShiftLayer(AffineLayer):
    """x ⊙ scale + shift: affine with W = diag(scale)."""

    def scale_shift(self) -> tuple[Tensor, Tensor]:
        raise NotImplementedError

    def affine(self) -> tuple[Tensor, Tensor]:
        scale, shift = self.scale_shift()
        return torch.diag(scale), shift

    def width_out(self, w_in: int) -> int:
        return w_in

    def forward(self, x: Tensor) -> AffinePass:
        scale, shift = self.scale_shift()
        return AffinePass(x * scale + shift, torch.diag(scale))


@chain_layer(ChannelAffine)
class ChannelAffineLayer(_ScaleShiftLayer):
    def scale_shift(self) -> tuple[Tensor, Tensor]:
        return self.module.scale, self.module.shift


def bn_affine(bn: nn.BatchNorm1d) -> tuple[Tensor, Tensor]:
    """Eval-mode BatchNorm as x * scale + shift."""
    scale = torch.rsqrt(bn.running_var + bn.eps)
    shift = -bn.running_mean * scale
    if bn.affine:
        scale, shift = scale * bn.weight, shift * bn.weight + bn.bias
    return scale, shift


@chain_layer(nn.BatchNorm1d)
class BatchNormLayer(_ScaleShiftLayer):
    """Eval-mode BatchNorm1d: its running statistics and γ, β."""

    def scale_shift(self) -> tuple[Tensor, Tensor]:
        return bn_affine(self.module)


module_rule(ChannelAffine)(as_is)


@module_rule(nn.BatchNorm1d)
def _batchnorm(module: nn.BatchNorm1d) -> list[nn.Module]:
    if module.training or module.running_mean is None:
        raise NotAChain("BatchNorm1d in train mode normalises with batch statistics (it couples the samples)")
    return [module]


@module_rule(nn.Identity)
def _identity(module: nn.Identity) -> list[nn.Module]:
    return []


@module_rule(nn.Dropout)
def _dropout(module: nn.Dropout) -> list[nn.Module]:
    if module.training and module.p != 0:
        raise NotAChain("Dropout in train mode is random")
    return []


@function_rule(F.dropout)
def _dropout_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = call_arguments(args, kwargs, ("p", "training", "inplace"), {"p": 0.5, "training": True}, "F.dropout")
    if a["training"] and a["p"] != 0:
        raise NotAChain("F.dropout with training=True is random")
    return []

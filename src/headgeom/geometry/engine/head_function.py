"""Turn a user's head into a pure function z ↦ u for analysis, without ever changing the head.

The head is deep-copied and cast to the analysis dtype; a caller that analyses the same head
across calls passes a :class:`~headgeom.geometry.engine.head_cache.HeadCache`, which hands the copy out
again while the head is unchanged (checked on every call). BatchNorm layers keep the mode they
were given: in eval mode they use their running statistics (a row-wise affine map); in train
mode they use batch statistics (coupling the samples), and the copy stops tracking running
statistics so that no call of the analysis updates anything, in the copy or the original.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import vjp
from torch.nn.utils.weight_norm import WeightNorm

from .head_cache import HeadCache
from .head_facts import HeadFacts

HeadFn = Callable[[Tensor], Tensor]


@dataclass
class PreparedHead:
    """The analysis copy of a head: ``fn`` maps (N, d) to (N, k) in the analysis dtype."""

    fn: HeadFn
    module: nn.Module | None  # the analysis copy when the head is an nn.Module
    train_mode_batchnorm: bool  # some BatchNorm layer normalises with batch statistics
    facts: HeadFacts = field(default_factory=HeadFacts)  # derived from the copy's weights, kept with it


def _batchnorms(module: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def prepare_head(head: nn.Module | HeadFn, dtype: torch.dtype, device: torch.device,
                 cache: HeadCache | None = None) -> PreparedHead:
    """Copy ``head`` for analysis in ``dtype`` on ``device`` (with a ``cache``: reused while the head
    is unchanged); callables are used as given."""
    if not isinstance(head, nn.Module):
        if not callable(head):
            raise TypeError(f"head must be an nn.Module or a callable (N, d) -> (N, k); got {type(head).__name__}")
        return PreparedHead(fn=head, module=None, train_mode_batchnorm=False)
    if cache is None:
        return copy_for_analysis(head, dtype, device)
    return cache.prepared(head, dtype, device, copy_for_analysis)


def copy_for_analysis(head: nn.Module, dtype: torch.dtype, device: torch.device) -> PreparedHead:
    """A fresh analysis copy of ``head``: cast, frozen, train-mode BatchNorm made pure, checked finite."""
    work = copy.deepcopy(head, memo=_weight_norm_memo(head)).to(device=device, dtype=dtype)
    work.requires_grad_(False)
    train_bn = False
    for bn in _batchnorms(work):
        if bn.training:
            train_bn = True
            # batch statistics, and nothing to update: forward and backward stay pure
            bn.track_running_stats = False
            bn.running_mean = None
            bn.running_var = None
            bn.num_batches_tracked = None
    for name, tensor in list(work.named_parameters()) + list(work.named_buffers()):
        if tensor.is_floating_point() and (bad := non_finite_count(tensor)):
            raise ValueError(
                f"head tensor {name!r} has {bad} non-finite entries (NaN or Inf); "
                "the geometry of such a head is undefined: check the checkpoint or training run"
            )
    return PreparedHead(fn=work, module=work, train_mode_batchnorm=train_bn)


def non_finite_count(t: Tensor) -> int:
    """The number of NaN/Inf entries of a floating tensor. A finite sum has none (either would
    propagate into it), so a finite tensor is read once, without a mask; only a non-finite sum (a
    bad entry, or an overflow of finite ones) counts them."""
    if t.numel() == 0 or bool(torch.isfinite(t.sum())):
        return 0
    return int((~torch.isfinite(t)).sum())


def _weight_norm_memo(head: nn.Module) -> dict[int, Tensor]:
    """deepcopy memo for torch.nn.utils.weight_norm layers: their ``weight`` is a non-leaf tensor
    that deepcopy refuses; the copy gets a detached one, and its forward pre-hook recomputes
    g·V/‖V‖ from the copied (and cast) weight_g, weight_v on every call."""
    memo: dict[int, Tensor] = {}
    for module in head.modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm):
                weight = getattr(module, hook.name, None)
                if isinstance(weight, Tensor) and not weight.is_leaf:
                    memo[id(weight)] = weight.detach().clone()
    return memo


def is_row_wise(fn: HeadFn, z: Tensor) -> bool:
    """True when output row i depends on input row i alone (probed by one exact vjp).

    A cotangent on row 0 must pull back to zero on every other row; for a row-wise head this
    is exact (0.0), for a batch-coupled one (train-mode BatchNorm, attention across the batch)
    it is generically non-zero.
    """
    if z.shape[0] < 2:
        return True
    u, pullback = vjp(fn, z)
    cot = torch.zeros_like(u)
    cot[0] = torch.linspace(1.0, 2.0, u.shape[1], dtype=u.dtype, device=u.device)
    (gz,) = pullback(cot)
    return bool((gz[1:] == 0).all())

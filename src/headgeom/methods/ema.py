"""EMA target / teacher networks (BYOL, DINO) and their momentum schedule (docs/paper.md §1).

The schedule and the update are pure functions; :class:`EMATarget` is the small stateful
module that holds the target copy, so its parameters and buffers live in the method's
``state_dict`` and a checkpoint resumes exactly.

- BYOL (Grill et al. 2020, §3.2): τ_k = 1 − (1 − τ_base)(cos(πk/K) + 1)/2, τ_base = 0.996.
- DINO (Caron et al. 2021, main_dino.py ``cosine_scheduler(momentum_teacher, 1, ...)``): the
  same cosine from 0.996 to 1, indexed by the global iteration ``it`` (0-based).

Update: θ_target ← τ θ_target + (1 − τ) θ_online for every parameter. Buffers (BatchNorm
running statistics) are the target's own, updated by its own train-mode forward, as in the
official BYOL (haiku state) and DINO (teacher forward in train mode) code.
"""
from __future__ import annotations

import copy
import math
from typing import Iterable

import torch
from torch import Tensor, nn


def cosine_momentum(step: int, total_steps: int, base: float = 0.996, final: float = 1.0) -> float:
    """τ(step) = final − (final − base)(cos(π · step / total_steps) + 1)/2.

    ``step`` is the 0-based index of the optimiser step just taken (clamped to
    [0, total_steps]); τ(0) = base and τ(total_steps) = final.
    """
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be a positive int (the run's optimiser steps); got {total_steps!r}")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0 (0-based optimiser step); got {step!r}")
    for name, value in (("base", base), ("final", final)):
        if not (0.0 <= value <= 1.0):
            raise ValueError(f"EMA momentum {name} must lie in [0, 1]; got {value!r}")
    k = min(step, total_steps)
    return final - (final - base) * (math.cos(math.pi * k / total_steps) + 1.0) / 2.0


@torch.no_grad()
def ema_update_(target: Iterable[Tensor], online: Iterable[Tensor], momentum: float) -> None:
    """In place: t ← momentum · t + (1 − momentum) · o for paired tensors (one fused foreach op)."""
    t_list, o_list = list(target), list(online)
    if len(t_list) != len(o_list):
        raise ValueError(
            f"EMA target and online networks must have the same parameters; got {len(t_list)} "
            f"target and {len(o_list)} online tensors"
        )
    for i, (t, o) in enumerate(zip(t_list, o_list)):
        if t.shape != o.shape:
            raise ValueError(f"EMA parameter {i} has target shape {tuple(t.shape)} but online {tuple(o.shape)}")
    if not (0.0 <= momentum <= 1.0):
        raise ValueError(f"EMA momentum must lie in [0, 1]; got {momentum!r}")
    if t_list:
        torch._foreach_lerp_(t_list, o_list, 1.0 - momentum)  # t + (1-m)(o - t)


class EMATarget(nn.Module):
    """A frozen copy of ``online`` (a backbone and head, say) updated by :func:`ema_update_`.

    ``forward`` runs the copy without gradient. Its parameters never require grad, so they
    are absent from the optimiser; they are in ``state_dict`` (key prefix ``module.``).
    """

    def __init__(self, online: nn.Module) -> None:
        super().__init__()
        self.module = copy.deepcopy(online)
        self.module.requires_grad_(False)

    @torch.no_grad()
    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @torch.no_grad()
    def update_(self, online: nn.Module, momentum: float) -> None:
        """θ_target ← momentum · θ_target + (1 − momentum) · θ_online (parameters only)."""
        ema_update_(self.module.parameters(), online.parameters(), momentum)

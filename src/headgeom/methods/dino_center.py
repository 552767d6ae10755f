"""DINO's state beside the loss: the output centre and the teacher-temperature warm-up.

Caron et al. 2021, facebookresearch/dino main_dino.py ``DINOLoss``:

- centre update (``update_center``): c ← m c + (1 − m) · mean of the teacher outputs over
  every global view and sample of the batch (all-reduced over processes), m = 0.9;
- teacher temperature (``teacher_temp_schedule``): ``linspace(warmup_teacher_temp,
  teacher_temp, W)`` (0.04 to 0.07 in the README's ViT-S runs) for the W warm-up steps,
  then constant. The official schedule is per epoch; here it is per optimiser step.

The loss itself is the pure :func:`headgeom.objectives.dino`; house style rule 1.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn


def center_update(center: Tensor, batch_mean: Tensor, momentum: float) -> Tensor:
    """m · c + (1 − m) · batch_mean; center and batch_mean (1, K) -> (1, K)."""
    if not (0.0 <= momentum <= 1.0):
        raise ValueError(f"DINO center momentum must lie in [0, 1]; got {momentum!r}")
    return center * momentum + batch_mean * (1.0 - momentum)


def teacher_temperature(step: int, warmup_steps: int, start: float = 0.04, final: float = 0.07) -> float:
    """Teacher temperature at 0-based ``step``, as DINO's schedule
    ``concatenate((linspace(start, final, W), ones(...) * final))[step]`` with W = warmup_steps:
    start + (final − start) · step / (W − 1) for step < W, then ``final``."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0; got {step!r}")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0; got {warmup_steps!r}")
    if not (start > 0 and final > 0):
        raise ValueError(f"teacher temperatures must be > 0; got start={start!r}, final={final!r}")
    if step >= warmup_steps:
        return float(final)
    if warmup_steps == 1:
        return float(start)
    return float(start + (final - start) * step / (warmup_steps - 1))


class DINOCenter(nn.Module):
    """The running centre c (1, K) as a buffer, so it is part of ``state_dict``."""

    def __init__(self, out_dim: int, momentum: float = 0.9) -> None:
        super().__init__()
        if not (0.0 <= momentum <= 1.0):
            raise ValueError(f"DINO center momentum must lie in [0, 1]; got {momentum!r}")
        self.momentum = float(momentum)
        self.register_buffer("center", torch.zeros(1, out_dim))

    @staticmethod
    @torch.no_grad()
    def batch_sum(teacher_outputs: list[Tensor]) -> tuple[Tensor, Tensor]:
        """(sum over all global views and samples (1, K), their count) on this process."""
        cat = torch.cat([t.detach() for t in teacher_outputs], dim=0)
        if cat.dtype in (torch.float16, torch.bfloat16):
            cat = cat.float()
        count = torch.tensor(float(cat.shape[0]), device=cat.device, dtype=cat.dtype)
        return cat.sum(dim=0, keepdim=True), count

    @staticmethod
    @torch.no_grad()
    def reduce_mean(total: Tensor, count: Tensor) -> Tensor:
        """total / count, both summed over processes under DDP (DINO's all_reduce). Called
        from ``on_step_end``, which every process runs, never from forward: a forward on one
        process only (a probe batch) must not wait on a collective."""
        if dist.is_available() and dist.is_initialized():
            total, count = total.clone(), count.clone()
            dist.all_reduce(total)
            dist.all_reduce(count)
        return total / count

    @staticmethod
    def batch_mean(teacher_outputs: list[Tensor]) -> Tensor:
        """Mean over all global views and samples, (1, K), averaged over processes under DDP."""
        return DINOCenter.reduce_mean(*DINOCenter.batch_sum(teacher_outputs))

    @torch.no_grad()
    def update_(self, batch_mean: Tensor) -> None:
        """c ← m c + (1 − m) batch_mean, in place."""
        self.center.copy_(center_update(self.center, batch_mean.to(self.center.dtype), self.momentum))

    def extra_repr(self) -> str:
        return f"out_dim={self.center.shape[1]}, momentum={self.momentum}"

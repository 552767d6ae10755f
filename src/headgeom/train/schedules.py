"""Learning-rate and momentum schedules as pure functions of the step (house rule 10, docs/design.md#house-rules).

Steps count optimizer updates from 0. Linear warm-up then half-cosine decay is the schedule
of the SimCLR/BYOL/VICReg/Barlow Twins/DINO releases (docs/paper.md §3, §4); ``constant`` keeps the
warm-up and then holds the base rate.
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "cosine_value", "lr_at", "warmup_cosine"]

SCHEDULES = ("cosine", "constant")


def warmup_cosine(step: int, total_steps: int, base: float, warmup_steps: int = 0,
                  final: float = 0.0) -> float:
    """Rate at ``step``: ``base·(step+1)/warmup_steps`` during warm-up, then
    ``final + (base - final)·(1 + cos(π·t))/2`` with ``t = (step - warmup)/(total - warmup)``.

    The warm-up reaches ``base`` on its last step (so the first update uses a non-zero rate,
    unlike ``base·step/warmup`` which wastes step 0); past ``total_steps`` the rate stays at ``final``.
    """
    _check(step, total_steps, warmup_steps)
    if step < warmup_steps:
        return base * (step + 1) / warmup_steps
    span = total_steps - warmup_steps
    if span <= 0:
        return base
    t = min(1.0, (step - warmup_steps) / span)
    return final + (base - final) * 0.5 * (1.0 + math.cos(math.pi * t))


def cosine_value(step: int, total_steps: int, start: float, end: float) -> float:
    """Cosine ramp from ``start`` (step 0) to ``end`` (step ``total_steps``), e.g. the BYOL/DINO
    EMA momentum ``1 - (1 - m0)·(cos(π k/K) + 1)/2``; clamped at ``end`` beyond the total."""
    _check(step, total_steps, 0)
    t = min(1.0, step / total_steps) if total_steps > 0 else 1.0
    return end - (end - start) * 0.5 * (1.0 + math.cos(math.pi * t))


def lr_at(schedule: str, step: int, total_steps: int, base: float, warmup_steps: int = 0,
          final: float = 0.0) -> float:
    """Rate at ``step`` for the named schedule (``cosine`` or ``constant``, both with warm-up)."""
    if schedule == "cosine":
        return warmup_cosine(step, total_steps, base, warmup_steps, final)
    if schedule == "constant":
        _check(step, total_steps, warmup_steps)
        return base * (step + 1) / warmup_steps if step < warmup_steps else base
    raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")


def _check(step: int, total_steps: int, warmup_steps: int) -> None:
    if step < 0 or total_steps < 0 or warmup_steps < 0:
        raise ValueError(f"step, total_steps and warmup_steps must be >= 0, got step={step}, "
                         f"total_steps={total_steps}, warmup_steps={warmup_steps}")

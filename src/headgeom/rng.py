"""Randomness without side effects: library code draws from a generator it is given or seeds locally.

Only the run layer seeds torch's global generator for a run (a training run, ``train/setup.py``; an
experiment cell, ``experiments/``): a library function that needs randomness takes a
``torch.Generator`` (or a seed it turns into one), and one that must build modules, whose
``reset_parameters`` draw from the global generator (``nn.Linear``'s init), builds them inside
:func:`seeded`, so the caller's random stream is the same after the call as before it.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch

__all__ = ["own_generator", "seeded"]


def own_generator(generator: torch.Generator | None, seed: int = 0) -> torch.Generator:
    """``generator``, or a fresh CPU generator seeded with ``seed`` when it is None: a library function
    with an optional generator never draws from torch's global one."""
    if generator is None:
        return torch.Generator().manual_seed(seed)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None; got {type(generator).__name__}")
    return generator


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Inside: torch's global CPU generator (and, where CUDA is initialised, every CUDA device's) seeded
    with ``seed``, as ``torch.manual_seed(seed)`` would; on exit: every one back to its state before.

    A module built inside draws the numbers it would draw after ``torch.manual_seed(seed)`` (so results
    seeded that way do not change). CUDA generators are seeded only when CUDA is initialised already:
    ``torch.manual_seed`` would queue the seeding of a CUDA not yet initialised for later, outside.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {seed!r}")
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    devices = list(range(torch.cuda.device_count())) if cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.default_generator.manual_seed(seed)
        if cuda:
            torch.cuda.manual_seed_all(seed)
        yield

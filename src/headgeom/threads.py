"""Intra-op thread count for a block of work, restored afterwards.

Many small tensor ops (augmentations, orbit metrics, experiment cells on tiny matrices) pay an
OpenMP barrier per op with several threads, which on a busy machine costs far more than the op
(measured on the shared 2-core box: D_inter bootstrap replicates 0.55 s CPU with 2 threads,
0.012 s with 1; rotating 2520 32-px images 1.2-9.9 s with 2 threads, 0.37 s with 1). Large
matmuls and convolutions keep torch's setting.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` intra-op threads (None: unchanged); the setting is restored."""
    if n is None:
        yield
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"thread counts must be a positive int or None, got {n!r}")
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)

"""The machine's float64 GEMM rate (GFLOP/s): the physical limit the engine's benchmarks and the README's
cost rows are read against. One home, imported by the benchmark scripts and run by tools/costs.py."""
from __future__ import annotations

import time
from typing import Callable

import torch


def matmul_rate(size: int = 2048, repeats: int = 3, clock: Callable[[], float] = time.perf_counter,
                best: bool = False) -> float:
    """GFLOP/s of a warm float64 ``size`` x ``size`` product, timed by ``clock`` (wall by default;
    time.process_time for CPU): the mean over ``repeats`` products, or the fastest one with ``best``."""
    a = torch.randn(size, size, dtype=torch.float64)
    a @ a  # warm: the first product pays the threads' start
    times = []
    for _ in range(repeats):
        t = clock()
        a @ a
        times.append(clock() - t)
    seconds = min(times) if best else sum(times) / repeats
    return 2.0 * size**3 / seconds / 1e9

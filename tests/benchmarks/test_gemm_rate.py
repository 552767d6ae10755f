"""benchmarks/gemm_rate.py: FLOPs of a float64 product over the time its clock gave (no real timing)."""
import itertools

import pytest


def test_the_rate_is_the_products_flops_over_the_mean_or_the_fastest_time(benchmark_script):
    def clock_of(durations):  # a start and an end reading per timed product
        ticks = itertools.accumulate(x for d in durations for x in (0.0, d))
        return lambda: next(ticks)

    rate = benchmark_script("gemm_rate").matmul_rate
    flop = 2.0 * 16**3
    assert rate(16, 2, clock=clock_of([1.0, 2.0])) == pytest.approx(flop / 1.5 / 1e9)
    assert rate(16, 2, clock=clock_of([1.0, 2.0]), best=True) == pytest.approx(flop / 1.0 / 1e9)

"""benchmarks/bench_fixed_cost.py: its worker's engine blocks equal the naive torch.func.hessian
loop it is timed against, on a tiny head (no timings checked)."""
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("bench_fixed_cost")


def test_worker_blocks_equal_the_naive_baseline(script):
    out = script.worker(scale=32, reps=1)  # widths 16 → 64, 64 → 16 → 64
    assert sorted(out["N"]) == sorted(str(n) for n in script.NS)
    for n, row in out["N"].items():
        assert row["max_rel_error_vs_naive"] < 1e-12, (n, row)
        assert row["call_s"] > 0 and row["naive_s"] > 0

"""benchmarks/bench_blocks_ab.py: its worker's engine blocks equal the naive torch.func.hessian
loop it is timed against, on tiny heads of every case (no timings checked)."""
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("bench_blocks_ab")


@pytest.mark.parametrize("case", ["simsiam", "simsiam-plain", "dino", "dino-mlp"])
def test_worker_blocks_equal_the_naive_baseline(script, case):
    out = script.worker(case, scale=64, n=3, reps=1, naive_samples=2)  # widths 6 → 32 … (dino: 65536/64 = 1024 out)
    assert out["max_rel_error_vs_naive"] < 1e-12, out
    assert out["call_s"] > 0 and out["naive_per_sample_s"] > 0
    # the DINO loss on the MLP head takes the Jacobian path (its m = k: the diagonal costs k·m² there)
    assert out["path"].startswith("jacobian" if case == "dino-mlp" else "sandwich"), out["path"]

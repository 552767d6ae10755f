"""benchmarks/bench_first_call.py at toy size: a worker process times the first, fresh-head and warm
calls and reports that the first call imported neither torch._dynamo nor sympy (no timings checked)."""
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("bench_first_call")


def test_one_worker_round_end_to_end(script, tmp_path):
    args = script.argparse.Namespace(n=3, scale=64, reps=1, profile=False, torch_func=False)
    res = script.run_worker(script.REPO / "src", args)  # a fresh process, widths 8 → 32 → 32, 32 → 8 → 32
    assert res["first_call_imported"] == []
    for key in ("first_s", "fresh_s", "warm_s", "per_head_gemms_s", "torch_warmup_s", "import_s"):
        assert res[key] > 0, key
    assert res["floor_over_warm"] > 1 and res["first_over_warm"] == res["first_s"] / res["warm_s"]

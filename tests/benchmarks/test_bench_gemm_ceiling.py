"""benchmarks/bench_gemm_ceiling.py: it records the engine's matrix products as they were made and
replays exactly those (operation, shapes, strides), with FLOPs by a formula written here; no timings
are checked."""
import pytest
import torch

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("bench_gemm_ceiling")


def flops(m, k, n, batch=1):
    return 2.0 * batch * m * k * n


def test_flops_of_each_product_form(script):
    assert script.product_flops("mm", [(3, 4), (4, 5)]) == flops(3, 4, 5)
    assert script.product_flops("bmm", [(2, 3, 4), (2, 4, 5)]) == flops(3, 4, 5, batch=2)
    assert script.product_flops("addmm", [(5,), (3, 4), (4, 5)]) == flops(3, 4, 5)
    assert script.product_flops("baddbmm_", [(2, 3, 5), (2, 3, 4), (2, 4, 5)]) == flops(3, 4, 5, batch=2)


def test_the_replay_makes_the_recorded_products_again(script):
    a, b = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    batch = torch.randn(2, 3, 4, dtype=torch.float64)
    out = torch.empty(2, 3, 5, dtype=torch.float64)
    with script.ProductRecorder() as first:
        a @ b.T  # a transposed operand
        torch.bmm(batch, b.T.expand(2, 4, 5), out=out)  # an expanded one, into an out tensor
        torch.addmm(torch.zeros(5, dtype=torch.float64), a, b.T)
        a + 1.0  # not a product: not recorded
    assert [f.overloadpacket.__name__ for f, *_ in first.calls] == ["mm", "bmm", "addmm"]
    assert first.calls[0][1] == [((3, 4), (4, 1)), ((4, 5), (1, 4))]
    assert first.calls[1][1][1] == ((2, 4, 5), (0, 1, 4)) and first.calls[1][2] == ((2, 3, 5), (15, 5, 1))
    with script.ProductRecorder() as again:
        groups = {}
        seconds = script.replay(first.calls, groups)
    # each product twice (the faster run is kept), with the same operation, shapes and strides
    assert [(f, t, o) for f, t, o, _ in again.calls] == [(f, t, o) for f, t, o, _ in first.calls for _ in range(2)]
    assert seconds > 0 and sum(v[1] for v in groups.values()) == flops(3, 4, 5) * 4


def test_a_tiny_run_records_the_engines_products(script):
    res = script.run("simsiam", n=3, rounds=1, scale=64)
    assert res["products"] > 0 and res["recorded_gflop"] > 0 and res["counted_gflop"] > 0
    assert len(res["engine_s"]) == len(res["products_alone_s"]) == 1

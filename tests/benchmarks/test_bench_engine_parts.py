"""benchmarks/bench_engine_parts.py at toy size: it times every part, leaves the Workspace as it was,
and the blocks through fresh buffers equal those through the reused ones (no timings checked)."""
import pytest
import torch

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.geometry.linalg.workspace import Workspace

pytestmark = pytest.mark.usefixtures("one_thread")


def test_parts_at_toy_size(benchmark_script):
    script = benchmark_script("bench_engine_parts")
    lease = Workspace.lease
    out = script.run(n=4, scale=64, rounds=1)
    assert Workspace.lease is lease
    assert set(out["cpu_s"]) == {"call", "call, fresh buffers", "first term, chunks of 32", "first term, all at once",
                                 "G + M into a fresh tensor"}
    head, loss, _, z = script.problem("simsiam", 64, 5)
    cache = HeadCache()
    reused = [effective_hessian(head, loss, z, cache=cache).blocks() for _ in range(2)]
    with script.fresh_buffers():
        fresh = effective_hessian(head, loss, z, cache=cache).blocks()
    assert torch.equal(reused[0], reused[1]) and torch.equal(reused[1], fresh)

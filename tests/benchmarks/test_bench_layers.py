"""benchmarks/bench_layers.py at toy size: every layer kind's head takes the structured path (the
generic callable does not), and both give the naive loop's blocks (no timings checked)."""
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_kind_is_structured_and_exact_at_toy_size(benchmark_script):
    out = benchmark_script("bench_layers").run(widths=(6, 32, 4), n=3, rounds=1, reps=1, generic=True)
    assert set(out["kinds"]) == {"silu", "layernorm", "groupnorm", "glu", "rmsnorm"}
    for kind, res in out["kinds"].items():
        assert res["structured"]["discovered_by"] == "sequential", kind
        assert res["generic"]["discovered_by"] == "generic (a callable, not an nn.Module)", kind
        for label in ("structured", "generic"):
            assert res[label]["max_rel_error_vs_naive"] < 1e-12, (kind, label, res[label])
            assert len(res[label]["per_round_ratio"]) == 1

"""benchmarks/bench_user_heads.py at toy size: every user-written head takes the structured path and
the own-forward heads' blocks equal their nn.Sequential's (no timings checked)."""
import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_user_heads_take_the_structured_path_at_toy_size(benchmark_script):
    out = benchmark_script("bench_user_heads").run(scale=64, n=3, dino_n=3, rounds=1, generic=True)
    for label in ("own-forward", "two-layer"):
        pair = out["pairs"][label]
        assert pair["rows"]["own forward"]["discovered_by"] == "traced"
        assert pair["rows"]["nn.Sequential"]["discovered_by"] == "sequential"
        assert pair["max_abs_difference_of_blocks"] < 1e-12
        before = pair["generic path (before) / own forward"]["rows"]["generic path (before)"]
        assert before["discovered_by"] == "generic (a callable, not an nn.Module)"
    dino = out["pairs"]["dino-layout"]
    assert dino["rows"]["official DINO layout"]["discovered_by"] == "traced"
    assert dino["rows"]["official DINO layout"]["block_path"].startswith("sandwich")
    assert len(dino["per_round_ratio"]) == 1

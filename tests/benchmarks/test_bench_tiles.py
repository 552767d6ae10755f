"""benchmarks/bench_tiles.py at toy shapes: every tile size is timed in every round and agrees with
the reference product; the per-round ratios are what the summary reports. No timings are asserted."""
import json

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("bench_tiles")


def test_summary_takes_the_median_of_per_round_ratios(bench):
    s = bench.summary({"a": [1.0, 4.0, 2.0], "ref": [2.0, 2.0, 2.0]}, "ref")
    assert s["a"]["ratio_to_ref"] == 1.0 and s["a"]["median_s"] == 2.0 and s["ref"]["ratio_to_ref"] == 1.0


def test_tiny_run(bench, tmp_path):
    out = tmp_path / "tiles.json"
    bench.main(["--tiny", "--rounds", "2", "--threads", "1", "--json", str(out)])
    r = json.loads(out.read_text())
    (gram,), (sym,) = r["weighted_gram"], r["symmetric_bmm"]
    assert set(gram["tiles"]) == {f"tile {t}" for t in bench.GRAM_TILES}
    assert set(sym["tiles"]) == {"full"} | {f"tile {t}" for t in bench.SYM_TILES}
    assert all(len(v["seconds"]) == 2 for v in [*gram["tiles"].values(), *sym["tiles"].values()])
    assert gram["max_rel_difference"] < 1e-12 and sym["max_rel_difference"] < 1e-12
    assert len(r["load_average_start_end"]) == 2

"""benchmarks/bench_analyze.py end to end at toy size (--tiny: tiny widths, `shapes` images, three
steps of two families): every model's synthetic official-layout file is detected as its release and
analysed with the tangent stage, and the JSON holds per-run seconds, loads and the ratios of the
same run; the order alternates across repeats and ratios pair runs of one repeat. No timings are
asserted."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_analyze.py"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("bench_analyze")


def test_order_alternates(bench):
    names = ["a", "b", "c"]
    assert bench.run_order(names, 0) == names and bench.run_order(names, 1) == names[::-1]
    assert bench.run_order(names, 2) == names


def test_ratios_pair_runs_of_the_same_repeat(bench):
    runs = {"dino_vit_s16": [{"wall_s": 6.0, "cpu_s": 4.0}, {"wall_s": 9.0, "cpu_s": 3.0}],
            "simsiam_resnet50": [{"wall_s": 3.0, "cpu_s": 8.0}, {"wall_s": 2.0, "cpu_s": 6.0}]}
    r = bench.ratios(runs)["dino_vit_s16/simsiam_resnet50"]
    assert r["wall"] == [2.0, 4.5] and r["cpu"] == [0.5, 0.5] and r["median_wall"] == 3.25


def test_tiny_run_end_to_end(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--images", "2",
                           "--repeats", "1", "--models", "dino_vit_s16,simsiam_resnet50",
                           "--profile", "--workdir", str(tmp_path / "work"), "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(out.read_text())
    assert set(res["models"]) == {"dino_vit_s16", "simsiam_resnet50"} and res["tiny"] and res["data"] == "shapes"
    assert "load average" in res["machine"]
    for name, model in res["models"].items():
        assert len(model["runs"]) == 1
        for run in model["runs"]:
            assert run["release"] == model["expected_release"], (name, run["release"])
            assert run["tangent_skipped"] is None and run["tangent_images"] == 2
            assert run["families"] == ["rotation_45", "hue"]
            assert {"load", "orbits_rotation_45", "orbits_hue", "tangent_metric", "total"} <= set(run["seconds"])
            assert run["wall_s"] > 0 and run["cpu_s"] > 0 and run["wall_s_per_image"] == pytest.approx(
                run["wall_s"] / 2, abs=0.01)
            assert run["load_before"] and run["load_after"]
            prof = run["profile_s"]  # cProfile's cumulative seconds of the stage functions
            assert prof["tangent_metric_analysis"] > prof["tangent: I_h(z) = J_h^T J_h"] > 0
            assert prof["extract_orbits (augment + backbone + head)"] > 0
    assert res["models"]["dino_vit_s16"]["runs"][0]["backbone"] == "vit"
    assert res["models"]["simsiam_resnet50"]["runs"][0]["backbone"] == "resnet50"
    ratio = res["ratios"]["dino_vit_s16/simsiam_resnet50"]
    assert len(ratio["wall"]) == 1 and ratio["median_wall"] > 0 and ratio["median_cpu"] > 0

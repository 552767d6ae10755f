"""benchmarks/bench_train.py: the bare loop trains the same model on the same views with the same
loss as headgeom's SimCLR, both loops run (2 steps, tiny width, shapes) and images/s comes out of
the forward stamps as S · B / (stamp[W+S] - stamp[W]) (checked with a fake clock). No timings."""
import math

import pytest
import torch

from headgeom.data import dataset_stats, load_dataset
from headgeom.methods import build_method
from headgeom.objectives import nt_xent

pytestmark = pytest.mark.usefixtures("one_thread")

WIDTH, B = 0.0625, 8


@pytest.fixture(scope="module")
def bench(benchmark_script):
    return benchmark_script("bench_train")


@pytest.fixture(scope="module")
def shapes():
    return load_dataset("shapes", "train", n=32)


class FakeClock:
    """Returns 0, 0.5, 1.0, ... on successive calls."""

    def __init__(self, tick: float = 0.5) -> None:
        self.t, self.tick = -tick, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


def test_cross_entropy_nt_xent_equals_headgeom_nt_xent(bench):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(6, 5, generator=g, dtype=torch.float64), torch.randn(6, 5, generator=g, dtype=torch.float64)
    torch.testing.assert_close(bench.nt_xent_ce(a, b, 0.5), nt_xent(a, b, 0.5), rtol=1e-12, atol=1e-12)


def test_bare_model_and_views_are_headgeoms(bench, shapes):
    torch.manual_seed(3)
    bare = bench.BareSimCLR(WIDTH)
    torch.manual_seed(3)
    method = build_method("simclr", backbone="resnet18", backbone_options={"width": WIDTH})
    ours, theirs = bare.state_dict(), method.state_dict()
    assert ours.keys() == theirs.keys()
    for k in ours:
        torch.testing.assert_close(ours[k], theirs[k], rtol=0, atol=0)
    stats = dataset_stats("shapes", shapes)
    recipe = method.recipe(32, mean=tuple(stats.mean), std=tuple(stats.std))
    x = shapes.images[:B].float().div_(255)
    want = recipe(x, torch.Generator().manual_seed(5))
    view, gen = bench.bare_view(32, tuple(stats.mean), tuple(stats.std)), torch.Generator().manual_seed(5)
    got = [view(x, gen), view(x, gen)]
    for v, w in zip(got, want):
        torch.testing.assert_close(v, w, rtol=0, atol=0)


def test_throughput_from_stamps(bench):
    stamps = [0.0, 3.0, 4.0, 6.0, 7.0]
    assert bench.throughput(stamps, warmup=1, steps=3, batch=10) == pytest.approx(3 * 10 / (7.0 - 3.0))
    with pytest.raises(ValueError, match="need 5 forward stamps"):
        bench.throughput(stamps[:4], warmup=1, steps=3, batch=10)
    assert bench.amortised(call_s=2.0, step_s=0.5, period=4) == pytest.approx(2.0 / (4 * 0.5 + 2.0))


def test_run_order_puts_each_loop_first_equally_often_over_two_repeats(bench):
    kinds = ["bare", "headgeom", "tracking"]
    assert bench.run_order(kinds, 0) == kinds and bench.run_order(kinds, 3) == kinds[::-1]
    before = [o.index("bare") < o.index("headgeom") for o in (bench.run_order(kinds, r) for r in range(4))]
    assert before.count(True) == before.count(False) == 2


def test_bare_loop_runs_and_counts_images_per_s_from_its_clock(bench, shapes):
    stats = dataset_stats("shapes", shapes)
    res = bench.bare_loop(shapes.images, tuple(stats.mean), tuple(stats.std), WIDTH, B, steps=2, warmup=1,
                          clock=FakeClock(0.5))
    assert len(res["losses"]) == 4 and all(math.isfinite(v) for v in res["losses"])
    assert res["stamps"] == [0.0, 0.5, 1.0, 1.5]
    assert res["images_per_s"] == pytest.approx(2 * B / 1.0)


def test_headgeom_loop_runs_and_stamps_only_training_forwards(bench, tmp_path):
    config = bench.train_config(WIDTH, "shapes", None, {"n": 32}, B, steps=2, warmup=1, n_train=32)
    assert config.max_steps == 4 and config.epochs == 1 and config.device == "cpu"
    res = bench.headgeom_loop(config, tmp_path / "plain", warmup=1, steps=2, clock=FakeClock(0.5))
    assert res["stamps"] == [0.0, 0.5, 1.0, 1.5]
    assert res["images_per_s"] == pytest.approx(2 * B / 1.0)
    assert math.isfinite(res["final_loss"]) and res["track_seconds"] == []

    def tracker(step, method, views):  # a forward under no_grad, as GeometryTracker's
        with torch.no_grad():
            method(views)
        return {"probe_loss_seen": 1.0}

    tracked = bench.train_config(WIDTH, "shapes", None, {"n": 32}, B, 2, 1, 32, track_every=2)
    res = bench.headgeom_loop(tracked, tmp_path / "tracked", 1, 2, tracker=tracker)
    assert len(res["stamps"]) == 4  # the tracker's forwards are not training iterations
    assert len(res["track_seconds"]) == 3  # steps 0, 2 and 4

"""The training bar names a tracking call while it runs and leaves its time out of the bar's
clock (headgeom.train.progress). The clock of tqdm and of headgeom.train.progress is a fake one
that only the test moves: each optimisation step (a forward pass of the method) moves it STEP
seconds and each tracking call JUMP seconds, so what the bar shows does not depend on how fast or
loaded the machine is."""
from __future__ import annotations

import types

import pytest
import tqdm
import tqdm.std

from headgeom.train import TrainConfig, train
from headgeom.train.loop import build_method_from_config
from headgeom.train.progress import paused

STEP = 1.0  # seconds of one optimisation step on the bar's clock
JUMP = 1000.0  # seconds of one tracking call on the bar's clock
TINY = TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": 0.125}, head="d-32-16",
                   data="shapes", data_options={"n": 32, "size": 16}, batch_size=8, max_steps=4,
                   track_every=2, probe_size=8, device="cpu", progress=True)


class FakeClock:
    """time.time() for tqdm and headgeom.train.progress: stands still until ``advance``."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(tqdm.std, "time", fake)  # tqdm's clock (tqdm.std does `from time import time`)
    monkeypatch.setattr("headgeom.train.progress.time", types.SimpleNamespace(time=fake))
    return fake


class RecordingBar(tqdm.tqdm):
    """tqdm that keeps its numbers at close (the loop closes its bar before returning), without
    tqdm's monitor thread (which wakes on the real clock)."""

    monitor_interval = 0
    closed: list[dict] = []

    def close(self):
        if not self.disable:
            RecordingBar.closed.append(dict(self.format_dict))
        super().close()


def test_the_bar_names_tracking_while_it_runs_and_its_clock_leaves_it_out(tmp_path, monkeypatch, capsys, clock):
    monkeypatch.setattr(tqdm, "tqdm", RecordingBar)  # the loop calls tqdm.tqdm when it starts
    RecordingBar.closed = []
    frames: dict[int, str] = {}

    def timed_method(config):
        method = build_method_from_config(config)
        method.register_forward_pre_hook(lambda module, args: clock.advance(STEP))
        return method

    def slow_tracker(step, method, probe_views):
        frames[step] = capsys.readouterr().err.split("\r")[-1]  # what the bar shows now
        clock.advance(JUMP)
        return {"probe_norm": float(sum(v.norm() for v in probe_views))}

    done = train(TINY, tmp_path / "run", tracker=slow_tracker, build_method=timed_method)
    assert done["step"] == 4 and sorted(frames) == [0, 2, 4]
    for step, frame in frames.items():
        assert frame.startswith(f"tracking geometry at step {step}"), frame
        assert f" {step}/4 " in frame, frame  # the bar counts the step being tracked
    (bar,) = RecordingBar.closed
    assert bar["n"] == 4
    # with the three calls on its clock the bar would show 4 * STEP + 3 * JUMP elapsed, and a smoothed
    # rate that saw the calls of steps 2 and 4 (and of step 0, before step 1)
    assert bar["elapsed"] == 4 * STEP
    assert bar["rate"] == pytest.approx(1 / STEP, rel=1e-12)
    assert not capsys.readouterr().err.split("\r")[-1].startswith("saving")  # the description is restored


def test_paused_on_a_disabled_bar_only_runs_the_block():
    bar = tqdm.tqdm(total=3, disable=True)
    ran = []
    with paused(bar, "tracking geometry"):
        ran.append(True)
    assert ran == [True]


def test_paused_restores_the_description_when_the_block_raises(capsys, clock):
    bar = RecordingBar(total=3, desc="epoch 1")
    start_t, last_print_t = bar.start_t, bar.last_print_t
    with pytest.raises(RuntimeError):
        with paused(bar, "saving checkpoint"):
            assert bar.desc == "saving checkpoint"
            clock.advance(7.0)
            raise RuntimeError("disk full")
    assert bar.desc == "epoch 1"
    assert (bar.start_t, bar.last_print_t) == (start_t + 7.0, last_print_t + 7.0)  # the block's time is off the clock
    bar.close()

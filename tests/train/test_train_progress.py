"""The training bar names a tracking call while it runs and leaves its time out of the bar's
clock (headgeom.train.progress). The clock of tqdm and of headgeom.train.progress is the wall
clock plus an offset that each tracking call moves JUMP seconds forward, instead of sleeping: a
tracking call that lasts JUMP seconds on the bar's clock, however slow the machine's steps are."""
from __future__ import annotations

import time
import types

import pytest
import tqdm
import tqdm.std

from headgeom.train import TrainConfig, train
from headgeom.train.progress import paused

JUMP = 1000.0  # seconds of one tracking call on the bar's clock; a tiny step takes far less, even on a loaded machine
TINY = TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": 0.125}, head="d-32-16",
                   data="shapes", data_options={"n": 32, "size": 16}, batch_size=8, max_steps=4,
                   track_every=2, probe_size=8, device="cpu", progress=True)


class RecordingBar(tqdm.tqdm):
    """tqdm that keeps its numbers at close (the loop closes its bar before returning)."""

    closed: list[dict] = []

    def close(self):
        if not self.disable:
            RecordingBar.closed.append(dict(self.format_dict))
        super().close()


def test_the_bar_names_tracking_while_it_runs_and_its_clock_leaves_it_out(tmp_path, monkeypatch, capsys):
    offset = [0.0]

    def clock() -> float:
        return time.time() + offset[0]

    monkeypatch.setattr(tqdm.std, "time", clock)  # tqdm's clock (tqdm.std does `from time import time`)
    monkeypatch.setattr("headgeom.train.progress.time", types.SimpleNamespace(time=clock))
    monkeypatch.setattr(tqdm, "tqdm", RecordingBar)  # the loop calls tqdm.tqdm when it starts
    RecordingBar.closed = []
    frames: dict[int, str] = {}

    def slow_tracker(step, method, probe_views):
        frames[step] = capsys.readouterr().err.split("\r")[-1]  # what the bar shows now
        offset[0] += JUMP
        return {"probe_norm": float(sum(v.norm() for v in probe_views))}

    done = train(TINY, tmp_path / "run", tracker=slow_tracker)
    assert done["step"] == 4 and sorted(frames) == [0, 2, 4]
    for step, frame in frames.items():
        assert frame.startswith(f"tracking geometry at step {step}"), frame
        assert f" {step}/4 " in frame, frame  # the bar counts the step being tracked
    (bar,) = RecordingBar.closed
    assert bar["n"] == 4
    # with the three calls on its clock the bar would show more than 3 * JUMP elapsed, and a smoothed
    # rate that saw the calls of steps 0 (before step 1), 2 and 4 more than JUMP / 2 seconds per step
    assert bar["elapsed"] < JUMP
    assert 1 / bar["rate"] < JUMP / 10
    assert not capsys.readouterr().err.split("\r")[-1].startswith("saving")  # the description is restored


def test_paused_on_a_disabled_bar_only_runs_the_block():
    bar = tqdm.tqdm(total=3, disable=True)
    ran = []
    with paused(bar, "tracking geometry"):
        ran.append(True)
    assert ran == [True]


def test_paused_restores_the_description_when_the_block_raises(capsys):
    bar = tqdm.tqdm(total=3, desc="epoch 1")
    start_t = bar.start_t
    with pytest.raises(RuntimeError):
        with paused(bar, "saving checkpoint"):
            time.sleep(0.2)
            raise RuntimeError("disk full")
    assert bar.desc == "epoch 1" and bar.start_t >= start_t + 0.2
    bar.close()

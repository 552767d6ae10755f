"""The progress display of headgeom reproduce (headgeom.launch.progress): estimates in seconds from the cost
model, the lines it prints without a terminal, the bar it draws in one, at any width.

No test depends on timing: the clock is a fake that the tests advance, the display's ``tick`` is called
by hand, and the one test of the timer thread waits on an event that the first write sets. Every cell's
work declares its seconds (``CellWork.declared_s``) so the estimates below are written from them."""
import io
import json
import re
import sys
import threading

import pytest

import launch_values_experiment as values
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS
from headgeom.experiments.runner import run_experiments
from headgeom.launch.cells import CellTask, Outcome
from headgeom.launch.cost import CELL_S, CellWork, Record, makespan
from headgeom.launch.local import LocalLauncher
from headgeom.launch.progress import (CellItem, ProgressDisplay, Tracker, bar_line, cell_label, duration, left_text,
                                      progress_mode)


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


def _item(exp, i, seconds, reused=False, portable=True, training=False):
    work = CellWork(exp, exp, training, declared_s=seconds)
    return CellItem(f"{exp}/{i}", exp, cell_label({"i": i, "seed": 0}), work, reused, portable)


def _items():
    # C4: ten cheap cells; C11: three long ones (the shape of the quick preset: many cheap, few long)
    return [_item("C4", i, 0.5) for i in range(10)] + [_item("C11", i, 60.0, training=True) for i in range(3)]


def _frames(text):
    """Every piece of a terminal's output between carriage returns and newlines."""
    return [f for f in re.split(r"[\r\n]", text) if f]


# ----------------------------------------------------------------------------- words
@pytest.mark.parametrize("seconds,want", [(0.42, "0.4 s"), (42, "42 s"), (185, "3 min 05 s"), (3725, "1 h 02 min")])
def test_duration(seconds, want):
    assert duration(seconds) == want


@pytest.mark.parametrize("seconds,want", [(3.2, "~3 s"), (42, "~40 s"), (185, "~3 min"), (3725, "~1 h 02 min"),
                                          (None, "time left unknown")])
def test_left_text(seconds, want):
    assert left_text(seconds) == want


def test_progress_mode():
    assert progress_mode(False, Tty()) == "off"
    assert progress_mode(True, io.StringIO()) == "lines"
    assert progress_mode(True, Tty()) == "bar"


# ----------------------------------------------------------------------------- the estimate
def test_the_estimate_is_the_cost_of_the_cells_not_their_count():
    clock = Clock()
    t = Tracker(_items(), {}, jobs=1, now=clock())
    s = t.snapshot(clock())
    assert s.left_s == pytest.approx(10 * 0.5 + 3 * 60.0) and (s.experiment, s.exp_done, s.exp_total) == ("C4", 0, 10)
    for i in range(10):  # every C4 cell at its estimate: 10 of 13 cells done, but only 5 s of 185
        clock.t += 0.5
        t.finish(f"C4/{i}", 0.5, clock())
    s = t.snapshot(clock())
    assert (s.n_done, s.experiment, s.exp_done, s.exp_total) == (10, "C11", 0, 3)
    assert s.left_s == pytest.approx(180.0) and s.fraction == pytest.approx(5 / 185)


def test_recorded_times_refine_the_estimate_of_the_same_group():
    clock = Clock()
    t = Tracker(_items(), {}, jobs=1, now=clock())
    for i in range(10):
        t.finish(f"C4/{i}", 0.5, clock())
    clock.t += 120.0
    t.finish("C11/0", 120.0, clock())  # twice its estimate: the other two C11 cells are estimated at 120 s
    assert t.snapshot(clock()).left_s == pytest.approx(240.0)


def test_records_of_earlier_runs_calibrate_before_any_cell_finishes():
    earlier = {"old": Record(CellWork("C11", "C11", True, declared_s=60.0), 30.0)}  # half the prior
    t = Tracker(_items(), earlier, jobs=1, now=0.0)
    assert t.snapshot(0.0).left_s == pytest.approx(10 * 0.5 + 3 * 30.0)


def test_a_cell_outlasting_its_estimate_raises_its_group():
    clock = Clock()
    items = [_item("C11", i, 60.0) for i in range(3)]
    t = Tracker(items, {}, jobs=1, now=clock())
    clock.t += 30.0
    assert t.snapshot(clock()).left_s == pytest.approx(30.0 + 2 * 60.0)
    clock.t += 60.0  # 90 s into a 60 s cell: the others are taken to need 90 s too, this one 0 s more
    s = t.snapshot(clock())
    assert s.left_s == pytest.approx(2 * 90.0) and s.running == (("C11", "i=0 seed=0", 90.0),)


def test_parallel_workers_take_cells_in_order_and_the_estimate_is_the_makespan():
    clock = Clock()
    items = [_item("A", 0, 40.0), _item("A", 1, 10.0), _item("A", 2, 10.0), _item("A", 3, 30.0)]
    t = Tracker(items, {}, jobs=2, now=clock())
    assert t.snapshot(clock()).left_s == pytest.approx(makespan([10.0, 30.0], [40.0, 10.0], 2)) == 50.0
    assert [r[1] for r in t.snapshot(clock()).running] == ["i=0 seed=0", "i=1 seed=0"]
    clock.t += 10.0
    t.finish("A/1", 10.0, clock())  # A/2 takes the free worker
    s = t.snapshot(clock())
    assert [r[1] for r in s.running] == ["i=0 seed=0", "i=2 seed=0"] and s.left_s == pytest.approx(40.0)


def test_cells_only_this_process_can_run_go_first_one_at_a_time():
    # the local launcher runs cells that are not portable in-process before its pool starts
    items = [_item("A", 0, 10.0), _item("A", 1, 10.0), _item("B", 0, 5.0, portable=False)]
    t = Tracker(items, {}, jobs=2, now=0.0)
    s = t.snapshot(0.0)
    assert s.running == (("B", "i=0 seed=0", 0.0),) and s.left_s == pytest.approx(5.0 + 10.0)
    one_portable = Tracker(items[:1] + items[2:], {}, jobs=2, now=0.0)  # a pool of one is not used
    assert one_portable.snapshot(0.0).left_s == pytest.approx(15.0)


def test_reused_cells_are_done_from_the_start_and_cost_nothing():
    items = [_item("C4", 0, 0.5, reused=True), _item("C4", 1, 0.5)]
    t = Tracker(items, {}, jobs=1, now=0.0)
    s = t.snapshot(0.0)
    assert (s.n_done, s.exp_done, s.left_s) == (1, 1, pytest.approx(0.5))
    assert t.finish("C4/0", 0.5, 0.0) is None  # the launcher reports it again: counted once


def test_slurm_counts_cells_without_a_time_estimate():
    t = Tracker(_items(), {}, jobs=None, now=0.0)
    s = t.snapshot(5.0)
    assert s.left_s is None and len(s.running) == 13
    assert bar_line(s, 200).startswith("C4 0/10 cells | 13 cells left")


# ----------------------------------------------------------------------------- lines (no terminal)
def _display(items, mode, stream, clock, jobs=1, **kw):
    return ProgressDisplay(Tracker(items, {}, jobs, clock()), mode, stream, clock=clock, timer=False, **kw)


def test_without_a_terminal_a_plain_line_per_finished_cell():
    clock, out = Clock(), io.StringIO()
    d = _display(_items(), "lines", out, clock)
    with d:
        clock.t += 0.4
        d.finished("C4/0", {"status": "done", "elapsed_s": 0.4})
        d.finished("C4/1", {"status": "failed", "elapsed_s": 0.25})
    lines = out.getvalue().splitlines()
    assert lines == ["13 cells, 13 to run on 1 worker; ~3 min estimated",
                     "[1/13] C4 cell i=0 seed=0 done in 0.4 s; ~3 min left",
                     "[2/13] C4 cell i=1 seed=0 failed after 0.2 s; ~3 min left"]


def test_without_a_terminal_a_heartbeat_while_a_long_cell_runs():
    clock, out = Clock(), io.StringIO()
    items = [_item("C11", i, 60.0) for i in range(2)]
    d = _display(items, "lines", out, clock, heartbeat_s=30.0)
    d.begin()
    clock.t += 29.0
    d.tick()
    assert len(out.getvalue().splitlines()) == 1  # the start line only: not yet
    clock.t += 1.0
    d.tick()
    d.tick()  # the next one is due 30 s later
    assert out.getvalue().splitlines()[1:] == ["[0/2] C11 cell i=0 seed=0 running for 30 s; ~2 min left"]
    clock.t += 30.0
    d.finished("C11/0", {"status": "done", "elapsed_s": 60.0})
    clock.t += 29.0
    d.tick()  # a finished line resets the heartbeat
    assert out.getvalue().splitlines()[-1] == "[1/2] C11 cell i=0 seed=0 done in 1 min 00 s; ~1 min left"


def test_quiet_prints_nothing():
    clock, out = Clock(), Tty()
    d = _display(_items(), "off", out, clock)
    with d:
        d.finished("C4/0", {"status": "done", "elapsed_s": 0.4})
        clock.t += 100
        d.tick()
        with d.summarising("C4"):
            pass
    assert out.getvalue() == ""


# ----------------------------------------------------------------------------- the bar (a terminal)
@pytest.mark.parametrize("width", [1, 2, 8, 15, 24, 40, 60, 80, 132, 300])
def test_the_bar_never_exceeds_the_terminal_width(width):
    clock, out = Clock(), Tty()
    items = [_item("C4", i, 0.5) for i in range(3)] + [_item("ABLATION_WITH_A_LONG_NAME", i, 300.0) for i in range(2)]
    d = _display(items, "bar", out, clock, width=lambda: width)
    with d:
        for i in range(3):
            clock.t += 0.5
            d.finished(f"C4/{i}", {"status": "done", "elapsed_s": 0.5})
        for _ in range(5):
            clock.t += 61.0
            d.tick()
        with d.summarising("C4"):
            d.tick()
    frames = _frames(out.getvalue())
    assert frames and all(len(f) <= max(1, width - 1) for f in frames), [f for f in frames if len(f) >= width]
    if width >= 60:
        assert any(re.match(r". ABLATION_WITH_A_LONG_NAME 0/2 cells \| ~", f) for f in frames)
        assert any(re.match(r". summarising C4 \| ", f) for f in frames)


def test_the_bar_follows_a_terminal_that_narrows():
    clock, out, width = Clock(), Tty(), [120]
    d = _display([_item("C11", i, 60.0) for i in range(2)], "bar", out, clock, width=lambda: width[0])
    d.begin()
    wide = _frames(out.getvalue())[-1]
    width[0] = 20
    clock.t += 1.0
    d.tick()
    narrow = out.getvalue().rsplit("\r", 1)[-1]
    assert len(wide) > 19 and len(narrow) <= 19 and narrow[2:].startswith("C11")


@pytest.mark.parametrize("width", [2, 5, 12])
def test_the_bar_moves_at_every_tick_even_when_narrow(width):
    clock, out = Clock(), Tty()
    d = _display([_item("C11", i, 600.0) for i in range(2)], "bar", out, clock, width=lambda: width)
    d.begin()
    shown = []
    for _ in range(4):
        d.tick()  # the clock stands still: nothing but the spinner can change
        shown.append(out.getvalue().rsplit("\r", 1)[-1])
    assert all(a != b for a, b in zip(shown, shown[1:])) and all(len(f) <= width - 1 for f in shown)


def test_the_bar_shows_the_experiment_the_time_left_and_the_running_cell():
    clock, out = Clock(), Tty()
    d = _display(_items(), "bar", out, clock, width=lambda: 200)
    d.begin()
    for i in range(10):
        d.finished(f"C4/{i}", {"status": "done", "elapsed_s": 0.5})
    clock.t += 62.0
    d.tick()
    line = out.getvalue().rsplit("\r", 1)[-1].rstrip()
    # 3 C11 cells of 60 s on one worker, the first overdue by 2 s: the other two are taken to need 62 s
    assert line == "/ C11 0/3 cells | ~2 min left | [#######-------------] 35% | 10/13 | i=0 seed=0 1 min 02 s"


def test_lines_printed_during_the_run_go_above_the_bar(monkeypatch):
    clock, out = Clock(), Tty()  # one screen: the bar's stream is also stdout
    monkeypatch.setattr(sys, "stdout", out)
    d = _display(_items(), "bar", out, clock, width=lambda: 60)
    with d, d.redirect():
        assert sys.stdout is not out
        print("C4: 10 cells (0 reused, 0 failed)")
        d.finished("C4/0", {"status": "done", "elapsed_s": 0.5})
    assert sys.stdout is out
    text = out.getvalue()
    # cleared, the line, its newline, then the bar again
    assert re.search(r"\r +\rC4: 10 cells \(0 reused, 0 failed\)\n\r. C4 0/10 cells", text)
    assert all(len(f) <= 59 for f in _frames(text) if not f.startswith("C4: "))


def test_redirect_changes_nothing_without_a_terminal():
    d = _display(_items(), "lines", io.StringIO(), Clock())
    saved = sys.stdout
    with d.redirect():
        assert sys.stdout is saved


def test_the_timer_thread_redraws_without_a_result():
    # synchronised on an event: the timer's first redraw after the start line sets it
    clock, drawn = Clock(), threading.Event()

    class Watch(Tty):
        def write(self, text):
            n = super().write(text)
            if self.getvalue().count("\r") >= 2:
                drawn.set()
            return n

    out = Watch()
    d = ProgressDisplay(Tracker(_items(), {}, 1, clock()), "bar", out, clock=clock, width=lambda: 80, refresh_s=0.01)
    with d:
        assert drawn.wait(timeout=60), "the timer thread never redrew the bar"
    assert d._thread is not None and not d._thread.is_alive()


# ----------------------------------------------------------------------------- the runner's display
@pytest.fixture
def registered():
    runner._load()
    EXPERIMENTS[values.ID] = values.EXPERIMENT
    yield values.ID
    EXPERIMENTS.pop(values.ID, None)


def _run(exp_id, out, **kw):
    return run_experiments([exp_id], out=out, launcher=kw.pop("launcher", LocalLauncher(jobs=1)), **kw)


def test_reproduce_without_a_terminal_prints_a_line_per_cell_and_estimates_from_the_folder(registered, tmp_path,
                                                                                            capsys):
    _run(registered, tmp_path, seeds=2)
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "2 cells, 2 to run on 1 worker; ~1 s estimated"  # the prior: 2 x CELL_S
    assert re.fullmatch(rf"\[1/2\] {registered} cell seed=0 done in [0-9.]+ s; ~\d+ s left", err[1])
    assert re.fullmatch(rf"\[2/2\] {registered} cell seed=1 done in [0-9.]+ s; no cell left", err[2])
    # four seeds: two cells reused, the other two estimated from the times the folder records (set here to 50 s
    # and 70 s: each new cell is estimated at their mean, 60 s, and two of them on one worker take 2 min)
    for path, seconds in zip(sorted((tmp_path / "runs" / registered).glob("*/done.json")), (50.0, 70.0)):
        path.write_text(json.dumps({**json.loads(path.read_text()), "elapsed_s": seconds}))
    _run(registered, tmp_path, seeds=4)
    start = capsys.readouterr().err.splitlines()[0]
    assert start == f"4 cells (2 finished earlier, reused), 2 to run on 1 worker; {left_text(2 * 60.0)} estimated"
    assert left_text(2 * 60.0) == "~2 min" and left_text(2 * CELL_S) == "~1 s"  # the prior alone would say 1 s
    _run(registered, tmp_path, seeds=4)
    assert capsys.readouterr().err.splitlines() == ["4 cells, all finished earlier (reused)"]


def test_reproduce_quiet_prints_no_progress(registered, tmp_path, capsys):
    _run(registered, tmp_path, progress=False)
    assert capsys.readouterr().err == ""


def test_on_slurm_the_lines_count_cells(registered, tmp_path, capsys):
    class FakeSlurm:  # the runner reads only its name: cells run here, one after another
        name = "slurm"

        def describe(self):
            return {"name": self.name}

        def run(self, tasks, on_result):
            results = {}
            for t in tasks:
                results[t.run_dir] = t.fn(*t.args)
                on_result(t, results[t.run_dir])
            return Outcome(results)

    _run(registered, tmp_path, launcher=FakeSlurm())
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "3 cells, 3 to run on the cluster (no time estimate)"
    assert re.fullmatch(rf"\[1/3\] {registered} cell seed=0 done in [0-9.]+ s; 2 cells left", err[1])


def test_a_task_of_no_plan_cell_is_counted_as_a_cell_that_trains_nothing(registered, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "stderr", Tty())  # a display is made (not off)
    plan, _ = runner.plan_experiments([registered], "quick", None)
    tasks = runner.cell_tasks(plan, tmp_path, "quick", {})
    extra = CellTask("SHARED/train-1", "SHARED", tmp_path / "runs" / "SHARED" / "train-1", lambda: {}, ())
    items = runner.cell_progress(plan, tasks + [extra], tmp_path, "quick", LocalLauncher(jobs=1)).tracker.items
    assert [i.experiment for i in items] == [registered] * 3 + ["SHARED"]
    assert items[-1].work == CellWork("SHARED", "SHARED", False) and items[-1].label == "SHARED/train-1"

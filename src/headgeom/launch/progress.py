"""The progress of ``headgeom reproduce`` in time, not in cells: what runs, how much is left, and how long.

Cells are weighed by their cost in seconds (:mod:`headgeom.launch.cost`: a prior from the cell's config,
calibrated by the cell times recorded in the output folder and by every cell that finishes), and the
time left is the makespan of the cells still queued on the local launcher's ``jobs`` workers
(:func:`headgeom.launch.cost.makespan`). Under ``--launcher slurm`` the cluster decides how many cells
run at once, so only cells are counted there (``jobs=None``).

:class:`Tracker` holds the state and does no I/O; :class:`ProgressDisplay` writes it:

- ``bar`` (the stream is a terminal): one line, redrawn every ``refresh_s`` by a timer thread, so it is
  never still longer than that, and cut to the terminal's width (re-read at every redraw) so it never
  wraps: ``/ C11 2/6 cells | ~3 min left | [######----] 57% | 245/430 | depth=1 seed=0 1 min 02 s`` (the
  first character turns at every redraw, so the line moves at any width); lines
  printed meanwhile (the experiments' summaries) are written above it (:meth:`ProgressDisplay.redirect`);
- ``lines`` (a log file, a pipe, CI): one plain line per finished cell,
  ``[12/430] C4 cell activation=silu seed=1 done in 0.4 s; ~3 min left``, and one every ``heartbeat_s``
  while a cell runs;
- ``off`` (``--quiet``): nothing.

The clock, the stream and the terminal width are arguments, so tests drive the display with a fake clock
and call :meth:`ProgressDisplay.tick` themselves instead of waiting for the timer.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, TextIO

from headgeom.launch.cost import CellWork, Record, calibrate, makespan

__all__ = ["CellItem", "ProgressDisplay", "Snapshot", "Tracker", "bar_line", "cell_label", "duration",
           "left_text", "progress_mode", "terminal_width"]

MODES = ("bar", "lines", "off")
SPINNER = "|/-\\"


# ----------------------------------------------------------------------------- words
def duration(seconds: float) -> str:
    """A measured time: ``0.4 s``, ``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = max(0.0, float(seconds))
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        m, r = divmod(int(round(s)), 60)
        return f"{m} min {r:02d} s"
    h, m = divmod(int(round(s / 60)), 60)
    return f"{h} h {m:02d} min"


def left_text(seconds: float | None) -> str:
    """An estimate, no more precise than it is: ``~5 s``, ``~40 s``, ``~3 min``, ``~1 h 05 min``."""
    if seconds is None:
        return "time left unknown"
    s = max(0.0, float(seconds))
    if s < 10:
        return f"~{max(1, int(round(s)))} s"
    if s < 60:
        return f"~{int(round(s / 5)) * 5} s"
    if s < 3600:
        return f"~{int(round(s / 60))} min"
    return "~" + duration(s)


def cell_label(cell: Mapping[str, Any]) -> str:
    """A cell's parameters as ``k=v`` words (``activation=silu seed=1``)."""
    return " ".join(f"{k}={v}" for k, v in cell.items())


def terminal_width(stream: TextIO) -> int:
    """Columns of the terminal ``stream`` writes to (the environment's COLUMNS or 80 when unknown)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size().columns


def progress_mode(enabled: bool, stream: TextIO) -> str:
    """``off`` when not ``enabled`` (``--quiet``), ``bar`` on a terminal, else ``lines``."""
    if not enabled:
        return "off"
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return "bar" if tty and os.environ.get("TERM") != "dumb" else "lines"


# ----------------------------------------------------------------------------- state
@dataclass(frozen=True)
class CellItem:
    """One cell as the display knows it: ``key`` (its run directory), experiment, ``label``
    (:func:`cell_label`), its work for the cost model, whether it had finished before this run, and
    whether another process can run it (``portable``: :class:`headgeom.launch.cells.CellTask`)."""

    key: Any
    experiment: str
    label: str
    work: CellWork
    reused: bool = False
    portable: bool = True


@dataclass(frozen=True)
class Snapshot:
    """What the display shows at one moment. ``left_s`` is None when the time cannot be estimated
    (SLURM); ``running``: (experiment, label, seconds it has run) of the cells taken to be running."""

    n_done: int
    n_total: int
    experiment: str
    exp_done: int
    exp_total: int
    left_s: float | None
    fraction: float
    running: tuple[tuple[str, str, float], ...] = ()
    summarising: str | None = None


class Tracker:
    """Which cells finished, which run and since when, and the estimate of what is left.

    ``items`` in the order the launcher takes them; ``records``: cell times recorded before this run
    {key: Record} (:func:`headgeom.launch.cost.folder_records`); ``jobs``: the local launcher's worker
    processes (None: SLURM, every cell queued at once and no time estimate); ``now``: the clock at the
    start. The local launcher's order is followed: with ``jobs`` > 1 and at least two portable cells
    to run, the other cells run first, one at a time, in this process, then the portable ones in
    ``jobs`` workers, each taken when a worker frees up (:class:`headgeom.launch.local.LocalLauncher`)."""

    def __init__(self, items: list[CellItem], records: Mapping[Any, Record], jobs: int | None, now: float) -> None:
        self.items, self.records, self.jobs = list(items), dict(records), jobs
        self.by_key = {i.key: i for i in self.items}
        todo = [i for i in self.items if not i.reused]
        pooled = [i for i in todo if i.portable] if jobs is not None and jobs > 1 else []
        self.pool = pooled if len(pooled) >= 2 else []
        in_pool = {i.key for i in self.pool}
        self.serial = [i for i in todo if i.key not in in_pool]
        self.done: dict[Any, float] = {}  # key -> seconds it took in this run
        self.started: dict[Any, float] = {}  # key -> when it was taken to start (running cells only)
        self.exp_total: dict[str, int] = {}
        self.exp_done: dict[str, int] = {}
        for i in self.items:
            self.exp_total[i.experiment] = self.exp_total.get(i.experiment, 0) + 1
            self.exp_done[i.experiment] = self.exp_done.get(i.experiment, 0) + i.reused
        self.n_done = sum(i.reused for i in self.items)
        self.summarising: str | None = None
        self.last = ""
        self._start_next(now)

    def _start_next(self, now: float) -> None:
        if self.jobs is None:
            running = self.serial + self.pool
        elif self.serial:
            running = self.serial[:1]
        else:
            running = self.pool[:self.jobs]
        for item in running:
            self.started.setdefault(item.key, now)

    def finish(self, key: Any, seconds: float | None, now: float) -> CellItem | None:
        """Cell ``key`` has a result after ``seconds`` of work (None: unknown, the time since it was taken
        to start is used); returns its item (None for a cell already counted, e.g. a reused one)."""
        item = self.by_key.get(key)
        if item is None or item.reused or key in self.done:
            return None
        began = self.started.pop(key, now)
        took = float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else max(0.0, now - began)
        self.done[key] = took
        self.records[key] = Record(item.work, took)
        self.serial = [i for i in self.serial if i.key != key]
        self.pool = [i for i in self.pool if i.key != key]
        self.n_done += 1
        self.exp_done[item.experiment] += 1
        self.last = item.experiment
        self._start_next(now)
        return item

    def snapshot(self, now: float) -> Snapshot:
        """The estimate at ``now``. A running cell that outlasts its estimate counts as a record of its
        time so far (a lower bound of its own), which raises the ratio of its group."""
        queue = self.serial + self.pool
        running = {i.key: max(0.0, now - self.started[i.key]) for i in queue if i.key in self.started}
        cal = calibrate(self.records.values())
        overdue = [Record(i.work, running[i.key]) for i in queue
                   if i.key in running and running[i.key] > cal.seconds(i.work)]
        if overdue:
            cal = calibrate([*self.records.values(), *overdue])

        def left_of(i: CellItem) -> float:
            return max(0.0, cal.seconds(i.work) - running.get(i.key, 0.0))

        left = None
        if self.jobs is not None:
            pool_running = [left_of(i) for i in self.pool if i.key in running]
            pool_pending = [left_of(i) for i in self.pool if i.key not in running]
            left = sum(left_of(i) for i in self.serial) + makespan(pool_pending, pool_running, self.jobs)
        spent = sum(self.done.values()) + sum(running.values())
        todo = sum(left_of(i) for i in queue)
        fraction = spent / (spent + todo) if spent + todo > 0 else 1.0
        first = [i for i in queue if i.key in running]
        current = first[0].experiment if first else queue[0].experiment if queue else self.last
        if not current and self.items:
            current = self.items[-1].experiment
        return Snapshot(self.n_done, len(self.items), current, self.exp_done.get(current, 0),
                        self.exp_total.get(current, 0), left, fraction,
                        tuple((i.experiment, i.label, running[i.key]) for i in first), self.summarising)


# ----------------------------------------------------------------------------- lines
def _bar(fraction: float, width: int) -> str:
    filled = int(round(min(1.0, max(0.0, fraction)) * width))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def bar_line(s: Snapshot, width: int, spinner: str = "") -> str:
    """The terminal line of ``s``, never longer than ``width - 1`` (the last column would wrap on some
    terminals): ``spinner`` (one character that the timer turns, so the line changes at any width), then
    the richest of a few forms that fits, down to the experiment and the time left."""
    if spinner:
        return (spinner + " " + bar_line(s, width - 2))[:max(1, width - 1)]
    limit = max(1, width - 1)
    what = f"summarising {s.summarising}" if s.summarising else s.experiment
    head = what if s.summarising else f"{what} {s.exp_done}/{s.exp_total} cells"
    left, pct, count = _left_words(s), f"{int(100 * s.fraction)}%", f"{s.n_done}/{s.n_total}"
    run = ""
    if s.running and not s.summarising:
        _, label, t = s.running[0]
        more = f" (+{len(s.running) - 1})" if len(s.running) > 1 else ""
        run = f"{label} {duration(t)}{more}"
    short = left_text(s.left_s) if s.left_s is not None and s.n_done < s.n_total else count
    forms = [" | ".join(p for p in (head, left, f"{_bar(s.fraction, 20)} {pct}", count, run) if p),
             " | ".join((head, left, f"{_bar(s.fraction, 10)} {pct}", count)),
             " | ".join((head, left, pct, count)),
             " | ".join((head, left)),
             f"{what} {short}"]
    for form in forms:
        if len(form) <= limit:
            return form
    return forms[-1][:limit]


def finished_line(s: Snapshot, item: CellItem, seconds: float, failed: bool) -> str:
    """``[12/430] C4 cell activation=silu seed=1 done in 0.4 s; ~3 min left``."""
    what = f"failed after {duration(seconds)}" if failed else f"done in {duration(seconds)}"
    return f"[{s.n_done}/{s.n_total}] {item.experiment} cell {item.label} {what}; {_left_words(s)}"


def heartbeat_line(s: Snapshot) -> str:
    """``[12/430] C11 cell depth=1 seed=0 running for 1 min 30 s; ~8 min left`` (the oldest running cell)."""
    if s.summarising:
        return f"[{s.n_done}/{s.n_total}] summarising {s.summarising}; {_left_words(s)}"
    exp, label, t = s.running[0]
    more = f" (and {len(s.running) - 1} more running)" if len(s.running) > 1 else ""
    return f"[{s.n_done}/{s.n_total}] {exp} cell {label} running for {duration(t)}{more}; {_left_words(s)}"


def _left_words(s: Snapshot) -> str:
    """``~3 min left``; under SLURM (no estimate) the cells left; ``no cell left`` at the end."""
    if s.n_done >= s.n_total:
        return "no cell left"
    return f"{left_text(s.left_s)} left" if s.left_s is not None else f"{s.n_total - s.n_done} cells left"


def start_line(tracker: Tracker, s: Snapshot) -> str:
    """What is about to run: cells, those finished earlier, workers and the estimate."""
    reused = sum(i.reused for i in tracker.items)
    if s.n_done >= s.n_total:
        return f"{s.n_total} cells, all finished earlier (reused)"
    earlier = f" ({reused} finished earlier, reused)" if reused else ""
    where = (f"on {tracker.jobs} worker{'s' if tracker.jobs != 1 else ''}; {left_text(s.left_s)} estimated"
             if tracker.jobs is not None else "on the cluster (no time estimate)")
    return f"{s.n_total} cells{earlier}, {s.n_total - s.n_done} to run {where}"


# ----------------------------------------------------------------------------- the display
class ProgressDisplay:
    """Writes a :class:`Tracker` to ``stream`` in ``mode`` (module docstring). Use as a context manager
    around the run (it starts the timer thread and, in bar mode, :meth:`redirect`), call :meth:`finished`
    for every result and :meth:`summarising` around each experiment's summary."""

    def __init__(self, tracker: Tracker, mode: str, stream: TextIO, *, clock: Callable[[], float] = time.monotonic,
                 width: Callable[[], int] | None = None, refresh_s: float = 1.0, heartbeat_s: float = 30.0,
                 timer: bool = True) -> None:
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {MODES}; got {mode!r}")
        self.tracker, self.mode, self.stream, self.clock = tracker, mode, stream, clock
        self.width = width if width is not None else (lambda: terminal_width(stream))
        self.refresh_s, self.heartbeat_s, self.timer = refresh_s, heartbeat_s, timer
        self.lock = threading.RLock()
        self._shown = 0  # characters of the bar line on screen (0: none)
        self._ticks = 0  # turns of the spinner
        self._partial = False  # a redirected line without its newline yet: do not draw over it
        self._last_line = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- writing
    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    def _say(self, line: str) -> None:
        self._write(line + "\n")
        self._last_line = self.clock()

    def _clear(self) -> None:
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _draw(self) -> None:
        if self.mode != "bar" or self._partial:
            return
        width = self.width()
        line = bar_line(self.tracker.snapshot(self.clock()), width, SPINNER[self._ticks % len(SPINNER)])
        pad = max(0, min(self._shown, max(1, width - 1)) - len(line))
        self._write("\r" + line + " " * pad)
        self._shown = len(line)

    # -- events
    def begin(self) -> None:
        """Say what is about to run (lines mode) or draw the bar."""
        with self.lock:
            if self.mode == "lines":
                self._say(start_line(self.tracker, self.tracker.snapshot(self.clock())))
            self._draw()

    def finished(self, key: Any, result: Mapping[str, Any]) -> None:
        """A cell has a result ({"status", "elapsed_s", ...}, as the launchers hand it over)."""
        with self.lock:
            item = self.tracker.finish(key, result.get("elapsed_s"), self.clock())
            if item is None or self.mode == "off":
                return
            if self.mode == "lines":
                s = self.tracker.snapshot(self.clock())
                self._say(finished_line(s, item, self.tracker.done[key], result.get("status") == "failed"))
            else:
                self._draw()

    @contextlib.contextmanager
    def summarising(self, experiment: str) -> Iterator[None]:
        """Inside the block the display says the experiment is being summarised."""
        with self.lock:
            self.tracker.summarising = experiment
            self._draw()
        try:
            yield
        finally:
            with self.lock:
                self.tracker.summarising = None
                self._draw()

    def tick(self) -> None:
        """Redraw the bar, or in lines mode print a heartbeat when a cell has run ``heartbeat_s`` since the
        last line; the timer thread calls this every ``refresh_s``."""
        with self.lock:
            if self.mode == "bar":
                self._ticks += 1
                self._draw()
            elif self.mode == "lines" and self.clock() - self._last_line >= self.heartbeat_s:
                s = self.tracker.snapshot(self.clock())
                if s.running or s.summarising:
                    self._say(heartbeat_line(s))

    # -- lifetime
    def __enter__(self) -> ProgressDisplay:
        self.begin()
        if self.timer and self.mode != "off":
            self._thread = threading.Thread(target=self._run_timer, name="headgeom-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self.lock:
            self._clear()

    def _run_timer(self) -> None:
        while not self._stop.wait(self.refresh_s):
            self.tick()

    @contextlib.contextmanager
    def redirect(self) -> Iterator[None]:
        """In bar mode, ``sys.stdout`` and ``sys.stderr`` write above the bar inside the block (the bar is
        cleared before a write and drawn again after its newline); other modes change nothing."""
        if self.mode != "bar":
            yield
            return
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Above(self, sys.stdout), _Above(self, sys.stderr)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = saved


class _Above:
    """A text stream that writes above the display's bar (:meth:`ProgressDisplay.redirect`)."""

    def __init__(self, display: ProgressDisplay, inner: TextIO) -> None:
        self._display, self._inner = display, inner

    def write(self, text: str) -> int:
        d = self._display
        with d.lock:
            d._clear()
            n = self._inner.write(text)
            self._inner.flush()
            if text:
                d._partial = not text.endswith("\n")
            d._draw()
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

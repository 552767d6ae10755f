"""Stopping ``headgeom train`` on SIGTERM or SIGINT at a step boundary, with a checkpoint.

:class:`StopSignals` turns the first SIGTERM (what ``kill``, SLURM and container runtimes send) or
SIGINT (Ctrl-C) into a request that :func:`headgeom.train.train` reads after each finished step,
and says so at once, from the signal handler (``headgeom train: stopping after step 7 (Ctrl-C);
Ctrl-C again to stop now``), not when the step ends: a step of a large model takes tens of
seconds. The loop then checkpoints that step (unless it just did), waits for the checkpoint to be
on disk and raises :class:`TrainingInterrupted`, which ``headgeom train`` reports in one line with
exit status 128 + the signal's number. ``--resume`` continues from that checkpoint exactly (on
CPU, bit for bit; the metrics lines of the finished steps are all there, none twice).

A second signal is not caught again: it gets the handler that was there before, at once (SIGINT
raises KeyboardInterrupt in the middle of the step, which ``headgeom train`` reports in one line
naming the checkpoint it can resume from; SIGTERM ends the process). The run folder stays
resumable either way: checkpoints are written atomically (a new one is complete or absent, the
previous one untouched) and a metrics line cut in half is repaired by the resume. A signal the
process was started ignoring (``nohup``, a background job of a script) stays ignored. Only a
single-process run installs the handlers: under torchrun or srun every rank would have to stop at
the same step (the launcher's own signal handling applies there), and a SLURM cell's job is
handled by submitit (:mod:`headgeom.launch.slurm`).
"""
from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Protocol

__all__ = ["StopRequest", "StopSignals", "TrainingInterrupted", "signal_words"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(Exception):
    """A run stopped by a signal after ``step`` finished steps, with its checkpoint at ``checkpoint``.

    Not an error of the user's input (so not a ValueError/RuntimeError: the CLI gives it its own exit
    status, 128 + ``signum``)."""

    def __init__(self, signum: int, step: int, stop_step: int, checkpoint: Path, out: Path) -> None:
        self.signum, self.step, self.checkpoint, self.out = signum, step, checkpoint, out
        super().__init__(f"interrupted by {signal.Signals(signum).name}: stopped after step {step} of {stop_step} "
                         f"with its checkpoint {checkpoint}; continue with: headgeom train --resume --out {out}")


class StopRequest(Protocol):
    """What ``train(should_stop=...)`` asks (single process only): told the step a session starts
    from, then asked after every finished step whether to stop there."""

    def starting(self, step: int) -> None:
        """The session starts after ``step`` finished steps (0, or the step a resume continues from)."""

    def __call__(self, step: int) -> int | None:
        """``step`` steps are finished: the number of the signal that asks to stop there, else None."""


def signal_words(signum: int) -> tuple[str, str]:
    """(what the user did, how to do it again): ("Ctrl-C", "Ctrl-C again") for SIGINT, else the signal's
    name and "send SIGTERM again"."""
    if signum == signal.SIGINT:
        return "Ctrl-C", "Ctrl-C again"
    name = signal.Signals(signum).name
    return name, f"send {name} again"


def _say_now(message: str) -> None:
    """One line on stderr from inside a signal handler: an unbuffered write to file descriptor 2, since
    the buffered ``sys.stderr`` may be in the middle of a write (a progress bar) in the interrupted frame.
    On a terminal it starts on a new line, below the progress bar."""
    try:
        start = "\n" if os.isatty(2) else ""
        os.write(2, f"{start}{message}\n".encode())
    except OSError:
        pass  # no stderr to tell: the stop itself goes on


class StopSignals:
    """Within ``with StopSignals() as stop:``, the first SIGTERM or SIGINT only sets ``stop.received``
    (its number) and is acknowledged at once through ``say`` (default: one line on stderr), naming the
    step the run will stop after; ``stop(step)`` returns it (None until one arrived). The handlers that
    were installed before are put back on exit, and at once when a second signal arrives, which then
    reaches them. ``finished``: the finished steps the loop last reported (None before it starts)."""

    def __init__(self, signals: tuple[int, ...] = SIGNALS, say: Callable[[str], None] = _say_now,
                 prog: str = "headgeom train") -> None:
        self.signals, self.say, self.prog = signals, say, prog
        self.received: int | None = None
        self.finished: int | None = None
        self._before: dict[int, Any] = {}

    def starting(self, step: int) -> None:
        self.finished = step

    def __call__(self, step: int) -> int | None:
        self.finished = step
        return self.received

    def acknowledgement(self, signum: int) -> str:
        """What the first signal is answered with: the step the run stops after, and how to stop now.
        A signal seen after step k was asked about is seen again after step k + 1: the run stops there."""
        what, again = signal_words(signum)
        after = "the first step" if self.finished is None else f"step {self.finished + 1}"
        return f"{self.prog}: stopping after {after} ({what}); {again} to stop now"

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
            self.say(self.acknowledgement(signum))
            return
        self._restore()  # a second signal: what the process did before headgeom train
        signal.raise_signal(signum)

    def _restore(self) -> None:
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self  # Python delivers signals to the main thread only; nothing to install
        for signum in self.signals:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # ignored by whoever started us (nohup, a background job): it stays ignored
            self._before[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

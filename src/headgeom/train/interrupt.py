"""Stopping ``headgeom train`` on SIGTERM or SIGINT at a step boundary, with a checkpoint.

:class:`StopSignals` turns the first SIGTERM (what ``kill``, SLURM and container runtimes send) or
SIGINT (Ctrl-C) into a request that :func:`headgeom.train.train` reads after each finished step:
the loop then checkpoints that step (unless it just did), waits for the checkpoint to be on disk
and raises :class:`TrainingInterrupted`, which ``headgeom train`` reports in one line with exit
status 128 + the signal's number. ``--resume`` continues from that checkpoint exactly (on CPU, bit
for bit; the metrics lines of the finished steps are all there, none twice).

A second signal while the step finishes is not caught again: it gets the handler that was there
before (SIGINT raises KeyboardInterrupt, SIGTERM ends the process); the previous checkpoint is
written atomically, so it stays whole either way. A signal the process was started ignoring (``nohup``,
a background job of a script) stays ignored. Only a single-process run installs the handlers:
under torchrun or srun every rank would have to stop at the same step (the launcher's own signal
handling applies there), and a SLURM cell's job is handled by submitit (:mod:`headgeom.launch.slurm`).
"""
from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["StopSignals", "TrainingInterrupted"]

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(Exception):
    """A run stopped by a signal after ``step`` finished steps, with its checkpoint at ``checkpoint``.

    Not an error of the user's input (so not a ValueError/RuntimeError: the CLI gives it its own exit
    status, 128 + ``signum``)."""

    def __init__(self, signum: int, step: int, stop_step: int, checkpoint: Path, out: Path) -> None:
        self.signum, self.step, self.checkpoint, self.out = signum, step, checkpoint, out
        super().__init__(f"interrupted by {signal.Signals(signum).name}: stopped after step {step} of {stop_step} "
                         f"with its checkpoint {checkpoint}; continue with: headgeom train --resume --out {out}")


class StopSignals:
    """Within ``with StopSignals() as stop:``, SIGTERM and SIGINT only set ``stop.received`` (the
    first signal's number); ``stop()`` returns it (None until one arrived). The handlers that were
    installed before are put back on exit, and at once when a second signal arrives."""

    def __init__(self, signals: tuple[int, ...] = SIGNALS) -> None:
        self.signals = signals
        self.received: int | None = None
        self._before: dict[int, Any] = {}

    def __call__(self) -> int | None:
        return self.received

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum
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

"""Where a training run's records go: ``metrics.jsonl`` always, TensorBoard scalars on request.

A logger has ``log(step, scalars)`` and ``close()``. Every run writes :class:`JsonlLogger`
(``RUN_DIR/metrics.jsonl``, the record the rest of headgeom reads: eval, tracking figures, the
experiments); ``TrainConfig.logger = "tensorboard"`` (``headgeom train --logger tensorboard``)
adds :class:`TensorBoardLogger`, the same numbers as TensorBoard scalars under
``RUN_DIR/tensorboard/``, tagged with their metrics.jsonl keys (``loss``, ``lr``, the method's
logs, the tracker's ``heff_ambient_mean_lambda_min``, ...) at the same steps. TensorBoard stores
float32, so its values are the metrics.jsonl values rounded to float32.

Resuming: the loop drops the metrics.jsonl lines after the checkpoint it resumes from, and the
TensorBoard writer opens a new event file with ``purge_step`` = the first step it will write, so
TensorBoard's reader hides the earlier files' events from that step on (those written between
the checkpoint and a kill): each step appears once in both records.

tensorboard is an optional dependency (``pip install -e ".[tensorboard]"``); :func:`check_logger`
says so in one line before any work, and only :class:`TensorBoardLogger` imports it.
"""
from __future__ import annotations

import errno
import importlib.util
import json
from pathlib import Path
from typing import Any, Protocol

from headgeom.io import json_safe

__all__ = ["LOGGERS", "TENSORBOARD_INSTALL", "JsonlLogger", "Logger", "Loggers", "TensorBoardLogger",
           "check_logger", "open_loggers"]

LOGGERS = ("jsonl", "tensorboard")  # jsonl is always written; tensorboard adds event files
TENSORBOARD_INSTALL = 'pip install -e ".[tensorboard]"'


class Logger(Protocol):
    def log(self, step: int, scalars: dict[str, Any]) -> None:
        """Record ``scalars`` ({name: number}) at optimisation step ``step``."""

    def close(self) -> None:
        """Flush and release the files."""


def check_logger(name: str) -> None:
    """Raise ValueError for an unknown logger and RuntimeError (one line naming the install step)
    when the logger's optional dependency is missing."""
    if name not in LOGGERS:
        raise ValueError(f"unknown logger {name!r}; choose one of {', '.join(LOGGERS)}")
    if name == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
        raise RuntimeError(f"--logger tensorboard needs the optional dependency tensorboard, which is not "
                           f"installed; install it with: {TENSORBOARD_INSTALL} (or use --logger jsonl)")


class JsonlLogger:
    """One JSON line ``{"step": step, **scalars}`` per call, appended to ``path`` and flushed;
    NaN becomes null and ±inf "inf"/"-inf" (headgeom.io's convention).

    Unbuffered: each line goes to the file as it is logged, and a failed write (a full disk) raises
    at once, naming the file, with nothing left in a buffer for ``close`` to fail on again. What a
    crash or a full disk cuts off is a torn last line, which a resume drops and reports."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh = open(path, "ab", buffering=0)

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        view = memoryview((json.dumps(json_safe({"step": step, **scalars}), allow_nan=False) + "\n").encode("utf-8"))
        try:
            while view:
                written = self._fh.write(view)
                if not written:
                    raise OSError(errno.EIO, "the file took no bytes")
                view = view[written:]
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(self.path)) from err

    def close(self) -> None:
        self._fh.close()


class TensorBoardLogger:
    """Every numeric entry of ``scalars`` as a TensorBoard scalar (float32) tagged by its name.

    ``purge_step``: the first step this writer will log; TensorBoard hides the events of earlier
    event files in ``log_dir`` from that step on (a resumed run rewrites them)."""

    def __init__(self, log_dir: str | Path, purge_step: int = 0) -> None:
        check_logger("tensorboard")
        # Imported here: tensorboard is an optional extra, needed only by this logger.
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(log_dir), purge_step=purge_step)

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        for name, value in scalars.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(name, float(value), global_step=step)

    def close(self) -> None:
        self._writer.close()  # flushes


class Loggers:
    """Several loggers called as one."""

    def __init__(self, loggers: list[Logger]) -> None:
        self.loggers = list(loggers)

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        for logger in self.loggers:
            logger.log(step, scalars)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def open_loggers(name: str, run_dir: str | Path, first_step: int) -> Loggers:
    """The loggers of a run in ``run_dir`` for ``TrainConfig.logger = name``: metrics.jsonl always
    (appended), plus ``run_dir/tensorboard/`` for ``tensorboard``; ``first_step`` is the first step
    the run will log (0 for a new run, the checkpoint's step + 1 for a resumed one)."""
    check_logger(name)
    run_dir = Path(run_dir)
    loggers: list[Logger] = [JsonlLogger(run_dir / "metrics.jsonl")]
    if name == "tensorboard":
        loggers.append(TensorBoardLogger(run_dir / "tensorboard", purge_step=first_step))
    return Loggers(loggers)

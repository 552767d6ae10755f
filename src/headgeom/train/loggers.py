"""Where a training run's records go: ``metrics.jsonl`` always, and the trackers ``--logger`` names.

``TrainConfig.logger`` (``headgeom train --logger jsonl,tensorboard,mlflow,wandb``, a comma list)
names the loggers of a run. ``LOGGERS = {name: builder}`` is the registry, one file per logger
(a new logger is its file, with its ``open_*`` function, and one entry here):

- ``jsonl``: :class:`headgeom.train.jsonl_logger.JsonlLogger`, ``RUN_DIR/metrics.jsonl``, the record
  the rest of headgeom reads (eval, tracking figures, the experiments); always one of them;
- ``tensorboard``: :class:`headgeom.train.tensorboard_logger.TensorBoardLogger`, scalars (float32)
  under ``RUN_DIR/tensorboard/``;
- ``mlflow``: :class:`headgeom.train.mlflow_logger.MlflowLogger`, a run in ``sqlite:///RUN_DIR/mlflow.db``
  (or ``$MLFLOW_TRACKING_URI``);
- ``wandb``: ``headgeom.train.wandb_logger.WandbLogger``, offline under ``RUN_DIR/wandb/`` unless
  W&B is configured otherwise.

The trackers receive the same numbers at the same steps as metrics.jsonl, under the shared tags
of :mod:`headgeom.tags` (``heff_ambient_mean_lambda_min`` -> ``headgeom/ambient/lambda_min``,
``loss`` -> ``train/loss``).

Every logger has the :class:`Logger` methods: ``log(step, scalars)``, ``log_params`` (the resolved
TrainConfig, once at the start of each session), ``log_figure`` (the tracking figures, when the
run writes them), ``log_artifact`` (the final checkpoint) and ``close``; a logger without the
notion (TensorBoard has no artifacts) ignores the call.

Resuming: the loop drops the metrics.jsonl lines after the checkpoint it resumes from; the
TensorBoard writer opens a new event file with ``purge_step`` = the first step it will write, so
TensorBoard's reader hides the earlier files' events from that step on; an MLflow or W&B run is
continued, not started again: its run id is kept in ``RUN_DIR/loggers.json`` (:mod:`.logger_runs`).
Each of those knows the first step its own record lacks (``first_step``): a session killed without a
checkpoint at its last step (SIGKILL, a crash) may have recorded more or fewer steps than
metrics.jsonl keeps; the logger skips what it holds, and :func:`replay` fills in the rest from
metrics.jsonl, so each step is recorded once everywhere.

The trackers are optional dependencies (extras ``tensorboard``, ``mlflow``, ``wandb``);
:func:`check_logger` says which to install in one line before any work, and a logger's file,
which imports its package, is imported only when that logger is opened.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from headgeom.runs.metrics import read_metrics
from headgeom.tags import tagged

from .jsonl_logger import JsonlLogger
from .logger_runs import read_logger_runs, write_logger_runs

__all__ = ["INSTALL", "LOGGERS", "TENSORBOARD_INSTALL", "JsonlLogger", "Logger", "LoggerBuilder", "Loggers",
           "check_logger", "open_loggers", "parse_loggers", "replay"]


class Logger(Protocol):
    def log(self, step: int, scalars: dict[str, Any]) -> None:
        """Record ``scalars`` ({name: number}) at optimisation step ``step``."""

    def log_params(self, params: dict[str, Any]) -> None:
        """Record the run's resolved settings (TrainConfig.to_dict(), nested dicts kept)."""

    def log_figure(self, name: str, path: Path) -> None:
        """Record the PNG ``path`` as the figure ``name`` (its path in the run folder, no suffix)."""

    def log_artifact(self, path: Path) -> None:
        """Keep a copy of the file ``path`` (the final checkpoint) with the run."""

    def close(self) -> None:
        """Flush and release the files."""


@dataclass(frozen=True)
class LoggerBuilder:
    """How ``--logger NAME`` opens its logger: ``opener`` ("module:function") is imported when the
    logger is opened and called as ``function(run_dir, first_step, stored) -> (logger, entry)``
    (``stored``: the logger's loggers.json entry of a previous session, {} for none; ``entry``: what
    a resume needs to continue it, {} for nothing). ``packages()``: the optional packages it imports;
    ``extra``: the pip extra that installs them; ``title``: its name in messages."""

    opener: str
    title: str
    packages: Callable[[], tuple[str, ...]] = lambda: ()
    extra: str | None = None

    @property
    def module(self) -> str:
        return self.opener.partition(":")[0]

    def missing(self) -> str | None:
        """The first package (or headgeom module) this logger needs that is not installed, or None."""
        for package in (*self.packages(), self.module):
            if importlib.util.find_spec(package) is None:
                return package
        return None

    def __call__(self, run_dir: Path, first_step: int, stored: dict[str, Any]) -> tuple[Logger, dict[str, Any]]:
        module, _, name = self.opener.partition(":")
        return getattr(importlib.import_module(module), name)(run_dir, first_step, stored)


def _mlflow_packages() -> tuple[str, ...]:
    """mlflow, and the SQL store's sqlalchemy and alembic unless $MLFLOW_TRACKING_URI names a
    tracking server or a file store."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if uri.split(":", 1)[0] in ("http", "https", "databricks", "file"):
        return ("mlflow",)
    return ("mlflow", "sqlalchemy", "alembic")


LOGGERS: dict[str, LoggerBuilder] = {  # jsonl is always written; the order is that of TrainConfig.logger
    "jsonl": LoggerBuilder("headgeom.train.jsonl_logger:open_jsonl", "metrics.jsonl"),
    "tensorboard": LoggerBuilder("headgeom.train.tensorboard_logger:open_tensorboard", "TensorBoard",
                                 lambda: ("tensorboard",), "tensorboard"),
    "mlflow": LoggerBuilder("headgeom.train.mlflow_logger:open_mlflow", "MLflow", _mlflow_packages, "mlflow"),
    "wandb": LoggerBuilder("headgeom.train.wandb_logger:open_wandb", "W&B", lambda: ("wandb",), "wandb"),
}
INSTALL = {name: f'pip install -e ".[{b.extra}]"' for name, b in LOGGERS.items() if b.extra is not None}
TENSORBOARD_INSTALL = INSTALL["tensorboard"]


def parse_loggers(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"tensorboard,mlflow"`` (or a sequence of names) as the tuple TrainConfig.logger holds:
    ``jsonl`` first (always written), then the others in the order of ``LOGGERS``; an unknown or
    empty name is a ValueError naming the known ones."""
    text = value if isinstance(value, str) else ",".join(map(str, value))
    names = [n.strip() for n in text.split(",")]
    unknown = [n for n in names if n not in LOGGERS]
    if unknown:
        raise ValueError(f"unknown logger {unknown[0]!r} in --logger {text!r}; choose from {', '.join(LOGGERS)}, "
                         f"as a comma list (e.g. jsonl,mlflow)")
    return tuple(n for n in LOGGERS if n == "jsonl" or n in names)


def check_logger(names: str | Sequence[str]) -> tuple[str, ...]:
    """The loggers ``names`` names (:func:`parse_loggers`); raises ValueError for an unknown name and
    RuntimeError (one line naming the extra to install) when one's optional dependency is missing."""
    parsed = parse_loggers(names)
    for name in parsed:
        builder = LOGGERS[name]
        package = builder.missing()
        if package == builder.module:
            others = ", ".join(n for n in LOGGERS if n != name)
            raise RuntimeError(f"--logger {name}: this headgeom has no {builder.title} logger ({package} is "
                               f"missing); use --logger with the others ({others})")
        if package is not None:
            raise RuntimeError(f"--logger {name} needs the optional dependency {package}, which is not installed; "
                               f"install it with: {INSTALL[name]} (or leave {name} out of --logger)")
    return parsed


class Loggers:
    """A run's loggers called as one: ``jsonl`` with metrics.jsonl's keys, every other logger with
    the shared tags (:func:`headgeom.tags.tagged`)."""

    def __init__(self, jsonl: Logger, others: Sequence[Logger] = ()) -> None:
        self.jsonl, self.others = jsonl, list(others)

    @property
    def loggers(self) -> list[Logger]:
        return [self.jsonl, *self.others]

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        self.jsonl.log(step, scalars)
        if self.others:
            shared = tagged(scalars)
            for logger in self.others:
                logger.log(step, shared)

    def log_params(self, params: dict[str, Any]) -> None:
        for logger in self.loggers:
            logger.log_params(params)

    def log_figure(self, name: str, path: Path) -> None:
        for logger in self.loggers:
            logger.log_figure(name, path)

    def log_artifact(self, path: Path) -> None:
        for logger in self.loggers:
            logger.log_artifact(path)

    def close(self) -> None:
        errors = []
        for logger in self.loggers:  # every logger is closed, whichever fails
            try:
                logger.close()
            except Exception as err:  # noqa: BLE001 - re-raised below
                errors.append(err)
        if errors:
            raise errors[0]


def replay(logger: Logger, run_dir: Path, first_step: int) -> int:
    """Log to ``logger`` the metrics.jsonl lines it lacks: steps from its own ``first_step`` (the
    first one its record does not hold, after a killed session) up to the run's ``first_step``;
    the number of lines replayed. A logger without the attribute holds everything before."""
    since = getattr(logger, "first_step", first_step)
    records = [r for r in read_metrics(run_dir) if since <= r.step < first_step] if since < first_step else []
    for record in records:
        numbers = {key: record.number(key) for key in record.values}
        logger.log(record.step, tagged({k: v for k, v in numbers.items() if v is not None}))
    return len(records)


def open_loggers(names: str | Sequence[str], run_dir: str | Path, first_step: int,
                 params: dict[str, Any] | None = None) -> Loggers:
    """The loggers of a run in ``run_dir`` for ``TrainConfig.logger = names``: metrics.jsonl always
    (appended), plus each named tracker; ``first_step`` is the first step the run will log (0 for a
    new run, the checkpoint's step + 1 for a resumed one, which continues the MLflow and W&B runs
    RUN_DIR/loggers.json names). ``params`` (the resolved config) go to every logger at once."""
    parsed = check_logger(names)
    run_dir = Path(run_dir)
    stored = read_logger_runs(run_dir) if first_step > 0 else {}
    jsonl, _ = LOGGERS["jsonl"](run_dir, first_step, {})
    others: list[Logger] = []
    try:
        runs = dict(stored)
        for name in parsed[1:]:
            logger, entry = LOGGERS[name](run_dir, first_step, stored.get(name, {}))
            others.append(logger)
            if entry:
                runs[name] = entry
        if runs != stored or (first_step == 0 and (run_dir / "loggers.json").exists()):
            write_logger_runs(run_dir, runs)  # before anything is logged: a kill keeps the ids
        loggers = Loggers(jsonl, others)
        if params is not None:
            loggers.log_params(params)
        for logger in others:
            replay(logger, run_dir, first_step)
    except BaseException:
        for logger in (*others, jsonl):
            logger.close()
        raise
    return loggers

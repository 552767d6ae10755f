"""Where a training run's records go: ``metrics.jsonl`` always, and the trackers ``--logger`` names.

``TrainConfig.logger`` (``headgeom train --logger jsonl,tensorboard,mlflow,wandb``, a comma list)
names the loggers of a run; :class:`JsonlLogger` (``RUN_DIR/metrics.jsonl``, the record the rest of
headgeom reads: eval, tracking figures, the experiments) is always one of them. The others receive
the same numbers at the same steps under the shared tags of :mod:`headgeom.tags`
(``heff_ambient_mean_lambda_min`` -> ``headgeom/ambient/lambda_min``, ``loss`` -> ``train/loss``):

- ``tensorboard``: :class:`TensorBoardLogger`, scalars (float32) under ``RUN_DIR/tensorboard/``;
- ``mlflow``: :class:`headgeom.train.mlflow_logger.MlflowLogger`, a run in ``sqlite:///RUN_DIR/mlflow.db``
  (or ``$MLFLOW_TRACKING_URI``);
- ``wandb``: ``headgeom.train.wandb_logger.WandbLogger``, offline under ``RUN_DIR/wandb/`` unless
  W&B is configured otherwise.

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
:func:`check_logger` says which to install in one line before any work, and only the logger that
needs a package imports it.
"""
from __future__ import annotations

import errno
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from headgeom.io import json_safe
from headgeom.runs.metrics import read_metrics
from headgeom.tags import tagged

from .logger_runs import read_logger_runs, write_logger_runs

__all__ = ["INSTALL", "LOGGERS", "TENSORBOARD_INSTALL", "JsonlLogger", "Logger", "Loggers", "TensorBoardLogger",
           "check_logger", "open_loggers", "parse_loggers", "replay"]

LOGGERS = ("jsonl", "tensorboard", "mlflow", "wandb")  # jsonl is always written
INSTALL = {name: f'pip install -e ".[{name}]"' for name in LOGGERS[1:]}
TENSORBOARD_INSTALL = INSTALL["tensorboard"]
# the packages each logger imports (MLflow's own SQL store needs sqlalchemy and alembic)
_PACKAGES = {"tensorboard": ("tensorboard",), "mlflow": ("mlflow", "sqlalchemy", "alembic"),
             "wandb": ("wandb",)}


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


def _missing(name: str) -> str | None:
    """The first package logger ``name`` needs that is not installed, or None."""
    packages = _PACKAGES.get(name, ())
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if name == "mlflow" and uri.split(":", 1)[0] in ("http", "https", "databricks", "file"):
        packages = ("mlflow",)  # a tracking server or a file store: no local SQL store
    for package in packages:
        if importlib.util.find_spec(package) is None:
            return package
    if name == "wandb" and importlib.util.find_spec("headgeom.train.wandb_logger") is None:
        return "headgeom.train.wandb_logger"
    return None


def check_logger(names: str | Sequence[str]) -> tuple[str, ...]:
    """The loggers ``names`` names (:func:`parse_loggers`); raises ValueError for an unknown name and
    RuntimeError (one line naming the extra to install) when one's optional dependency is missing."""
    parsed = parse_loggers(names)
    for name in parsed:
        package = _missing(name)
        if package == "headgeom.train.wandb_logger":
            raise RuntimeError("--logger wandb: this headgeom has no W&B logger (headgeom.train.wandb_logger is "
                               "missing); use --logger jsonl,tensorboard or jsonl,mlflow")
        if package is not None:
            raise RuntimeError(f"--logger {name} needs the optional dependency {package}, which is not installed; "
                               f"install it with: {INSTALL[name]} (or leave {name} out of --logger)")
    return parsed


class JsonlLogger:
    """One JSON line ``{"step": step, **scalars}`` per call, appended to ``path`` and flushed;
    NaN becomes null and ±inf "inf"/"-inf" (headgeom.io's convention). Params, figures and
    artifacts are not its business (config.json, figures/ and checkpoints/ hold them).

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

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def log_figure(self, name: str, path: Path) -> None:
        pass

    def log_artifact(self, path: Path) -> None:
        pass

    def close(self) -> None:
        self._fh.close()


class TensorBoardLogger:
    """Every numeric entry of ``scalars`` as a TensorBoard scalar (float32) tagged by its name; the
    params as one text summary ``config`` (JSON) and the figures as images; no artifacts.

    ``purge_step``: the first step this writer will log; TensorBoard hides the events of earlier
    event files in ``log_dir`` from that step on (a resumed run rewrites them)."""

    def __init__(self, log_dir: str | Path, purge_step: int = 0) -> None:
        check_logger("tensorboard")
        # Imported here: tensorboard is an optional extra, needed only by this logger.
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(log_dir), purge_step=purge_step)
        self._step = purge_step

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        self._step = step
        for name, value in scalars.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(name, float(value), global_step=step)

    def log_params(self, params: dict[str, Any]) -> None:
        text = json.dumps(json_safe(params), indent=2, allow_nan=False)
        self._writer.add_text("config", "    " + text.replace("\n", "\n    "), global_step=self._step)

    def log_figure(self, name: str, path: Path) -> None:
        """The PNG file itself as an image summary (no decoding: its size is read from the header)."""
        from tensorboard.compat.proto.summary_pb2 import Summary  # the optional extra, as SummaryWriter

        data = Path(path).read_bytes()
        if data[:8] != b"\x89PNG\r\n\x1a\n":
            raise ValueError(f"{path} is not a PNG file; TensorBoard receives the run's PNG figures only")
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")  # IHDR
        image = Summary.Image(height=height, width=width, colorspace=4, encoded_image_string=data)
        self._writer.file_writer.add_summary(Summary(value=[Summary.Value(tag=name, image=image)]),
                                             global_step=self._step)

    def log_artifact(self, path: Path) -> None:
        pass

    def close(self) -> None:
        self._writer.close()  # flushes


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


def _open(name: str, run_dir: Path, first_step: int, stored: dict[str, Any]) -> tuple[Logger, dict[str, Any]]:
    """Logger ``name`` of the run in ``run_dir`` and what a resume needs to continue it (its
    loggers.json entry; {} for none). ``stored``: the entry a previous session kept."""
    if name == "tensorboard":
        return TensorBoardLogger(run_dir / "tensorboard", purge_step=first_step), {}
    if name == "mlflow":
        from .mlflow_logger import MlflowLogger  # imports mlflow, an optional extra

        mlflow = MlflowLogger(run_dir, first_step, stored.get("run_id"), stored.get("tracking_uri"))
        return mlflow, {"run_id": mlflow.run_id, "tracking_uri": mlflow.tracking_uri}
    if name == "wandb":
        from headgeom.train.wandb_logger import WandbLogger  # imports wandb, an optional extra

        wandb = WandbLogger(run_dir, first_step, stored.get("run_id"))
        return wandb, {"run_id": wandb.run_id}
    raise ValueError(f"unknown logger {name!r}")


def open_loggers(names: str | Sequence[str], run_dir: str | Path, first_step: int,
                 params: dict[str, Any] | None = None) -> Loggers:
    """The loggers of a run in ``run_dir`` for ``TrainConfig.logger = names``: metrics.jsonl always
    (appended), plus each named tracker; ``first_step`` is the first step the run will log (0 for a
    new run, the checkpoint's step + 1 for a resumed one, which continues the MLflow and W&B runs
    RUN_DIR/loggers.json names). ``params`` (the resolved config) go to every logger at once."""
    parsed = check_logger(names)
    run_dir = Path(run_dir)
    stored = read_logger_runs(run_dir) if first_step > 0 else {}
    jsonl = JsonlLogger(run_dir / "metrics.jsonl")
    others: list[Logger] = []
    try:
        runs = dict(stored)
        for name in parsed[1:]:
            logger, entry = _open(name, run_dir, first_step, stored.get(name, {}))
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

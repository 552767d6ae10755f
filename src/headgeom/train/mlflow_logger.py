"""``headgeom train --logger jsonl,mlflow``: the run's records as an MLflow run.

Where: ``$MLFLOW_TRACKING_URI`` when set, else a SQLite store in the run folder,
``sqlite:///RUN_DIR/mlflow.db``, whose artifacts go to ``RUN_DIR/mlartifacts/`` (``mlflow ui
--backend-store-uri sqlite:///RUN_DIR/mlflow.db`` shows it). The experiment is
``$MLFLOW_EXPERIMENT_NAME`` or ``headgeom``; the run is named after the run folder.

What: the resolved TrainConfig as params (nested options flattened with dots:
``backbone_options.width``), every scalar under its shared tag (:mod:`headgeom.tags`; MLflow metric
names allow ``/``) at its training step, the tracking figures as artifacts under their path in the
run folder (``figures/tracking/*.png``, shown as images), and the final checkpoint under
``checkpoints/``.

Resuming: the run id (and the store it lives in) is kept in ``RUN_DIR/loggers.json``, so a resumed
session continues the same MLflow run (``RUNNING`` again, ``FINISHED`` when the session closes).
MLflow params cannot change: the ones a resume changes (``max_steps``, ``logger``, ...) keep the
value of the run's first session (RUN_DIR/config.json holds the current ones). MLflow cannot delete
logged values either, so a resumed session records from the step after the last one the run holds
(:attr:`MlflowLogger.first_step`): steps a killed session logged past its last checkpoint (a SIGKILL
or a crash) are kept, not logged twice, and steps metrics.jsonl holds but the run lacks are replayed
from metrics.jsonl when the session opens (:func:`headgeom.train.loggers.open_loggers`). Each step
appears once; on CPU a resumed run repeats the killed steps bit for bit, so the values agree.
MLflow's SQL store keeps ±inf as ± the largest float.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunStatus
from mlflow.tracking import MlflowClient

__all__ = ["DEFAULT_EXPERIMENT", "MlflowLogger", "flatten_params", "open_mlflow"]

DEFAULT_EXPERIMENT = "headgeom"
_BATCH = 100  # MLflow's limit of params per log_batch call (metrics: 1000)


def flatten_params(params: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}, "c": [1, 2]}`` -> ``{"a.b": "1", "c": "[1, 2]"}``: MLflow params are strings."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if isinstance(value, dict) and value:
            out.update(flatten_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out


class MlflowLogger:
    """One MLflow run of a training run in ``run_dir`` (module docstring); ``run_id``: continue that
    run (a resumed session), ``tracking_uri``: the store it lives in (default: as for a new run)."""

    def __init__(self, run_dir: str | Path, first_step: int, run_id: str | None = None,
                 tracking_uri: str | None = None) -> None:
        run_dir = Path(run_dir).resolve()
        default = f"sqlite:///{run_dir / 'mlflow.db'}"
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default
        self.first_step = first_step
        self._client = MlflowClient(tracking_uri=self.tracking_uri)
        if run_id is not None:
            self._client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
            self.run_id = run_id
            self.first_step = self._first_unrecorded(first_step)
            return
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        experiment = self._client.get_experiment_by_name(name)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        elif self.tracking_uri == default:  # the run folder's own store keeps its artifacts beside it
            experiment_id = self._client.create_experiment(name, artifact_location=(run_dir / "mlartifacts").as_uri())
        else:
            experiment_id = self._client.create_experiment(name)
        run = self._client.create_run(experiment_id, run_name=run_dir.name,
                                      tags={"headgeom.run_dir": str(run_dir)})
        self.run_id = run.info.run_id

    def _first_unrecorded(self, first_step: int) -> int:
        """The step after the last one the run holds (a killed session may have logged steps past
        its checkpoint, or fewer than metrics.jsonl holds), or ``first_step`` for an empty run."""
        keys = self._client.get_run(self.run_id).data.metrics
        steps = [m.step for key in keys for m in self._client.get_metric_history(self.run_id, key)]
        return max(steps) + 1 if steps else 0

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        """Record ``scalars`` at ``step``; nothing before :attr:`first_step` (steps the run holds)."""
        if step < self.first_step:
            return
        now = int(time.time() * 1000)
        metrics = [Metric(name, float(value), now, step) for name, value in scalars.items()
                   if isinstance(value, (int, float)) and not isinstance(value, bool)]
        for i in range(0, len(metrics), 1000):
            self._client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def log_params(self, params: dict[str, Any]) -> None:
        """The flattened params the run does not hold yet (MLflow refuses to change one)."""
        held = self._client.get_run(self.run_id).data.params
        new = [Param(k, v) for k, v in flatten_params(params).items() if k not in held]
        for i in range(0, len(new), _BATCH):
            self._client.log_batch(self.run_id, params=new[i:i + _BATCH])

    def log_figure(self, name: str, path: Path) -> None:
        folder = str(Path(name).parent)
        self._client.log_artifact(self.run_id, str(path), artifact_path=None if folder == "." else folder)

    def log_artifact(self, path: Path) -> None:
        self._client.log_artifact(self.run_id, str(path), artifact_path=Path(path).parent.name or None)

    def close(self) -> None:
        self._client.set_terminated(self.run_id, RunStatus.to_string(RunStatus.FINISHED))


def open_mlflow(run_dir: Path, first_step: int, stored: dict[str, Any]) -> tuple[MlflowLogger, dict[str, Any]]:
    """The MLflow run of ``run_dir``: the one loggers.json keeps (``stored``, a resumed run) or a new
    one; its loggers.json entry (run id and store) for the next session."""
    logger = MlflowLogger(run_dir, first_step, stored.get("run_id"), stored.get("tracking_uri"))
    return logger, {"run_id": logger.run_id, "tracking_uri": logger.tracking_uri}

"""``RUN_DIR/loggers.json``: the external runs (MLflow, W&B) a training run logs to, so that a
resumed run continues them instead of starting new ones.

    {"mlflow": {"run_id": "3f2a...", "tracking_uri": "sqlite:////abs/RUN_DIR/mlflow.db"},
     "wandb": {"run_id": "k2x9..."}}

Written atomically (:func:`headgeom.io.atomic_write_json`) when a session opens its loggers,
before anything is logged, so a run killed at any point keeps the ids; read as plain JSON (a
file that is not an object of objects is an error naming it).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headgeom.io import atomic_write_json

__all__ = ["LOGGER_RUNS", "read_logger_runs", "write_logger_runs"]

LOGGER_RUNS = "loggers.json"


def read_logger_runs(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """The stored ``{logger: {"run_id": ..., ...}}`` of ``run_dir`` ({} when none was written)."""
    path = Path(run_dir) / LOGGER_RUNS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); it holds the MLflow/W&B run ids of the run: "
                         f"repair it or delete it (the next session then starts new external runs)") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{path} must hold a JSON object {{logger: {{\"run_id\": ...}}}}; got {data!r:.80}")
    return data


def write_logger_runs(run_dir: str | Path, runs: dict[str, dict[str, Any]]) -> Path:
    """Store ``runs`` as ``run_dir/loggers.json`` (atomically)."""
    return atomic_write_json(Path(run_dir) / LOGGER_RUNS, runs)

"""``RUN_DIR/metrics.jsonl``: the record every training run writes (``--logger jsonl``, always on).

The rest of headgeom reads it (eval, the tracking figures, the experiments) through
:func:`headgeom.runs.metrics.read_metrics`; its keys are the on-disk schema of
:mod:`headgeom.tracking.record`, not the shared tags the other loggers receive.
"""
from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

from headgeom.io import json_safe

__all__ = ["JsonlLogger", "open_jsonl"]


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


def open_jsonl(run_dir: Path, first_step: int, stored: dict[str, Any]) -> tuple[JsonlLogger, dict[str, Any]]:
    """The run's ``metrics.jsonl``, appended to (the loop drops the lines after the checkpoint it
    resumes from before it opens the loggers); nothing to keep in loggers.json."""
    return JsonlLogger(Path(run_dir) / "metrics.jsonl"), {}

"""``headgeom train --logger jsonl,tensorboard``: the run's records as TensorBoard event files.

Where: ``RUN_DIR/tensorboard/`` (``tensorboard --logdir RUN_DIR/tensorboard``). What: every scalar
under its shared tag (:mod:`headgeom.tags`) as float32 at its training step, the resolved
TrainConfig as the text summary ``config``, the tracking figures as images; TensorBoard has no
artifacts, so the final checkpoint is not sent.

Resuming: a new event file is opened with ``purge_step`` = the first step this session writes, so
TensorBoard's reader hides the earlier files' events from that step on and each step shows once.

tensorboard is an optional dependency (``pip install -e ".[tensorboard]"``) imported only by this
module; :func:`headgeom.train.loggers.check_logger` names the extra before any work.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard import SummaryWriter

from headgeom.io import json_safe

__all__ = ["TensorBoardLogger", "open_tensorboard"]


class TensorBoardLogger:
    """Every numeric entry of ``scalars`` as a TensorBoard scalar (float32) tagged by its name; the
    params as one text summary ``config`` (JSON) and the figures as images; no artifacts.

    ``purge_step``: the first step this writer will log; TensorBoard hides the events of earlier
    event files in ``log_dir`` from that step on (a resumed run rewrites them)."""

    def __init__(self, log_dir: str | Path, purge_step: int = 0) -> None:
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


def open_tensorboard(run_dir: Path, first_step: int, stored: dict[str, Any]) -> tuple[TensorBoardLogger, dict[str, Any]]:
    """The writer of ``RUN_DIR/tensorboard/`` purging from ``first_step``; nothing to keep in loggers.json."""
    return TensorBoardLogger(Path(run_dir) / "tensorboard", purge_step=first_step), {}

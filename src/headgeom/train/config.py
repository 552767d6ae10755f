"""The resolved settings of one pre-training run, as a frozen dataclass.

A run directory's ``config.json`` holds ``dataclasses.asdict(config)``; :meth:`TrainConfig.from_dict`
rebuilds it, so a run can be resumed or re-run from its own record (house rule 8, docs/design.md#house-rules).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from headgeom.heads.offset import check_collapse
from headgeom.runs.trained import RunSettings

from .loggers import parse_loggers
from .optim import OPTIMIZERS
from .schedules import SCHEDULES

__all__ = ["RESUMABLE_CHANGES", "TrainConfig"]

# Fields a resumed run may change: they decide where the run stops and how often it records,
# never the update sequence (the schedule spans ``epochs``, not ``max_steps``).
RESUMABLE_CHANGES = frozenset({"max_steps", "checkpoint_every", "track_every", "track_reading",
                               "track_block_samples", "log_every", "keep_every_epochs", "progress",
                               "device", "logger"})


@dataclass(frozen=True)
class TrainConfig(RunSettings):
    """Everything that decides a pre-training run.

    Model and data (``method``, ``backbone``, ``backbone_options``, ``head``, ``predictor``,
    ``pseudo_collapse``, ``collapse``, ``method_options``, ``data``, ``data_dir``, ``data_options``,
    ``image_size``, ``normalize``, ``seed``): the fields of :class:`RunSettings`, declared there once
    (what a run trained on what, as every reader of its config.json needs it); the fields below are
    how it trained.

    Optimisation: ``epochs`` (the schedule spans ``epochs × steps_per_epoch`` updates),
    ``max_steps`` (stop after this many updates in total, e.g. to cap or split a run; the schedule
    is unchanged), ``batch_size`` (global; last partial batch dropped), ``optimizer`` (sgd, adam,
    adamw, lars), ``lr`` (peak, absolute), ``momentum``, ``weight_decay``, ``betas`` (Adam),
    ``lars_eta``, ``warmup_epochs`` (linear warm-up, may be fractional), ``schedule`` (cosine,
    constant), ``final_lr``.

    Records: ``log_every`` (metrics.jsonl line every k steps), ``track_every`` (call the tracker
    every k steps; 0 = never), ``checkpoint_every`` (checkpoints/last.pt every k steps besides every
    epoch; 0 = epochs only), ``keep_every_epochs`` (also keep checkpoints/epoch_XXXX.pt every k
    epochs; 0 = none), ``probe_size`` (fixed probe batch handed to the tracker), and for
    ``headgeom train --track-every`` the tracker's ``track_reading`` (ambient, tangential) and
    ``track_block_samples`` (H_eff blocks of that many probe samples; None = all), ``logger``
    (the loggers, a tuple starting with ``jsonl``, metrics.jsonl, which is always written; also
    ``tensorboard``, ``mlflow``, ``wandb``: headgeom.train.loggers; a comma string
    ``"tensorboard,mlflow"`` or a stored run's single name ``"tensorboard"`` is read as that tuple).

    Device: ``device`` ("auto" = cuda when available), ``bf16`` (autocast on CUDA only),
    ``channels_last`` (on CUDA only: :func:`~.setup.channels_last_pays`), ``progress``
    (tqdm bar), ``sync_bn`` (under torchrun or srun with more than one process, BatchNorm statistics
    over the global batch, as one process would compute them; no effect on one process or without
    BatchNorm; headgeom.train.ddp).
    """

    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 256
    optimizer: str = "sgd"
    lr: float = 0.06
    momentum: float = 0.9
    weight_decay: float = 5e-4
    betas: tuple[float, float] = (0.9, 0.999)
    lars_eta: float = 0.001
    warmup_epochs: float = 0.0
    schedule: str = "cosine"
    final_lr: float = 0.0
    log_every: int = 1
    track_every: int = 0
    checkpoint_every: int = 0
    keep_every_epochs: int = 0
    probe_size: int = 256
    track_reading: str = "ambient"
    track_block_samples: int | None = 32
    logger: tuple[str, ...] = ("jsonl",)
    device: str = "auto"
    bf16: bool = True
    channels_last: bool = True
    progress: bool = True
    sync_bn: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        positive = {"epochs": self.epochs, "batch_size": self.batch_size, "probe_size": self.probe_size}
        nonneg = {"log_every": self.log_every, "track_every": self.track_every,
                  "checkpoint_every": self.checkpoint_every, "keep_every_epochs": self.keep_every_epochs}
        for name, v in positive.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"TrainConfig.{name} must be a positive int, got {v!r}")
        for name, v in nonneg.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"TrainConfig.{name} must be an int >= 0, got {v!r}")
        if self.log_every < 1:
            raise ValueError(f"TrainConfig.log_every must be >= 1, got {self.log_every}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 1):
            raise ValueError(f"TrainConfig.max_steps must be None or a positive int, got {self.max_steps!r}")
        if self.track_block_samples is not None and (not isinstance(self.track_block_samples, int)
                                                     or self.track_block_samples < 1):
            raise ValueError(f"TrainConfig.track_block_samples must be None or a positive int, "
                             f"got {self.track_block_samples!r}")
        if self.image_size is not None and (not isinstance(self.image_size, int) or self.image_size < 1):
            raise ValueError(f"TrainConfig.image_size must be None or a positive int, got {self.image_size!r}")
        check_collapse(self.collapse)
        if not isinstance(self.sync_bn, bool):
            raise ValueError(f"TrainConfig.sync_bn must be True or False, got {self.sync_bn!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {OPTIMIZERS}")
        object.__setattr__(self, "logger", parse_loggers(self.logger))
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {SCHEDULES}")
        for name in ("lr", "momentum", "weight_decay", "warmup_epochs", "final_lr", "lars_eta"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"TrainConfig.{name} must be a finite number >= 0, got {v!r}")
        if self.warmup_epochs > self.epochs:
            raise ValueError(f"warmup_epochs={self.warmup_epochs} exceeds epochs={self.epochs}")
        if self.device != "auto" and not self.device.split(":")[0] in ("cpu", "cuda", "mps"):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda[:i]' or 'mps', got {self.device!r}")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (tuples become lists)."""
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        d["logger"] = list(self.logger)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown TrainConfig field(s) {unknown}; known: {sorted(names)}")
        return cls(**d)

    def run_settings(self) -> RunSettings:
        """What this run trains on what, as the run layer reads it back from config.json: the one
        place its method is built (:meth:`RunSettings.build_method`) and its normalisation derived
        (:meth:`RunSettings.normalisation`), for training and for every reader of the run alike."""
        return RunSettings.from_config(self.to_dict())

    def differences(self, other: TrainConfig) -> dict[str, tuple[Any, Any]]:
        """``{field: (self value, other value)}`` for every field that differs."""
        a, b = self.to_dict(), other.to_dict()
        return {k: (a[k], b[k]) for k in a if a[k] != b[k]}

"""Continuing a run from its folder: whether ``config`` may continue the stored run, its state
restored from ``checkpoints/last.pt`` into a fresh :class:`~.setup.Setup`, and its metrics.jsonl
cut back to the checkpoint's step (the lines a killed session wrote after it are written again).

On CPU a run stopped and resumed ends bit-identical to an uninterrupted one: the method, optimizer,
both generators and torch's RNG are restored (a CUDA augmentation generator cannot be restored on
the CPU, or back: it is reseeded then, with a warning).
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch

from headgeom.io import atomic_write_bytes
from headgeom.runs.metrics import read_metrics

from .checkpoint import load_checkpoint
from .config import RESUMABLE_CHANGES, TrainConfig
from .setup import Setup

__all__ = ["check_resumable", "keep_metrics", "last_loss", "restore", "stored_config"]

_RESTORE_CONFIG = "restore it, or start the run again with --overwrite"


def stored_config(path: Path) -> dict[str, Any]:
    """The settings a run folder's config.json (``path``) stores, checked to build a TrainConfig;
    raises ValueError naming the file when it is damaged (not JSON, no "config" object, settings
    headgeom cannot use)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"--resume: {path} is damaged (not JSON: {err}); {_RESTORE_CONFIG}") from err
    stored = record.get("config") if isinstance(record, dict) else None
    if not isinstance(stored, dict):
        raise ValueError(f"--resume: {path} is damaged: it holds no \"config\" object with the run's settings; "
                         f"{_RESTORE_CONFIG}")
    try:
        TrainConfig.from_dict(stored)
    except (ValueError, TypeError) as err:
        raise ValueError(f"--resume: {path} holds settings headgeom cannot use ({err}); {_RESTORE_CONFIG}") from err
    return stored


def check_resumable(out: Path, config: TrainConfig) -> None:
    """Raise when ``config`` may not continue the run stored in ``out``."""
    cfg_path = out / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"--resume: {cfg_path} not found; {out} is not a run directory "
                                f"written by `headgeom train`")
    stored = TrainConfig.from_dict(stored_config(cfg_path))
    diff = {k: v for k, v in stored.differences(config).items() if k not in RESUMABLE_CHANGES}
    if diff:
        raise ValueError(f"--resume: the settings differ from the stored run in {out}: "
                         + ", ".join(f"{k}: stored {a!r}, given {b!r}" for k, (a, b) in diff.items())
                         + f"; only {sorted(RESUMABLE_CHANGES)} may change when resuming")


def restore(last: Path, s: Setup, config: TrainConfig, tracker: Any) -> int:
    """Load checkpoint ``last`` into ``s`` (and into ``tracker`` when it has ``load_state_dict``
    and the checkpoint holds its state); returns the step it was written at."""
    ck = load_checkpoint(last, map_location=s.device)
    _check_same_run(last, ck.get("config"), config)
    s.method.load_state_dict(ck["method"])
    s.optimizer.load_state_dict(ck["optimizer"])
    step = int(ck["step"])
    s.data_gen.set_state(ck["data_generator"].cpu())
    if ck.get("aug_device", s.device.type) == s.device.type:
        s.aug_gen.set_state(ck["aug_generator"].cpu())
    else:  # a CUDA generator state does not fit a CPU generator (and vice versa)
        s.aug_gen.manual_seed(config.seed + 1 + step)
        warnings.warn(f"resuming a {ck['aug_device']} run on {s.device.type}: the augmentation "
                      f"generator is reseeded (seed {config.seed + 1 + step}), so the run continues "
                      f"correctly but not bit-identically to an uninterrupted one", stacklevel=3)
    torch.set_rng_state(ck["torch_rng"].cpu())
    if s.on_cuda and ck.get("cuda_rng") is not None:
        torch.cuda.set_rng_state(ck["cuda_rng"].cpu(), s.device)
    if ck.get("tracker") is not None and hasattr(tracker, "load_state_dict"):
        tracker.load_state_dict(ck["tracker"])  # e.g. the update-size series continues
    return step


def _check_same_run(last: Path, saved: Any, config: TrainConfig) -> None:
    """Raise when the checkpoint was written with other settings than the run's config.json holds
    (a config.json changed or damaged since: resuming would continue another run, or fail to load)."""
    if not isinstance(saved, dict):  # a checkpoint without its settings: nothing to compare
        return
    given = config.to_dict()
    diff = {k: (saved[k], v) for k, v in given.items()
            if k in saved and k not in RESUMABLE_CHANGES and saved[k] != v}
    if diff:
        stored = last.parent.parent / "config.json"  # checkpoints/last.pt of the run folder
        said = ", ".join(f"{k}: checkpoint {a!r}, config.json {b!r}" for k, (a, b) in diff.items())
        raise ValueError(f"--resume: {last} was written with other settings than {stored} holds ({said}): "
                         f"config.json was changed or damaged since; {_RESTORE_CONFIG}")


def keep_metrics(path: Path, upto_step: int) -> bool:
    """Rewrite ``path`` with its lines of ``step <= upto_step`` only (-1: none), atomically; returns
    whether it dropped a torn last line (a file not ending in a newline: a session killed, or a disk
    filled, while it wrote that line, always the line of a step after its last checkpoint)."""
    torn = path.is_file() and path.stat().st_size > 0 and not _ends_in_newline(path)
    kept = [rec.to_line() for rec in read_metrics(path) if rec.step <= upto_step]
    atomic_write_bytes(path, "".join(line + "\n" for line in kept).encode())
    return torn


def _ends_in_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) == b"\n"


def last_loss(path: Path) -> float:
    """The loss of the last metrics line that has one (NaN when none)."""
    losses = [rec.values["loss"] for rec in read_metrics(path) if isinstance(rec.values.get("loss"), float)]
    return losses[-1] if losses else float("nan")

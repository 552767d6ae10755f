"""What a training run writes besides its metrics: config.json when a session starts, checkpoints
while it runs, done.json when it ends, and stopped.json instead when a non-finite loss or parameter
stops it (house rule 10: stop with a clear message; the last good checkpoint is kept).

Only the main process writes (:class:`~.ddp.DistContext`); every file is written atomically.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from headgeom.io import atomic_write_json
from headgeom.runs.provenance import environment

from .checkpoint import CheckpointWriter, load_checkpoint
from .config import TrainConfig
from .setup import Setup

__all__ = ["NonFiniteLossError", "begin_records", "checkpoint_state", "last_checkpoint", "save", "stop",
           "write_done"]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or ±inf; the last good checkpoint was kept."""


def last_checkpoint(out: Path) -> Path:
    """``out/checkpoints/last.pt``: the checkpoint a run resumes from."""
    return out / "checkpoints" / "last.pt"


def begin_records(out: Path, config: TrainConfig, s: Setup, step: int, resume: bool) -> None:
    """A session's start: the previous session's done.json/stopped.json removed and config.json
    (the resolved config, the schedule's lengths, where it runs, provenance) written."""
    (out / "done.json").unlink(missing_ok=True)
    (out / "stopped.json").unlink(missing_ok=True)
    atomic_write_json(out / "config.json", {
        "config": config.to_dict(), "steps_per_epoch": s.steps_per_epoch, "total_steps": s.total,
        "stop_step": s.stop, "warmup_steps": s.warmup, "n_train": s.n, "device": str(s.device),
        "processes": s.ctx.world, "resumed_from_step": step if resume else None, **environment()})


def checkpoint_state(step: int, s: Setup, config: TrainConfig, tracker: Any,
                     epoch_start_state: torch.Tensor | None) -> dict[str, Any]:
    """The checkpoint after ``step`` updates (the keys of :mod:`.checkpoint`); ``epoch_start_state``:
    the data generator's state at the start of the current epoch, which a resume replays."""
    return {"step": step, "epoch": step // s.steps_per_epoch, "method": s.method.state_dict(),
            "optimizer": s.optimizer.state_dict(),
            # at an epoch boundary the next epoch starts from the current state
            "data_generator": s.data_gen.get_state() if step % s.steps_per_epoch == 0 else epoch_start_state,
            "aug_generator": s.aug_gen.get_state(), "aug_device": s.device.type,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(s.device) if s.on_cuda else None,
            "config": config.to_dict(),
            "tracker": tracker.state_dict() if hasattr(tracker, "state_dict") else None}


def save(out: Path, step: int, s: Setup, config: TrainConfig, tracker: Any, writer: CheckpointWriter,
         epoch_start_state: torch.Tensor | None) -> None:
    """checkpoints/last.pt after ``step`` (and epoch_XXXX.pt at a kept epoch), written on the main
    process by ``writer``; stops the run (:func:`stop`) instead when a parameter is not finite."""
    last = last_checkpoint(out)
    bad = [name for name, p in s.method.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        writer.wait()
        stop(out, step, float("nan"), f"non-finite parameters {bad[:3]} after step {step}", last)
    state = checkpoint_state(step, s, config, tracker, epoch_start_state)
    e = step // s.steps_per_epoch
    keep = step % s.steps_per_epoch == 0 and config.keep_every_epochs and e % config.keep_every_epochs == 0
    if s.ctx.main:
        writer.save(last, state, (out / "checkpoints" / f"epoch_{e:04d}.pt",) if keep else ())


def stop(out: Path, step: int, loss_value: float, what: str, last: Path) -> None:
    """Record why the run stopped (stopped.json) and raise :class:`NonFiniteLossError`."""
    kept_step = int(load_checkpoint(last)["step"]) if last.exists() else None
    kept = (f"the last good checkpoint {last} (step {kept_step}) is kept" if kept_step is not None
            else "no checkpoint had been written yet")
    if int(os.environ.get("RANK", "0")) == 0:
        atomic_write_json(out / "stopped.json", {"reason": what, "step": step, "loss": loss_value,
                                                 "checkpoint": str(last) if last.exists() else None,
                                                 "checkpoint_step": kept_step})
    raise NonFiniteLossError(f"{what}; the run stopped and {kept}. Lower --lr, add --warmup-epochs, "
                             f"or check the method's options, then start a new run")


def write_done(out: Path, s: Setup, step: int, start_step: int, loss_value: float, seconds: float,
               images_per_s: float | None) -> dict[str, Any]:
    """done.json (on the main process) after a session that ended at ``step``; returns its dict."""
    done = {"step": step, "epoch": step / s.steps_per_epoch, "complete": step >= s.total,
            "final_loss": loss_value, "steps_this_session": step - start_step, "seconds": seconds,
            "images_per_s": images_per_s, "checkpoint": str(last_checkpoint(out)), "processes": s.ctx.world}
    if s.ctx.main:
        atomic_write_json(out / "done.json", done)
    return done

"""The pre-training loop: short and flat, nanoGPT style.

Data stay uint8 on the device; each epoch's order is a permutation from a seeded CPU generator;
views come from ``method.recipe(size)`` on the device with their own generator; forward,
backward, step, ``method.on_step_end``; the schedule is a pure function of the step. The run
directory ``out_dir`` holds::

    config.json        resolved TrainConfig, git revision, library versions, steps per epoch
    metrics.jsonl      {"step", "epoch", "loss", "lr", <method logs>} every log_every steps, and
                       the tracker's metrics every track_every steps (step 0 = initialisation);
                       every line of a step also carries grad_norm_head and grad_norm_backbone,
                       the parameter-gradient norms that step applied (.grad_norms)
    tensorboard/       the same records as TensorBoard scalars, with logger="tensorboard" (.loggers)
    checkpoints/       last.pt (every epoch, every checkpoint_every steps, at the stop), epoch_XXXX.pt
    done.json          at the end: steps, epochs, final loss, seconds, images/s
    stopped.json       instead, when a non-finite loss stopped the run

The loss is read back from the device only at steps that log, track or checkpoint (so a GPU runs
ahead in between); a non-finite loss is caught there, before anything is saved.

On CPU a run stopped (``max_steps``) and resumed ends bit-identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from headgeom.device import resolve_device
from headgeom.io import atomic_write_bytes, atomic_write_json
from headgeom.runs.folder import claim_run_folder
from headgeom.runs.metrics import read_metrics
from headgeom.runs.provenance import environment

from .checkpoint import CheckpointWriter, load_checkpoint
from .config import RESUMABLE_CHANGES, TrainConfig
from .ddp import init_distributed, job_layout
from .grad_norms import gradient_groups, gradient_norms
from .loggers import check_logger, open_loggers
from .optim import build_optimizer
from .progress import paused
from .schedules import lr_at

__all__ = ["NonFiniteLossError", "Tracker", "build_method_from_config", "resolve_device", "train"]

Tracker = Callable[[int, torch.nn.Module, list[torch.Tensor]], dict[str, float]]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or ±inf; the last good checkpoint was kept."""


def build_method_from_config(config: TrainConfig) -> torch.nn.Module:
    """The config's method, backbone (+ options) and heads at a fresh initialisation, built as a
    reader of the run rebuilds it (:meth:`headgeom.runs.trained.RunSettings.build_method`)."""
    return config.run_settings().build_method()


def _read_metrics(path: Path, upto_step: int) -> list[str]:
    """Lines of ``path`` with ``step <= upto_step`` (a torn last line from a kill is dropped)."""
    return [rec.to_line() for rec in read_metrics(path) if rec.step <= upto_step]


def _probe_views(config: TrainConfig, images: torch.Tensor, recipe: Any, device: torch.device
                 ) -> list[torch.Tensor]:
    """A fixed probe batch for the tracker: ``probe_size`` images chosen and augmented once
    from generators seeded apart from the training ones (so tracking never moves the run)."""
    pick = torch.Generator().manual_seed(config.seed + 7919)
    idx = torch.randperm(images.shape[0], generator=pick)[: config.probe_size]
    gen = torch.Generator(device=device).manual_seed(config.seed + 104729)
    return list(recipe(images[idx.to(device)].float().div_(255), gen))


def train(config: TrainConfig, out_dir: str | Path, resume: bool = False, tracker: Tracker | None = None,
          build_method: Callable[[TrainConfig], torch.nn.Module] | None = None, *,
          resume_or_start: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Pre-train ``build_method(config)`` on ``config.data`` into ``out_dir``; returns done.json's dict.

    ``out_dir`` is locked while the run writes it (:mod:`headgeom.runs`). ``resume=True`` continues
    from ``out_dir/checkpoints/last.pt`` and refuses when the run never wrote one, unless
    ``resume_or_start`` (which starts it from step 0 then); the stored config must match ``config``
    except for ``RESUMABLE_CHANGES``. A folder in which nothing was trained is started again in
    place; ``overwrite=True`` replaces a trained one (see :mod:`headgeom.runs.folder`).
    ``tracker(step, method, probe_views) -> {name: float}`` runs every ``config.track_every`` steps
    under a forked RNG; it must not change the method's parameters or buffers. A tracker with
    ``state_dict``/``load_state_dict`` has its state checkpointed and restored on resume.

    ``build_method(config) -> method`` defaults to :func:`build_method_from_config`; the method
    follows headgeom.methods' protocol (``forward(views) -> {"loss", "logs"}``, ``recipe``,
    ``param_groups``, ``on_step_end``). A param group flagged ``fixed_lr`` keeps the peak rate
    (SimSiam's ``--fix-pred-lr``); the others follow the schedule.

    Under torchrun (``WORLD_SIZE`` > 1) it joins the job and trains with DDP (see :mod:`.ddp`);
    only rank 0 writes files.

    Raises:
        NonFiniteLossError: NaN/inf loss (or parameters); checkpoints/last.pt stays the last good one.
        FileExistsError: ``out_dir`` already holds a trained run and neither resume nor overwrite is set.
        ValueError: ``resume`` with nothing to resume, or settings that differ from the stored run's.
        RunLockedError: another process is writing ``out_dir``.
    """
    out = Path(out_dir)
    check_logger(config.logger)  # a missing optional writer fails now, before the folder is touched
    layout = job_layout(os.environ)  # torchrun's or srun's ranks: only rank 0 writes
    with claim_run_folder(out, resume=resume, resume_or_start=resume_or_start, overwrite=overwrite,
                          writer=layout is None or int(layout["rank"]) == 0) as start:
        if start.from_checkpoint:
            _check_resumable(out, config)
        return _train(config, out, start.from_checkpoint, tracker, build_method)


def _train(config: TrainConfig, out: Path, resume: bool, tracker: Tracker | None,
           build_method: Callable[[TrainConfig], torch.nn.Module] | None) -> dict[str, Any]:
    """:func:`train` in its claimed folder; ``resume``: continue from checkpoints/last.pt."""
    from headgeom.data import load_dataset

    ckpt_dir, last = out / "checkpoints", out / "checkpoints" / "last.pt"
    metrics_path = out / "metrics.jsonl"
    device = resolve_device(config.device)
    ctx = init_distributed(device)
    device = ctx.device(device)
    on_cuda = device.type == "cuda"
    ctx.barrier()  # every process has checked before rank 0 writes

    data = load_dataset(config.data, "train", config.data_dir, **config.data_options)
    n, B = len(data), config.batch_size
    steps_per_epoch = n // B
    if steps_per_epoch == 0:
        raise ValueError(f"batch_size={B} exceeds the {n} training images of {config.data!r}; "
                         f"use --batch-size <= {n}")
    if B % ctx.world:
        raise ValueError(f"batch_size={B} (global) must be divisible by the {ctx.world} processes")
    total = config.epochs * steps_per_epoch  # the schedule's length
    stop = min(total, config.max_steps or total)
    warmup = round(config.warmup_epochs * steps_per_epoch)
    images = data.images.to(device)
    size = config.image_size or data.image_size[0]

    torch.manual_seed(config.seed)  # parameter initialisation
    method = (build_method or build_method_from_config)(config).to(device)
    memory_format = torch.channels_last if (on_cuda and config.channels_last) else torch.contiguous_format
    method = method.to(memory_format=memory_format)
    recipe = method.recipe(size)
    if getattr(recipe, "mean", None) is None:  # the run's normalisation, as its readers derive it
        mean, std = config.run_settings().normalisation(dataset=data)
        if mean is not None:
            recipe = dataclasses.replace(recipe, mean=mean, std=std)
    optimizer = build_optimizer(config.optimizer, method.param_groups(config.weight_decay), config.lr,
                                config.momentum, config.weight_decay, config.betas, config.lars_eta)
    data_gen = torch.Generator().manual_seed(config.seed)
    aug_gen = torch.Generator(device=device).manual_seed(config.seed + 1)
    probe = _probe_views(config, images, recipe, device) if tracker is not None else []
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if (on_cuda and config.bf16)
                else contextlib.nullcontext())

    step, resumed = 0, resume and last.exists()
    if resumed:
        ck = load_checkpoint(last, map_location=device)
        method.load_state_dict(ck["method"])
        optimizer.load_state_dict(ck["optimizer"])
        step = int(ck["step"])
        data_gen.set_state(ck["data_generator"].cpu())
        if ck.get("aug_device", device.type) == device.type:
            aug_gen.set_state(ck["aug_generator"].cpu())
        else:  # a CUDA generator state does not fit a CPU generator (and vice versa)
            aug_gen.manual_seed(config.seed + 1 + step)
            warnings.warn(f"resuming a {ck['aug_device']} run on {device.type}: the augmentation "
                          f"generator is reseeded (seed {config.seed + 1 + step}), so the run continues "
                          f"correctly but not bit-identically to an uninterrupted one", stacklevel=2)
        torch.set_rng_state(ck["torch_rng"].cpu())
        if on_cuda and ck.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(ck["cuda_rng"].cpu(), device)
        if ck.get("tracker") is not None and hasattr(tracker, "load_state_dict"):
            tracker.load_state_dict(ck["tracker"])  # e.g. the update-size series continues
    if ctx.main:
        kept = _read_metrics(metrics_path, step if resumed else -1)  # drop lines after the checkpoint
        atomic_write_bytes(metrics_path, "".join(line + "\n" for line in kept).encode())
        (out / "done.json").unlink(missing_ok=True)
        (out / "stopped.json").unlink(missing_ok=True)
        atomic_write_json(out / "config.json", {
            "config": config.to_dict(), "steps_per_epoch": steps_per_epoch, "total_steps": total,
            "stop_step": stop, "warmup_steps": warmup, "n_train": n, "device": str(device),
            "processes": ctx.world, "resumed_from_step": step if resume else None, **environment()})
    model = ctx.wrap(method, device, sync_bn=config.sync_bn)
    grad_groups = gradient_groups(method) if ctx.main else None  # rank 0 records (.grad_norms)
    writer = CheckpointWriter()

    def checkpoint(epoch_start_state: torch.Tensor) -> None:
        bad = [name for name, p in method.named_parameters() if not torch.isfinite(p).all()]
        if bad:
            writer.wait()
            _stop(out, step, float("nan"), f"non-finite parameters {bad[:3]} after step {step}", last)
        state = {"step": step, "epoch": step // steps_per_epoch, "method": method.state_dict(),
                 "optimizer": optimizer.state_dict(),
                 # at an epoch boundary the next epoch starts from the current state
                 "data_generator": data_gen.get_state() if step % steps_per_epoch == 0 else epoch_start_state,
                 "aug_generator": aug_gen.get_state(), "aug_device": device.type,
                 "torch_rng": torch.get_rng_state(),
                 "cuda_rng": torch.cuda.get_rng_state(device) if on_cuda else None,
                 "config": config.to_dict(),
                 "tracker": tracker.state_dict() if hasattr(tracker, "state_dict") else None}
        e = step // steps_per_epoch
        keep = step % steps_per_epoch == 0 and config.keep_every_epochs and e % config.keep_every_epochs == 0
        if ctx.main:
            writer.save(last, state, (ckpt_dir / f"epoch_{e:04d}.pt",) if keep else ())

    from tqdm import tqdm
    bar = tqdm(total=stop, initial=step, disable=not (config.progress and ctx.main), unit="step",
               dynamic_ncols=True)
    log = open_loggers(config.logger, out, first_step=step + 1 if resumed else 0) if ctx.main else None
    tracking = tracker is not None and config.track_every > 0  # same on every process
    tracker = tracker if ctx.main else None
    method.train()
    if tracker is not None and config.track_every and step == 0:
        with paused(bar, "tracking geometry at step 0"):
            log.log(0, _track(tracker, step, method, probe, device))
    t0, start_step, perm, epoch_state = time.perf_counter(), step, None, None
    loss_value = _last_loss(metrics_path) if resumed and ctx.main else float("nan")
    t_warm: float | None = None
    warm_step = step
    try:
        while step < stop:
            pos = step % steps_per_epoch
            if pos == 0 or perm is None:  # new epoch, or resumed mid-epoch from its start state
                epoch_state = data_gen.get_state()
                perm = torch.randperm(n, generator=data_gen)
            idx = perm[pos * B:(pos + 1) * B].to(device)
            views = recipe(images[idx].float().div_(255), aug_gen)
            views = [v.contiguous(memory_format=memory_format) for v in ctx.shard(list(views))]
            lr = lr_at(config.schedule, step, total, config.lr, warmup, config.final_lr)
            for group in optimizer.param_groups:
                group["lr"] = config.lr if group.get("fixed_lr") else lr
            with autocast:
                result = model(views)
            loss = result["loss"]
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if hasattr(method, "before_optimizer_step"):  # e.g. DINO's freeze_last_layer
                method.before_optimizer_step(step, step // steps_per_epoch)
            log_now = (step + 1) % config.log_every == 0 or step + 1 == stop
            track_now = tracking and (step + 1) % config.track_every == 0
            # the gradient this step applies, on the steps that write a line; tensors until the
            # record reads them (after the loss sync), so no extra host-device sync
            grads = gradient_norms(grad_groups) if grad_groups is not None and (log_now or track_now) else {}
            optimizer.step()
            method.on_step_end(step, total)  # index of the update just taken, 0-based
            step += 1
            save_now = (step % steps_per_epoch == 0 or step == stop
                        or (config.checkpoint_every > 0 and step % config.checkpoint_every == 0))
            if log_now or track_now or save_now:
                # The only host-device sync of a step, so a GPU runs ahead between records; the
                # same on every process (a collective), so all stop together. Nothing is saved
                # after a non-finite loss, so the last checkpoint stays the last good one.
                loss_value = ctx.mean(loss.detach())
                if not math.isfinite(loss_value):
                    writer.wait()  # the kept checkpoint is complete before it is reported
                    _stop(out, step, loss_value, f"non-finite loss {loss_value} at step {step} "
                          f"(epoch {(step - 1) // steps_per_epoch}, lr {lr:.4g})", last)
            record: dict[str, Any] = {}
            if log_now:
                record = {"epoch": step / steps_per_epoch, "loss": loss_value, "lr": lr,
                          **{k: float(v) for k, v in result.get("logs", {}).items()}}
                bar.set_postfix(loss=f"{loss_value:.4f}", lr=f"{lr:.3g}", refresh=False)
            bar.update(1)  # before the step's tracking and checkpoint, which the bar names while they run
            if track_now and tracker is not None:
                with paused(bar, f"tracking geometry at step {step}"):
                    record = {**record, **_track(tracker, step, method, probe, device)}
            if record and log is not None:
                log.log(step, {**record, **{k: float(v) for k, v in grads.items()}})
            if save_now:
                with paused(bar, f"saving checkpoint at step {step}"):
                    checkpoint(epoch_state)
            if t_warm is None:  # throughput excludes the first step (lazy initialisation, allocator)
                t_warm, warm_step = time.perf_counter(), step
    finally:
        bar.close()
        if log is not None:
            log.close()
        writer.wait()  # the last checkpoint is on disk before train returns or raises
    t_end = time.perf_counter()
    done = {"step": step, "epoch": step / steps_per_epoch, "complete": step >= total,
            "final_loss": loss_value, "steps_this_session": step - start_step, "seconds": t_end - t0,
            "images_per_s": ((step - warm_step) * B / (t_end - t_warm)
                             if t_warm is not None and step > warm_step else None),
            "checkpoint": str(last), "processes": ctx.world}
    if ctx.main:
        atomic_write_json(out / "done.json", done)
    ctx.barrier()
    return done


def _last_loss(path: Path) -> float:
    """The loss of the last metrics line that has one (NaN when none)."""
    losses = [rec.values["loss"] for rec in read_metrics(path) if isinstance(rec.values.get("loss"), float)]
    return losses[-1] if losses else float("nan")


def _check_resumable(out: Path, config: TrainConfig) -> None:
    """Raise when ``config`` may not continue the run stored in ``out``."""
    cfg_path = out / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"--resume: {cfg_path} not found; {out} is not a run directory "
                                f"written by `headgeom train`")
    stored = TrainConfig.from_dict(json.loads(cfg_path.read_text(encoding="utf-8"))["config"])
    diff = {k: v for k, v in stored.differences(config).items() if k not in RESUMABLE_CHANGES}
    if diff:
        raise ValueError(f"--resume: the settings differ from the stored run in {out}: "
                         + ", ".join(f"{k}: stored {a!r}, given {b!r}" for k, (a, b) in diff.items())
                         + f"; only {sorted(RESUMABLE_CHANGES)} may change when resuming")


def _track(tracker: Tracker, step: int, method: torch.nn.Module, probe: list[torch.Tensor],
           device: torch.device) -> dict[str, float]:
    """The tracker's metrics at ``step``, its random draws kept apart from the run's RNG."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        metrics = tracker(step, method, probe)
    method.train()
    return {k: float(v) for k, v in (metrics or {}).items()}


def _stop(out: Path, step: int, loss_value: float, what: str, last: Path) -> None:
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

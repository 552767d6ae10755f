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
    tensorboard/       the same records as TensorBoard scalars, with "tensorboard" in logger (.loggers;
                       mlflow.db and wandb/ likewise, and loggers.json: their run ids, for a resume)
    checkpoints/       last.pt (every epoch, every checkpoint_every steps, at the stop), epoch_XXXX.pt
    done.json          at the end: steps, epochs, final loss, seconds, images/s
    stopped.json       instead, when a non-finite loss stopped the run

``should_stop`` (a :class:`.interrupt.StopRequest`; the ``headgeom train`` command passes
:class:`.interrupt.StopSignals`) is told the step a session starts from and asked after each finished
step: once it returns a signal number, the loop checkpoints that step, waits for the file and raises
:class:`.interrupt.TrainingInterrupted` (no done.json: the run is resumable).

The loss is read back from the device only at steps that log, track or checkpoint (so a GPU runs
ahead in between); a non-finite loss is caught there, before anything is saved.

On CPU a run stopped (``max_steps``) and resumed ends bit-identical to an uninterrupted one.

The loop only steps: what it steps is built by :mod:`.setup`, a resumed run's state is restored by
:mod:`.resume`, and config.json, checkpoints, done.json and stopped.json are written by :mod:`.save`.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import tqdm

from headgeom.device import resolve_device  # noqa: F401  (headgeom.train.loop.resolve_device, as before)
from headgeom.runs.folder import claim_run_folder

from .checkpoint import CheckpointWriter
from .config import TrainConfig
from .ddp import job_layout
from .grad_norms import gradient_groups, gradient_norms
from .interrupt import StopRequest, TrainingInterrupted
from .loggers import check_logger, open_loggers
from .progress import paused
from .resume import check_resumable, keep_metrics, last_loss, restore
from .save import NonFiniteLossError, begin_records, last_checkpoint, save, stop, write_done
from .schedules import lr_at
from .setup import Setup, set_up

__all__ = ["NonFiniteLossError", "Tracker", "TrainingInterrupted", "build_method_from_config", "resolve_device",
           "train"]

Tracker = Callable[[int, torch.nn.Module, list[torch.Tensor]], dict[str, float]]


def build_method_from_config(config: TrainConfig) -> torch.nn.Module:
    """The config's method, backbone (+ options) and heads at a fresh initialisation, built as a
    reader of the run rebuilds it (:meth:`headgeom.runs.trained.RunSettings.build_method`)."""
    return config.run_settings().build_method()


def train(config: TrainConfig, out_dir: str | Path, resume: bool = False, tracker: Tracker | None = None,
          build_method: Callable[[TrainConfig], torch.nn.Module] | None = None, *,
          resume_or_start: bool = False, overwrite: bool = False,
          should_stop: StopRequest | None = None,
          figures: Callable[[Path], Sequence[Path]] | None = None) -> dict[str, Any]:
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

    ``should_stop`` (:class:`.interrupt.StopRequest`) is told the step the session starts from
    (``should_stop.starting(step)``) and asked ``should_stop(step) -> signal number | None`` after every
    finished step (single process only: every rank would have to agree); a number stops the run there
    with a checkpoint of that step.

    ``figures(out_dir) -> paths`` is called once a run ends (complete or at ``max_steps``), after
    done.json, on the process that writes files: it writes the run's figures (PNG files under
    ``out_dir``) and each logger receives them (``log_figure``), then the final checkpoint
    (``log_artifact``), before the loggers close. The resolved config goes to every logger at the
    start of each session (``log_params``).

    Raises:
        NonFiniteLossError: NaN/inf loss (or parameters); checkpoints/last.pt stays the last good one.
        TrainingInterrupted: ``should_stop`` asked to stop; checkpoints/last.pt holds the last finished step.
        FileExistsError: ``out_dir`` already holds a trained run and neither resume nor overwrite is set.
        ValueError: ``resume`` with nothing to resume, or settings that differ from the stored run's.
        RunLockedError: another process is writing ``out_dir``.
    """
    out = Path(out_dir)
    check_logger(config.logger)  # a missing optional writer fails now, before the folder is touched
    layout = job_layout(os.environ)  # torchrun's or srun's ranks: only rank 0 writes
    if should_stop is not None and layout is not None:
        raise ValueError("train(should_stop=...) stops a single process; under torchrun or srun the launcher "
                         "signals every rank")
    with claim_run_folder(out, resume=resume, resume_or_start=resume_or_start, overwrite=overwrite,
                          writer=layout is None or int(layout["rank"]) == 0) as start:
        if start.from_checkpoint:
            check_resumable(out, config)
        # the builder is looked up when train runs, so a script may wrap build_method_from_config
        return _train(config, out, start.from_checkpoint, tracker, build_method or build_method_from_config,
                      should_stop, figures)


def _train(config: TrainConfig, out: Path, resume: bool, tracker: Tracker | None,
           build_method: Callable[[TrainConfig], torch.nn.Module],
           should_stop: StopRequest | None = None,
           figures: Callable[[Path], Sequence[Path]] | None = None) -> dict[str, Any]:
    """:func:`train` in its claimed folder; ``resume``: continue from checkpoints/last.pt."""
    last, metrics_path = last_checkpoint(out), out / "metrics.jsonl"
    s = set_up(config, build_method, with_probe=tracker is not None)
    ctx, method, optimizer, B = s.ctx, s.method, s.optimizer, s.batch
    resumed = resume and last.exists()
    step = restore(last, s, config, tracker) if resumed else 0
    if ctx.main:
        if keep_metrics(metrics_path, step if resumed else -1) and resumed:  # drop lines after the checkpoint
            print(f"note: {metrics_path} ended in a half-written line (the last session stopped while writing "
                  f"it); repaired: it holds the lines up to step {step}, the checkpoint it resumes from",
                  file=sys.stderr)
        begin_records(out, config, s, step, resume)
    model = ctx.wrap(method, s.device, sync_bn=config.sync_bn)
    grad_groups = gradient_groups(method) if ctx.main else None  # rank 0 records (.grad_norms)
    writer = CheckpointWriter()
    bar = tqdm.tqdm(total=s.stop, initial=step, disable=not (config.progress and ctx.main), unit="step",
                    dynamic_ncols=True)
    log = (open_loggers(config.logger, out, first_step=step + 1 if resumed else 0, params=config.to_dict())
           if ctx.main else None)
    tracking = tracker is not None and config.track_every > 0  # same on every process
    tracker = tracker if ctx.main else None
    method.train()
    t0, start_step, perm, epoch_state = time.perf_counter(), step, None, None
    loss_value = last_loss(metrics_path) if resumed and ctx.main else float("nan")
    t_warm: float | None = None
    warm_step = step
    interrupted: TrainingInterrupted | None = None
    if should_stop is not None:
        should_stop.starting(step)  # a signal from here on names the step the run will stop after
    try:  # the loggers are closed whatever happens; an error in the run is the one reported
        try:
            if tracker is not None and config.track_every and step == 0:
                with paused(bar, "tracking geometry at step 0"):
                    log.log(0, _track(tracker, step, method, s.probe, s.device))
                t0 = time.perf_counter()  # the run's seconds start after the initialisation is tracked
            while step < s.stop:
                pos = step % s.steps_per_epoch
                if pos == 0 or perm is None:  # new epoch, or resumed mid-epoch from its start state
                    epoch_state = s.data_gen.get_state()
                    perm = torch.randperm(s.n, generator=s.data_gen)
                views = _views(s, perm[pos * B:(pos + 1) * B])
                lr = lr_at(config.schedule, step, s.total, config.lr, s.warmup, config.final_lr)
                for group in optimizer.param_groups:
                    group["lr"] = config.lr if group.get("fixed_lr") else lr
                with s.autocast:
                    result = model(views)
                loss = result["loss"]
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if hasattr(method, "before_optimizer_step"):  # e.g. DINO's freeze_last_layer
                    method.before_optimizer_step(step, step // s.steps_per_epoch)
                log_now = (step + 1) % config.log_every == 0 or step + 1 == s.stop
                track_now = tracking and (step + 1) % config.track_every == 0
                # the gradient this step applies, on the steps that write a line; tensors until the
                # record reads them (after the loss sync), so no extra host-device sync
                grads = gradient_norms(grad_groups) if grad_groups is not None and (log_now or track_now) else {}
                optimizer.step()
                method.on_step_end(step, s.total)  # index of the update just taken, 0-based
                step += 1
                save_now = (step % s.steps_per_epoch == 0 or step == s.stop
                            or (config.checkpoint_every > 0 and step % config.checkpoint_every == 0))
                if log_now or track_now or save_now:
                    # The only host-device sync of a step, so a GPU runs ahead between records; the
                    # same on every process (a collective), so all stop together. Nothing is saved
                    # after a non-finite loss, so the last checkpoint stays the last good one.
                    loss_value = ctx.mean(loss.detach())
                    if not math.isfinite(loss_value):
                        writer.wait()  # the kept checkpoint is complete before it is reported
                        stop(out, step, loss_value, f"non-finite loss {loss_value} at step {step} "
                             f"(epoch {(step - 1) // s.steps_per_epoch}, lr {lr:.4g})", last)
                record: dict[str, Any] = {}
                if log_now:
                    record = {"epoch": step / s.steps_per_epoch, "loss": loss_value, "lr": lr,
                              **{k: float(v) for k, v in result.get("logs", {}).items()}}
                    bar.set_postfix(loss=f"{loss_value:.4f}", lr=f"{lr:.3g}", refresh=False)
                bar.update(1)  # before the step's tracking and checkpoint, which the bar names while they run
                if track_now and tracker is not None:
                    with paused(bar, f"tracking geometry at step {step}"):
                        record = {**record, **_track(tracker, step, method, s.probe, s.device)}
                if record and log is not None:
                    log.log(step, {**record, **{k: float(v) for k, v in grads.items()}})
                signum = should_stop(step) if should_stop is not None and step < s.stop else None
                if save_now or signum is not None:
                    with paused(bar, f"saving checkpoint at step {step}"):
                        save(out, step, s, config, tracker, writer, epoch_state)
                if t_warm is None:  # throughput excludes the first step (lazy initialisation, allocator)
                    t_warm, warm_step = time.perf_counter(), step
                if signum is not None:  # raised once the checkpoint is on disk (the writer is joined below)
                    interrupted = TrainingInterrupted(signum, step, s.stop, last, out)
                    break
        finally:
            bar.close()
            writer.wait()  # the last checkpoint is on disk before train returns or raises
        if interrupted is not None:
            raise interrupted
        t_end = time.perf_counter()
        done = write_done(out, s, step, start_step, loss_value, t_end - t0,
                          (step - warm_step) * B / (t_end - t_warm) if t_warm is not None and step > warm_step
                          else None)
        if log is not None:  # the run's figures and its final checkpoint, to the trackers
            for path in figures(out) if figures is not None else ():
                log.log_figure(str(Path(path).relative_to(out).with_suffix("")), Path(path))
            log.log_artifact(last)
    except BaseException:
        if log is not None:
            with contextlib.suppress(Exception):
                log.close()
        raise
    if log is not None:
        log.close()
    ctx.barrier()
    return done


def _views(s: Setup, idx: torch.Tensor) -> list[torch.Tensor]:
    """The augmented views of training images ``idx`` (CPU indices), this process's shard of the
    global batch, in the run's memory format."""
    views = s.recipe(s.images[idx.to(s.device)].float().div_(255), s.aug_gen)
    return [v.contiguous(memory_format=s.memory_format) for v in s.ctx.shard(list(views))]


def _track(tracker: Tracker, step: int, method: torch.nn.Module, probe: list[torch.Tensor],
           device: torch.device) -> dict[str, float]:
    """The tracker's metrics at ``step``, its random draws kept apart from the run's RNG."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        metrics = tracker(step, method, probe)
    method.train()
    return {k: float(v) for k, v in (metrics or {}).items()}

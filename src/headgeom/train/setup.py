"""What a training run is set up with before its first step: device and process group, the
training images on the device, the schedule's lengths, the method (seeded), its augmentation recipe
with the run's normalisation, the optimizer, the two seeded generators, the tracker's probe batch and, for a
run with ``collapse``, its output offset sized on that batch (:mod:`.collapse`).

:func:`set_up` builds a :class:`Setup`; :mod:`.resume` then restores a checkpoint into it and
:mod:`.loop` steps it. The order of the calls here is the order of the run's random draws, so it
is part of what makes a run reproducible: parameters are drawn right after ``torch.manual_seed``.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ContextManager

import torch

from headgeom.data import load_dataset
from headgeom.device import resolve_device

from .collapse import calibrate_offset
from .config import TrainConfig
from .ddp import DistContext, init_distributed
from .optim import build_optimizer

__all__ = ["Setup", "channels_last_pays", "probe_views", "set_up"]


@dataclass
class Setup:
    """Everything the step loop reads and the checkpoint saves, built once per session.

    ``images``: (n, C, H, W) uint8 training images on ``device``; ``batch``: the global batch size;
    ``total``: the schedule's length in steps (``epochs × steps_per_epoch``); ``stop``: the step
    this session ends at (``max_steps`` caps it); ``warmup``: warm-up steps; ``data_gen``: CPU
    generator of the epochs' permutations; ``aug_gen``: the views' generator on ``device``;
    ``probe``: the tracker's fixed views (empty without a tracker)."""

    ctx: DistContext
    device: torch.device
    images: torch.Tensor
    batch: int
    steps_per_epoch: int
    total: int
    stop: int
    warmup: int
    method: torch.nn.Module
    memory_format: torch.memory_format
    recipe: Any
    optimizer: torch.optim.Optimizer
    data_gen: torch.Generator
    aug_gen: torch.Generator
    probe: list[torch.Tensor]
    autocast: ContextManager[Any]

    @property
    def n(self) -> int:
        """Training images."""
        return int(self.images.shape[0])

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"


def set_up(config: TrainConfig, build_method: Callable[[TrainConfig], torch.nn.Module],
           with_probe: bool) -> Setup:
    """The :class:`Setup` of a run of ``config`` (at step 0; :mod:`.resume` moves it on).

    Raises ValueError for a batch larger than the training set or not divisible by the processes."""
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
    images = data.images.to(device)
    size = config.image_size or data.image_size[0]

    torch.manual_seed(config.seed)  # parameter initialisation
    method = build_method(config).to(device)
    memory_format = torch.channels_last if config.channels_last and channels_last_pays(device) else torch.contiguous_format
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
    probe = probe_views(config, images, recipe, device) if with_probe else []
    if config.collapse is not None:  # the induced collapse's offset, sized on view 1 of the probe batch
        calibrate_offset(method, (probe or probe_views(config, images, recipe, device))[0], config.collapse,
                         config.seed)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if (on_cuda and config.bf16)
                else contextlib.nullcontext())
    return Setup(ctx=ctx, device=device, images=images, batch=B, steps_per_epoch=steps_per_epoch,
                 total=total, stop=min(total, config.max_steps or total),
                 warmup=round(config.warmup_epochs * steps_per_epoch), method=method,
                 memory_format=memory_format, recipe=recipe, optimizer=optimizer, data_gen=data_gen,
                 aug_gen=aug_gen, probe=probe, autocast=autocast)


def channels_last_pays(device: torch.device) -> bool:
    """Whether convolutions on ``device`` run in channels_last: on CUDA only. On CPU oneDNN's
    channels-last kernels ran a ResNet-18 step faster (137 -> 100 ms at width 0.125, BENCHMARKS.md)
    but crashed in the backward of a 1x1 convolution on an AVX2-only CPU (a width-0.0625 ResNet-18,
    batch 8: SIGSEGV in ``jit_avx2_1x1_convolution_bwd_weights``, or a spin that never returns), so
    CPU runs stay contiguous. The layout reorders the arithmetic only (tests/train/test_train_setup.py)."""
    return device.type == "cuda"


def probe_views(config: TrainConfig, images: torch.Tensor, recipe: Any, device: torch.device
                ) -> list[torch.Tensor]:
    """A fixed probe batch for the tracker: ``probe_size`` images chosen and augmented once
    from generators seeded apart from the training ones (so tracking never moves the run)."""
    pick = torch.Generator().manual_seed(config.seed + 7919)
    idx = torch.randperm(images.shape[0], generator=pick)[: config.probe_size]
    gen = torch.Generator(device=device).manual_seed(config.seed + 104729)
    return list(recipe(images[idx.to(device)].float().div_(255), gen))

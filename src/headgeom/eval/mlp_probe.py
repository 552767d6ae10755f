"""MLP probe on frozen features: one hidden ReLU layer, trained by AdamW on mini-batches.

The linear probe (:mod:`.linear_probe`) reads what a linear map can read; the MLP probe reads
what survives in a form one hidden layer can read, the nonlinear probe that guillotine studies
put beside the linear one (docs/paper.md §3, claim C12). Recipe (stated, fixed; not tuned per run):

1. standardise each feature dimension with the *training* statistics, exactly as the linear
   probe does (:func:`.linear_probe.standardize_stats`: dead dimensions are only centred);
2. logits = W₂ relu(W₁ x̂ + b₁) + b₂ with ``hidden`` units (default 512); W₁, b₁, W₂, b₂ start
   from ``torch.nn.Linear``'s default distribution, U(−1/√fan_in, 1/√fan_in), drawn from a
   generator seeded with ``seed``;
3. minimise the mean cross-entropy over mini-batches of ``batch_size`` (a fresh permutation of
   the training set every epoch, from the same generator) for ``epochs`` epochs with AdamW
   (β = (0.9, 0.999), decoupled weight decay ``weight_decay`` on W₁ and W₂, biases not decayed),
   the rate decaying from ``lr`` to 0 along a half cosine over all steps:
   lr_t = lr · (1 + cos(π t / T)) / 2, t = 0 … T−1;
4. report top-1 accuracy on the test features standardised with the training statistics, and
   the final mean cross-entropy on the whole training set (``loss``).

No early stopping and no validation split: the test split is only scored. Every random draw comes
from the probe's own generator (the global RNG is not touched), so on CPU the fit is a
deterministic function of (features, labels, config); on a GPU it is up to the floating-point
non-determinism of its kernels. The objective is not convex, so unlike the linear probe's the
optimum depends on the seed: the seed is part of the recipe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.eval.linear_probe import (ProbeClassifier, check_features, class_count, config_dict,
                                       split_class_count, standardize_stats)

__all__ = ["MLPProbe", "MLPProbeConfig", "fit_mlp_probe", "mlp_probe_accuracy"]


@dataclass(frozen=True)
class MLPProbeConfig:
    """The MLP probe's recipe (see the module docstring)."""

    hidden: int = 512
    epochs: int = 50
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 5e-4  # AdamW's decoupled decay, on the weight matrices only
    seed: int = 0
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        for name in ("hidden", "epochs", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"MLPProbeConfig.{name} must be a positive int, got {v!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"MLPProbeConfig.lr must be a finite number > 0, got {self.lr!r}")
        if not self.weight_decay >= 0:
            raise ValueError(f"MLPProbeConfig.weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"MLPProbeConfig.dtype must be torch.float32 or torch.float64, got {self.dtype}")

    def to_dict(self) -> dict:
        return config_dict(self)


@dataclass
class MLPProbe(ProbeClassifier):
    """A fitted probe: logits = relu(x̂ @ w1.T + b1) @ w2.T + b2 with x̂ = (x − mean) / std."""

    w1: Tensor  # (H, D)
    b1: Tensor  # (H,)
    w2: Tensor  # (C, H)
    b2: Tensor  # (C,)
    mean: Tensor  # (D,)
    std: Tensor  # (D,)
    loss: float  # final mean cross-entropy on the whole training set
    steps: int  # optimiser steps taken

    def logits(self, x: Tensor) -> Tensor:
        """(N, D) -> (N, C)."""
        if x.ndim != 2 or x.shape[1] != self.w1.shape[1]:
            raise ValueError(f"features must have shape (N, {self.w1.shape[1]}), got {tuple(x.shape)}")
        x = x.to(self.w1.device, self.w1.dtype)
        return _forward((x - self.mean) / self.std, self.w1, self.b1, self.w2, self.b2)


def _forward(xs: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    return torch.relu(xs @ w1.T + b1) @ w2.T + b2


def _uniform(shape: tuple[int, ...], fan_in: int, gen: torch.Generator, dtype: torch.dtype) -> Tensor:
    """U(−1/√fan_in, 1/√fan_in), torch.nn.Linear's default for weight and bias, on the CPU."""
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=gen, dtype=dtype) * 2.0 - 1.0) * bound


def fit_mlp_probe(x: Tensor, y: Tensor, num_classes: int | None = None,
                  config: MLPProbeConfig = MLPProbeConfig()) -> MLPProbe:
    """Fit the probe of the module recipe on features x (N, D) and labels y (N,)."""
    check_features(x, y, "train")
    num_classes = class_count(y, num_classes)
    cfg = config
    x = x.to(cfg.dtype)
    mean, std = standardize_stats(x)
    xs = (x - mean) / std
    y = y.long().to(x.device)
    n, d = xs.shape
    gen = torch.Generator().manual_seed(cfg.seed)  # init and batch order; the global RNG is left alone
    params = [_uniform((cfg.hidden, d), d, gen, cfg.dtype), _uniform((cfg.hidden,), d, gen, cfg.dtype),
              _uniform((num_classes, cfg.hidden), cfg.hidden, gen, cfg.dtype),
              _uniform((num_classes,), cfg.hidden, gen, cfg.dtype)]
    w1, b1, w2, b2 = (p.to(x.device).requires_grad_(True) for p in params)
    opt = torch.optim.AdamW([{"params": [w1, w2], "weight_decay": float(cfg.weight_decay)},
                             {"params": [b1, b2], "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.999))
    batch = min(cfg.batch_size, n)
    per_epoch = math.ceil(n / batch)
    total = cfg.epochs * per_epoch
    step = 0
    with torch.enable_grad():
        for _ in range(cfg.epochs):
            order = torch.randperm(n, generator=gen).to(x.device)
            for i in range(per_epoch):
                idx = order[i * batch:(i + 1) * batch]
                for group in opt.param_groups:
                    group["lr"] = cfg.lr * 0.5 * (1.0 + math.cos(math.pi * step / total))
                loss = F.cross_entropy(_forward(xs[idx], w1, b1, w2, b2), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                step += 1
    with torch.no_grad():
        final = float(F.cross_entropy(_forward(xs, w1, b1, w2, b2), y))
    return MLPProbe(w1.detach(), b1.detach(), w2.detach(), b2.detach(), mean, std, final, step)


def mlp_probe_accuracy(train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor,
                       num_classes: int | None = None,
                       config: MLPProbeConfig = MLPProbeConfig()) -> dict:
    """Fit on train, report {"train_top1", "test_top1", "loss", "steps", "hidden", "epochs"}."""
    num_classes = split_class_count(train_x, train_y, test_x, test_y, num_classes)
    probe = fit_mlp_probe(train_x, train_y, num_classes, config)
    return {"train_top1": probe.accuracy(train_x, train_y), "test_top1": probe.accuracy(test_x, test_y),
            "loss": probe.loss, "steps": probe.steps, "hidden": config.hidden, "epochs": config.epochs}

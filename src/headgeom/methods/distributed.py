"""The global batch under DDP: gathers and reductions with gradient, and synchronised BatchNorm.

Batch-coupled losses (SimCLR's negatives, VICReg's variance and covariance, Barlow Twins'
cross-correlation) and BatchNorm statistics must see the whole global batch, not one process's
shard, for P processes × N/P samples to train as one process × N. As the official code bases:

- :func:`gather_rows` concatenates every process's rows, with gradient (VICReg's
  ``FullGatherLayer``, SimCLR's cross-replica concat): forward ``all_gather``; backward the sum
  over processes of the gradient, of which each process keeps its own rows. Every process then
  computes the same global loss L; DDP averages the P gradients, each P × ∂L/∂(own rows), back
  to exactly ∂L/∂θ of one process.
- :func:`all_reduce_sum` is the differentiable sum over processes (backward: the sum of the
  gradients), for Barlow Twins' all-reduced cross-correlation and the BatchNorm moments.
- :class:`GlobalBatchNorm1d` / ``2d`` / ``3d`` (via :func:`convert_sync_batchnorm`) normalise
  with the moments of the global batch (torch's SyncBatchNorm needs a GPU; these run on
  gloo/CPU and nccl/GPU).

Collectives run only inside :func:`global_batch` (entered by the DDP wrapper of
:mod:`headgeom.train.ddp` around the training forward), so a forward on one process alone (the
tracker's probe batch on rank 0) never waits for the others. Outside it, or on one process,
every function here is the identity (no gather, bit-identical single-process results).

Row order: process ``r`` holds the global rows ``r::P`` (:func:`shard_rows`, what
DistributedSampler does with an index list); :func:`gather_rows` returns the rows in the global
batch's order, so a gathered loss sums in the same order as on one process.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ["GlobalBatchNorm", "GlobalBatchNorm1d", "GlobalBatchNorm2d", "GlobalBatchNorm3d", "active_world",
           "all_reduce_sum", "convert_sync_batchnorm", "gather_rows", "global_batch", "global_moments",
           "has_batchnorm", "shard_rows"]

_GLOBAL = contextvars.ContextVar("headgeom_global_batch", default=False)


@contextlib.contextmanager
def global_batch(enabled: bool = True) -> Iterator[None]:
    """Inside: the gathers and reductions of this module act over all processes (every process
    must run the same forward). The DDP wrapper of headgeom.train.ddp enters it around forward."""
    token = _GLOBAL.set(bool(enabled))
    try:
        yield
    finally:
        _GLOBAL.reset(token)


def active_world() -> int:
    """The number of processes the global batch spans now: the world size inside
    :func:`global_batch` with an initialised process group, else 1."""
    if _GLOBAL.get() and dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


def shard_rows(x: Tensor, rank: int, world: int) -> Tensor:
    """Process ``rank``'s rows ``rank::world`` of the global batch x (N, ...) -> (N / world, ...)."""
    return x if world == 1 else x[rank::world]


class _GatherWithGrad(torch.autograd.Function):
    """(n, ...) on each process -> (P, n, ...) stacked in rank order; backward: all-reduce (sum)
    of the incoming gradient, this process's slice returned (VICReg's FullGatherLayer)."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, x)
        ctx.rank = dist.get_rank()
        return torch.stack(parts, dim=0)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        total = grad.contiguous().clone()
        dist.all_reduce(total)
        return total[ctx.rank]


class _AllReduceSum(torch.autograd.Function):
    """Σ_r x_r on every process; backward: Σ_r of the gradients (torch.distributed.nn's all_reduce)."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        out = x.contiguous().clone()
        dist.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:  # type: ignore[override]
        total = grad.contiguous().clone()
        dist.all_reduce(total)
        return total


def gather_rows(x: Tensor) -> Tensor:
    """The global batch (P·n, ...) from each process's rows (n, ...), in the global order (process
    r holds rows r::P), differentiable; ``x`` itself when :func:`active_world` is 1. Every
    process must hold the same number of rows (headgeom.train checks that P divides the batch)."""
    world = active_world()
    if world == 1:
        return x
    stacked = _GatherWithGrad.apply(x)  # (P, n, ...): stacked[r, j] = global row j·P + r
    return stacked.transpose(0, 1).reshape(world * x.shape[0], *x.shape[1:])


def all_reduce_sum(x: Tensor) -> Tensor:
    """Σ over processes of x (any shape), differentiable; ``x`` itself when :func:`active_world` is 1."""
    return x if active_world() == 1 else _AllReduceSum.apply(x)


def global_moments(x: Tensor, dims: tuple[int, ...] = (0,)) -> tuple[Tensor, Tensor, Tensor]:
    """(mean, biased variance, count) of x over ``dims`` and over every process, differentiable.

    Each process's (mean, variance, count) are gathered in one collective and combined exactly
    (the parallel variance formula Σ_r n_r (v_r + (m_r − m)²) / n, as stable as a two-pass
    variance; shards may differ in size). x (N, C, ...) with ``dims`` every axis but the channel
    axis -> mean (C,), var (C,), count n (a 0-d tensor, no host synchronisation).
    """
    count = 1
    for d in dims:
        count *= x.shape[d]
    mean = x.mean(dim=dims)
    var = x.var(dim=dims, unbiased=False)
    if active_world() == 1:
        return mean, var, torch.tensor(float(count), dtype=x.dtype, device=x.device)
    stacked = _GatherWithGrad.apply(torch.stack([mean, var, torch.full_like(mean, float(count))]))
    m_r, v_r, n_r = stacked[:, 0], stacked[:, 1], stacked[:, 2, :1].detach()  # (P, C), (P, C), (P, 1)
    n = n_r.sum()
    w = n_r / n
    g_mean = (w * m_r).sum(dim=0)
    g_var = (w * (v_r + (m_r - g_mean).pow(2))).sum(dim=0)
    return g_mean, g_var, n


class GlobalBatchNorm(_BatchNorm):
    """Mixin for BatchNorm whose training statistics are those of the global batch inside
    :func:`global_batch` under DDP, and plain BatchNorm otherwise (eval mode, one process, a
    forward outside the DDP wrapper). Used as :class:`GlobalBatchNorm1d` / ``2d`` / ``3d``,
    subclasses of torch's BatchNorm{1,2,3}d (so ``isinstance`` checks elsewhere hold) with the
    same parameter and buffer names (so state_dicts load either way)."""

    def forward(self, x: Tensor) -> Tensor:
        if not (self.training and active_world() > 1):
            return super().forward(x)
        self._check_input_dim(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average, as torch
                factor = 1.0 / float(self.num_batches_tracked)
        dims = (0, *range(2, x.dim()))
        xs = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        mean, var, n = global_moments(xs, dims)
        if self.track_running_stats and self.running_mean is not None:
            with torch.no_grad():  # torch's rule: the running variance is the unbiased one
                unbiased = var.detach() * (n / (n - 1).clamp_min(1))
                self.running_mean.mul_(1 - factor).add_(mean.detach().to(self.running_mean.dtype), alpha=factor)
                self.running_var.mul_(1 - factor).add_(unbiased.to(self.running_var.dtype), alpha=factor)
        shape = (1, -1) + (1,) * (x.dim() - 2)
        y = (xs - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y.to(x.dtype)


class GlobalBatchNorm1d(GlobalBatchNorm, nn.BatchNorm1d):
    """BatchNorm1d over the global batch under DDP (heads: (N, C) or (N, C, L))."""


class GlobalBatchNorm2d(GlobalBatchNorm, nn.BatchNorm2d):
    """BatchNorm2d over the global batch under DDP (backbones: (N, C, H, W))."""


class GlobalBatchNorm3d(GlobalBatchNorm, nn.BatchNorm3d):
    """BatchNorm3d over the global batch under DDP ((N, C, D, H, W))."""


_GLOBAL_VERSION = {nn.BatchNorm1d: GlobalBatchNorm1d, nn.BatchNorm2d: GlobalBatchNorm2d,
                   nn.BatchNorm3d: GlobalBatchNorm3d}


def has_batchnorm(module: nn.Module) -> bool:
    """True when ``module`` holds any BatchNorm layer."""
    return any(isinstance(m, _BatchNorm) for m in module.modules())


def convert_sync_batchnorm(module: nn.Module) -> nn.Module:
    """Every BatchNorm{1,2,3}d in ``module`` replaced, in place, by its :class:`GlobalBatchNorm`
    version holding the same parameter and buffer tensors (optimizer references and loaded state
    stay valid); returns ``module`` (or its replacement when it is itself a BatchNorm). Other
    BatchNorm classes (torch's SyncBatchNorm, lazy ones) raise: convert them from a plain one."""
    if isinstance(module, GlobalBatchNorm):
        return module
    if isinstance(module, _BatchNorm):
        kind = next((k for k in _GLOBAL_VERSION if type(module) is k), None)
        if kind is None:
            raise TypeError(f"convert_sync_batchnorm converts nn.BatchNorm1d/2d/3d; got {type(module).__name__}. "
                            f"Build the model with plain BatchNorm layers, or pass sync_bn=False")
        new = _GLOBAL_VERSION[kind](module.num_features, module.eps, module.momentum, module.affine,
                                    module.track_running_stats, device="meta")
        if module.affine:
            new.weight, new.bias = module.weight, module.bias
        new.running_mean, new.running_var = module.running_mean, module.running_var
        new.num_batches_tracked = module.num_batches_tracked
        new.train(module.training)
        return new
    for name, child in module.named_children():
        new_child = convert_sync_batchnorm(child)
        if new_child is not child:
            setattr(module, name, new_child)
    return module

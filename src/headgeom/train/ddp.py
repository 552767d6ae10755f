"""Multi-process data-parallel training (DDP) under torchrun: gloo on CPU, nccl on GPU.

Launch: ``torchrun --nproc_per_node=P $(which headgeom) train ... --out RUN_DIR``. Every
process draws the same seeded permutation and augments the same global batch with the same
generator, then keeps the interleaved shard ``batch[rank::world]`` (what DistributedSampler
does with an index list); gradients are averaged by DDP. So the data order, the augmentation
state and therefore ``--resume`` are those of a single-process run, at the cost of augmenting
the global batch on every process (cheap next to the network on the device).

The loss and BatchNorm see the global batch, as in the official code bases: inside the DDP
forward (:func:`headgeom.methods.distributed.global_batch`) SimCLR gathers the projections of
every process with gradient (global negatives), VICReg its embeddings, Barlow Twins all-reduces
its cross-correlation, and DINO's centre update is all-reduced (in ``on_step_end``). With
``sync_bn`` (default) every BatchNorm of backbone, heads and EMA copies is converted to
:class:`~headgeom.methods.distributed.GlobalBatchNorm` (global statistics on gloo/CPU and
nccl/GPU). So P processes × B/P train as one process × B, to float round-off. One process runs
no collective and is bit-identical to a run without DDP support.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from headgeom.methods.distributed import convert_sync_batchnorm, global_batch, has_batchnorm, shard_rows

__all__ = ["DistContext", "GlobalBatchDDP", "init_distributed"]


@dataclass(frozen=True)
class DistContext:
    """This process's place in the job: ``rank`` of ``world`` (1 = no distribution)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        """True on the process that writes files (rank 0)."""
        return self.rank == 0

    def device(self, device: torch.device) -> torch.device:
        """One GPU per process (``cuda:local_rank``); CPU unchanged."""
        if self.world > 1 and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def shard(self, views: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each view's rows ``rank::world`` (the global batch interleaved over processes)."""
        return [shard_rows(v, self.rank, self.world) for v in views]

    def wrap(self, module: torch.nn.Module, device: torch.device, sync_bn: bool = True) -> torch.nn.Module:
        """``module`` wrapped for DDP when distributed (its forward sees the global batch), else
        ``module`` itself. ``sync_bn``: convert its BatchNorm layers, in place and keeping their
        tensors, to global-batch BatchNorm first (when it has any)."""
        if self.world == 1:
            return module
        if sync_bn and has_batchnorm(module):
            convert_sync_batchnorm(module)
        ids = [device.index] if device.type == "cuda" else None
        return GlobalBatchDDP(module, device_ids=ids)

    def mean(self, x: torch.Tensor) -> float:
        """Mean of the scalar ``x`` over processes (every process gets the same number, so all
        stop together on a non-finite loss)."""
        if self.world == 1:
            return float(x)
        y = x.detach().float().clone()
        dist.all_reduce(y)
        return float(y) / self.world

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


class GlobalBatchDDP(torch.nn.parallel.DistributedDataParallel):
    """DDP whose forward runs inside :func:`~headgeom.methods.distributed.global_batch`: the
    method's gathers and synchronised BatchNorm act over all processes there, and only there
    (the bare method, e.g. the tracker's probe forward on rank 0, stays local)."""

    def forward(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        with global_batch():
            return super().forward(*args, **kwargs)


def init_distributed(device: torch.device) -> DistContext:
    """Join the torchrun job described by ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` (and
    ``MASTER_ADDR``/``MASTER_PORT``); a plain launch returns the single-process context."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistContext()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistContext(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=local)

"""Multi-process data-parallel training (DDP) under torchrun: gloo on CPU, nccl on GPU.

Launch: ``torchrun --nproc_per_node=P $(which headgeom) train ... --out RUN_DIR``. Every
process draws the same seeded permutation and augments the same global batch with the same
generator, then keeps the interleaved shard ``batch[rank::world]`` (what DistributedSampler
does with an index list); gradients are averaged by DDP. So the data order, the augmentation
state and therefore ``--resume`` are those of a single-process run, at the cost of augmenting
the global batch on every process (cheap next to the network on the device).

What differs from one process with the same global batch: the loss and BatchNorm see each
process's shard only (SimCLR negatives, VICReg/Barlow statistics, BN statistics are per process;
losses that are means over samples, without BN, match to round-off).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["DistContext", "init_distributed"]


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
        return views if self.world == 1 else [v[self.rank::self.world] for v in views]

    def wrap(self, module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``DistributedDataParallel(module)`` when distributed, else ``module``."""
        if self.world == 1:
            return module
        ids = [device.index] if device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(module, device_ids=ids)

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

"""Multi-process data-parallel training (DDP) under torchrun or SLURM: gloo on CPU, nccl on GPU.

Launch: ``torchrun --nproc_per_node=P $(which headgeom) train ... --out RUN_DIR``, or inside a
SLURM allocation ``srun --ntasks-per-node=P headgeom train ... --out RUN_DIR`` (no torchrun: the
job step's ``SLURM_PROCID``, ``SLURM_STEP_NUM_TASKS``, ``SLURM_LOCALID`` and the first host of
its node list give rank, world size, local rank and the rendezvous address, :func:`job_layout`;
the port is ``MASTER_PORT`` when set, else derived from the job id). Every
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
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from headgeom.methods.distributed import convert_sync_batchnorm, global_batch, has_batchnorm, shard_rows

__all__ = ["DistContext", "GlobalBatchDDP", "first_host", "init_distributed", "job_layout"]


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


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: ``"gpu[03-05,07],cpu1"`` -> ``"gpu03"`` (zero padding kept)."""
    head = re.match(r"([^,\[]*)(?:\[([^\]]*)\])?", nodelist.strip())
    if head is None or not head.group(1) and not head.group(2):
        raise ValueError(f"cannot read the SLURM node list {nodelist!r}; set MASTER_ADDR to the first node's name")
    prefix, ranges = head.group(1), head.group(2)
    return prefix + (ranges.split(",")[0].split("-")[0] if ranges else "")


def job_layout(env: Mapping[str, str]) -> dict[str, str | int] | None:
    """``{"rank", "world", "local_rank", "master_addr", "master_port"}`` of this process, from
    torchrun's variables (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``; the address and port stay
    torchrun's) or else from a SLURM job step with several tasks (``srun``, or submitit's tasks);
    None for a single process, including a SLURM batch script itself, which is no job step."""
    if "WORLD_SIZE" in env:
        world = int(env["WORLD_SIZE"])
        if world == 1:
            return None
        rank = int(env["RANK"])
        return {"rank": rank, "world": world, "local_rank": int(env.get("LOCAL_RANK", rank)),
                "master_addr": env.get("MASTER_ADDR", ""), "master_port": env.get("MASTER_PORT", "")}
    world = int(env.get("SLURM_STEP_NUM_TASKS", "1"))
    if world == 1 or "SLURM_PROCID" not in env:
        return None
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST") or env.get("SLURM_JOB_NODELIST", "")
    port = env.get("MASTER_PORT") or str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000)
    return {"rank": int(env["SLURM_PROCID"]), "world": world, "local_rank": int(env.get("SLURM_LOCALID", "0")),
            "master_addr": env.get("MASTER_ADDR") or (first_host(nodes) if nodes else ""), "master_port": port}


def init_distributed(device: torch.device) -> DistContext:
    """Join the job :func:`job_layout` reads from the environment (torchrun's or a SLURM job
    step's); a plain launch returns the single-process context."""
    layout = job_layout(os.environ)
    if layout is None:
        return DistContext()
    rank, world, local = int(layout["rank"]), int(layout["world"]), int(layout["local_rank"])
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(local)
        if not (os.environ.get("MASTER_ADDR") or layout["master_addr"]):
            raise ValueError(f"process {rank} of {world} cannot find the rendezvous: neither MASTER_ADDR nor "
                             "SLURM's node list (SLURM_STEP_NODELIST) is set; set MASTER_ADDR to the first node")
        # env:// reads the rendezvous from here (under torchrun these are torchrun's own values)
        os.environ.setdefault("MASTER_ADDR", str(layout["master_addr"]))
        os.environ.setdefault("MASTER_PORT", str(layout["master_port"]))
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistContext(rank=dist.get_rank(), world=dist.get_world_size(), local_rank=local)

"""A tiny SimCLR LightningModule in the style of lightly's examples, for the callback tests; run
as a script it trains under DDP with 2 gloo processes on CPU (test_integrations_lightning):

    python tests/lightning_tiny.py OUT_DIR

Lightning's "ddp" strategy relaunches this script for rank 1. Rank 0 measures with
HeadGeometryCallback every step and, at step 1, measures a head with a train-mode
SyncBatchNorm: on CPU a SyncBatchNorm that synchronised would raise (it needs a GPU), and on a
GPU it would wait for rank 1, which is not measuring. Each rank writes OUT_DIR/rank<r>.json.
"""
from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer, seed_everything
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from headgeom.integrations import GeometryMonitor, HeadGeometryCallback
from headgeom.objectives import nt_xent

FEATURES = 8


class TinySimCLR(LightningModule):
    """lightly's SimCLR module shrunk: ``backbone`` -> (N, 8, 1, 1), ``projection_head`` MLP,
    NT-Xent on the two views of a batch; BatchNorm in both with ``bn``."""

    def __init__(self, bn: bool = False, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        norm = [nn.BatchNorm2d(FEATURES)] if bn else []
        self.backbone = nn.Sequential(nn.Conv2d(3, FEATURES, 3), *norm, nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.projection_head = head(bn)

    def forward(self, x):
        return self.projection_head(self.backbone(x).flatten(start_dim=1))

    def training_step(self, batch, batch_idx):
        x0, x1 = batch
        loss = nt_xent(self(x0), self(x1))
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def head(bn: bool) -> nn.Sequential:
    norm = [nn.BatchNorm1d(16)] if bn else []
    return nn.Sequential(nn.Linear(FEATURES, 16), *norm, nn.SiLU(), nn.Linear(16, FEATURES))


def pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two "views" of n random 6x6 images (the second a noisy copy of the first)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, 6, 6, generator=g)
    return x, x + 0.1 * torch.randn(x.shape, generator=g)


def loader() -> DataLoader:
    return DataLoader(TensorDataset(*pairs(32, seed=0)), batch_size=8, shuffle=True)


def trainer_options(max_steps: int) -> dict:
    return dict(accelerator="cpu", max_steps=max_steps, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, log_every_n_steps=1)


class SyncHeadProbe(Callback):
    """At step 1 rank 0 measures ``monitor`` (a SyncBatchNorm head) while rank 1 trains on."""

    def __init__(self, monitor: GeometryMonitor) -> None:
        self.monitor, self.lambda_min, self.world = monitor, None, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.is_global_zero and trainer.global_step == 1:
            self.world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
            # a train-mode (Sync)BatchNorm head couples the samples: the Lanczos estimate on the operator
            self.lambda_min = self.monitor.measure(pl_module)["headgeom/ambient/op_lambda_min"]


def main(out: str) -> None:
    torch.set_num_threads(1)
    seed_everything(0)
    model = TinySimCLR()
    probe = pairs(8, seed=1)
    geometry = HeadGeometryCallback(loss=nt_xent, probe=probe, every_n_train_steps=1)
    sync_head = nn.SyncBatchNorm.convert_sync_batchnorm(head(bn=True)).train()
    sync = SyncHeadProbe(GeometryMonitor(sync_head, "backbone", nt_xent, probe))
    trainer = Trainer(devices=2, strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=120)),
                      logger=CSVLogger(out, name="csv", version=0), callbacks=[geometry, sync], **trainer_options(3))
    trainer.fit(model, loader())
    record = {"rank": trainer.global_rank, "world": trainer.world_size, "last_step": geometry.last_step,
              "sync_lambda_min": sync.lambda_min, "sync_world": sync.world}
    Path(out, f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1])

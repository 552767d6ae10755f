"""HeadGeometryCallback: exact head geometry in any PyTorch Lightning run, one callback.

    trainer = Trainer(callbacks=[HeadGeometryCallback(head="projection_head", backbone="backbone",
                                                      loss=loss, probe=(x1, x2), every_n_train_steps=500)])

Every ``every_n_train_steps`` optimizer steps (``trainer.global_step % K == 0``, step 0 at the
start of training included) it measures the LightningModule with a
:class:`headgeom.integrations.GeometryMonitor` and logs every number of the measurement under
its shared tag (:mod:`headgeom.tags`: ``headgeom/<reading>/lambda_min``, ``.../lambda_max``,
``.../n_negative``, ``.../M_ratio_spectral``, ``headgeom/stats/rankme_z``, ``headgeom/stats/spread_z``,
...; the names a native ``headgeom train`` run logs the same quantities under, docs/logging.md;
definitions in :data:`headgeom.integrations.KEYS`) through each of the trainer's loggers at ``step = trainer.global_step``, so the values appear in TensorBoard,
CSV or W&B with no extra code. Between measurements a hook costs one modulo. A
``pytorch_lightning.Trainer`` (the pre-2.0 package name, as in lightly's examples) calls it too.

Under DDP only global rank 0 measures and logs; the callback runs no collective, and the
measurement itself calls none (the monitor analyses a SyncBatchNorm head as a local BatchNorm
copy), so the other ranks simply go on to the next step and wait for rank 0 in their gradient
all-reduce. Give the loss no cross-process gather (e.g. lightly's
``NTXentLoss(gather_distributed=False)`` for the monitor, whatever the training uses), and keep
a measurement shorter than the process group's timeout. Training is not changed: the monitor
restores modes, buffers and RNG states, so weights end bit-identical with and without it.
"""
from __future__ import annotations

from typing import Any, Sequence

from torch import Tensor

from headgeom.integrations.monitor import GeometryMonitor, Measurement, ModuleSpec, PairLoss, measurement

try:  # optional dependency (the "lightning" extra)
    from lightning.pytorch import Callback, LightningModule, Trainer
    from lightning.pytorch.utilities import rank_zero_warn
except ImportError as error:
    raise ImportError(
        'HeadGeometryCallback needs PyTorch Lightning, an optional dependency of headgeom: install it '
        'with pip install -e ".[lightning]" (or pip install "lightning>=2.0"); GeometryMonitor '
        f"(headgeom.integrations) works without it. ({error})"
    ) from error

class HeadGeometryCallback(Callback):
    """Logs the exact H_eff spectrum and representation statistics every K training steps.

    Args:
        head, backbone: attribute names (or dotted paths) on the LightningModule, modules, or
            callables module -> nn.Module (see :class:`GeometryMonitor`).
        loss: ``loss(u, v) -> scalar`` with u the analysed view's head output, v the other
            view's (held fixed).
        probe: the fixed probe batch (x1, x2); moved to the module's device at each measurement.
        every_n_train_steps: measure when ``trainer.global_step % every_n_train_steps == 0``.
        reading, **options: passed to :class:`GeometryMonitor`.

    ``last`` / ``last_step`` hold rank 0's latest measurement (:class:`~headgeom.integrations.Measurement`,
    under the shared tags it logs) and its step (None before one).
    """

    def __init__(self, head: ModuleSpec = "projection_head", backbone: ModuleSpec = "backbone",
                 loss: PairLoss | None = None, probe: Sequence[Tensor] | None = None,
                 every_n_train_steps: int = 100, reading: str = "ambient", **options: Any) -> None:
        super().__init__()
        if loss is None:
            raise ValueError("HeadGeometryCallback needs loss=: loss(u, v) -> scalar, the training loss with u the "
                             "analysed view's head output and v the other view's")
        if probe is None:
            raise ValueError("HeadGeometryCallback needs probe=(x1, x2): a fixed batch of two views of the same "
                             "samples (e.g. two augmentations of 64 training images)")
        self.monitor = GeometryMonitor(head, backbone, loss, probe, reading=reading, every=every_n_train_steps,
                                       **options)
        self.last: Measurement | None = None
        self.last_step: int | None = None

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.is_global_zero and not trainer.loggers:
            rank_zero_warn("HeadGeometryCallback: the trainer has no logger, so its measurements are kept only "
                           "in callback.last; pass logger=CSVLogger(...) or TensorBoardLogger(...) to see them")

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._measure(trainer, pl_module)

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self._measure(trainer, pl_module)

    def _measure(self, trainer: Trainer, pl_module: LightningModule) -> None:
        step = trainer.global_step
        # with gradient accumulation several batches end at one global step: measure it once
        if not self.monitor.due(step) or step == self.last_step or not trainer.is_global_zero:
            return
        self.last, self.last_step = measurement(self.monitor.record(pl_module)), step
        for logger in trainer.loggers:
            logger.log_metrics(dict(self.last), step=step)

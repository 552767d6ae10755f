"""SSL pre-training: ``train(config, out_dir)`` and ``headgeom train``.

Schedules are pure functions (:mod:`.schedules`), optimizers are built on a method's parameter
groups (:mod:`.optim`), checkpoints are atomic and never unpickle code (:mod:`.checkpoint`), and
the loop is short and flat (:mod:`.loop`); its records go to metrics.jsonl and, on request,
TensorBoard, MLflow and W&B under the shared tags of :mod:`headgeom.tags` (:mod:`.loggers`).
"""

from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .config import RESUMABLE_CHANGES, TrainConfig
from .loop import NonFiniteLossError, build_method_from_config, resolve_device, train
from .optim import LARS, OPTIMIZERS, build_optimizer
from .schedules import SCHEDULES, cosine_value, lr_at, warmup_cosine

__all__ = [
    "LARS", "OPTIMIZERS", "RESUMABLE_CHANGES", "SCHEDULES", "CheckpointError", "NonFiniteLossError",
    "TrainConfig", "build_method_from_config", "build_optimizer", "cosine_value", "load_checkpoint",
    "lr_at", "resolve_device", "save_checkpoint", "train", "warmup_cosine",
]

"""The names the parsers list and check, as constants (no torch import).

Each tuple mirrors a registry that needs torch to import (``tests/commands/test_cli_parsers.py`` checks
every one against its registry, so a new method, reading or experiment that is not added here
fails the suite rather than drifting out of ``--help``).
"""
from __future__ import annotations

# headgeom.methods.registry.METHODS
METHODS = ("simclr", "simclr_oneway", "simsiam", "byol", "vicreg", "barlow_twins", "dino")
# headgeom.backbones.registry.BACKBONES
BACKBONES = ("resnet18", "resnet50", "vit_tiny", "vit_small")
# headgeom.data.registry.DATASETS
DATASETS = ("cifar10", "cifar100", "shapes", "imagefolder")
# headgeom.objectives.registry.OBJECTIVES
OBJECTIVES = ("mse", "negative_cosine", "nt_xent", "info_nce", "vicreg", "barlow_twins", "dino")
# headgeom.geometry.engine.readings.READINGS
READINGS = ("ambient", "tangential")
# headgeom.train.optim.OPTIMIZERS and headgeom.train.schedules.SCHEDULES
OPTIMIZERS = ("sgd", "adam", "adamw", "lars")
SCHEDULES = ("cosine", "constant")
# headgeom.train.loggers.LOGGERS
LOGGERS = ("jsonl", "tensorboard", "mlflow", "wandb")
# headgeom.augment.families.FAMILIES
FAMILIES = ("rotation", "rotation_45", "hue", "saturation", "brightness", "contrast", "blur",
            "translate_x", "translate_y", "scale")
# headgeom.heads.HEAD_PRESETS
HEAD_PRESETS = ("paper_projector", "paper_predictor", "simclr", "simsiam_projector", "simsiam_predictor",
                "byol", "byol_predictor", "vicreg", "barlow_twins", "dino")
# headgeom.heads.activations.ACTIVATIONS (canonical names) and ALIASES
ACTIVATIONS = ("relu", "gelu", "silu", "softplus", "tanh", "elu", "linear")
ACTIVATION_ALIASES = {"identity": "linear", "swish": "silu"}
# headgeom.experiments.registry.EXPERIMENTS after load_all(), in reading order; THEORY_IDS are
# those with theory=True (what `headgeom theory` runs)
EXPERIMENT_IDS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9", "C10", "C11", "C12", "GRID", "ABLATION",
                  "RELEASED")
THEORY_IDS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7")
# headgeom.experiments.registry.PRESETS
PRESETS = ("quick", "small", "paper", "released")
# The defaults of headgeom.train.TrainConfig that `headgeom train --help` states
TRAIN_DEFAULTS = {"epochs": 1, "batch_size": 256, "seed": 0, "optimizer": "sgd", "lr": 0.06, "momentum": 0.9,
                  "weight_decay": 0.0005, "lars_eta": 0.001, "schedule": "cosine", "probe_size": 256,
                  "track_reading": "ambient", "track_block_samples": 32}

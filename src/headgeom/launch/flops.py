"""Forward FLOPs of one image through a training run's model: backbone, projector and predictor.

The cost model of :mod:`headgeom.launch.cost` needs a per-image cost of a training cell's model
(backbone, its width, the head); rather than a table per backbone, the model is built on PyTorch's
``meta`` device (no memory, no arithmetic) from the run's stored settings
(:class:`headgeom.runs.trained.RunSettings`) and its forward pass is counted by
``torch.utils.flop_counter.FlopCounterMode`` (convolutions and matrix products), so any registered
backbone or head string is covered. Results are cached per model and image size; a model that
cannot be built on ``meta`` (a custom backbone) gives None and the cost model falls back to its default.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Mapping

import torch
from torch.utils.flop_counter import FlopCounterMode

from headgeom.runs.trained import RunSettings

__all__ = ["forward_flops", "image_side"]

# native image side of the datasets whose images are not read here (imagefolder: the usual 224)
NATIVE_SIDE = {"shapes": 32, "cifar10": 32, "cifar100": 32}
DEFAULT_SIDE = 224


def image_side(train: Mapping[str, Any]) -> int:
    """The side of the views a run trains on: ``image_size``, else the dataset's native side
    (shapes: its ``size`` option, 32 by default)."""
    if train.get("image_size"):
        return int(train["image_size"])
    options = train.get("data_options") or {}
    if train.get("data") == "shapes" and options.get("size"):
        return int(options["size"])
    return NATIVE_SIDE.get(str(train.get("data")), DEFAULT_SIDE)


def forward_flops(train: Mapping[str, Any]) -> float | None:
    """FLOPs (multiply and add counted apart) of one image's forward pass through the backbone, the
    projector and the predictor of the run ``train`` (a ``TrainConfig.to_dict()``), at
    :func:`image_side`; None when the model cannot be built on the meta device."""
    keys = ("method", "backbone", "backbone_options", "head", "predictor", "method_options")
    model = json.dumps({k: train.get(k) for k in keys}, sort_keys=True, default=str)
    return _counted(model, image_side(train))


@functools.lru_cache(maxsize=256)
def _counted(model: str, side: int) -> float | None:
    settings = json.loads(model)
    try:
        with torch.device("meta"):
            method = RunSettings.from_config(settings).build_method()
        x = torch.empty(2, 3, side, side, device="meta")  # two images: BatchNorm needs more than one
        with FlopCounterMode(display=False) as counter:
            out = method.projector(method.backbone(x))
            if getattr(method, "predictor", None) is not None:
                method.predictor(out)
    except Exception:  # noqa: BLE001 - any model the meta device cannot run: the cost model's default
        return None
    return counter.get_total_flops() / 2

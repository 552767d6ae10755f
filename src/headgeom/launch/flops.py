"""Forward FLOPs of one image through a training run's model: backbone, projector and predictor.

The cost model of :mod:`headgeom.launch.cost` needs a per-image cost of a training cell's model
(backbone, its width, the head). Rather than a table per backbone, the backbone is built and one
image of the run's size is passed through it with a forward hook on every ``nn.Conv2d`` and
``nn.Linear``, which adds 2 · (output elements) · (inputs per output: in_channels / groups × kernel
area, or in_features): multiply and add counted apart, biases, normalisation and activations not
counted, as ``torch.utils.flop_counter.FlopCounterMode`` counts them (the tests compare the two);
products that are not layers (a ViT's attention scores) are left out. FlopCounterMode itself is not
used here: its first use imports sympy, seconds that a run's start should not pay, and so does
running on the ``meta`` device. The heads are read from their specs, as
:func:`headgeom.methods.build_method` resolves them, and counted as their Linear layers,
2 · Σ wᵢ · wᵢ₊₁. Backbones are counted once per options and image size (a plan of many cells shares
them); one that cannot be built or run (a custom backbone) or a head that does not resolve gives None,
and the cost model falls back to its default.
"""
from __future__ import annotations

import functools
import json
import math
from typing import Any, Mapping

import torch
from torch import nn

from headgeom.backbones import get_backbone
from headgeom.heads.resolution import resolve_head
from headgeom.io import json_safe
from headgeom.methods import get_method_class

__all__ = ["backbone_flops", "forward_flops", "head_flops", "image_side", "layer_flops"]

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


def layer_flops(module: nn.Module, x: torch.Tensor) -> float:
    """FLOPs of ``module(x)`` in its ``nn.Conv2d`` and ``nn.Linear`` layers (module docstring)."""
    total = [0.0]

    def conv(m: nn.Conv2d, _: Any, out: torch.Tensor) -> None:
        total[0] += 2.0 * out.numel() * (m.in_channels // m.groups) * math.prod(m.kernel_size)

    def linear(m: nn.Linear, _: Any, out: torch.Tensor) -> None:
        total[0] += 2.0 * out.numel() * m.in_features

    hooks = [m.register_forward_hook(conv if isinstance(m, nn.Conv2d) else linear)
             for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        with torch.no_grad():
            module(x)
    finally:
        for h in hooks:
            h.remove()
    return total[0]


@functools.lru_cache(maxsize=64)
def backbone_flops(name: str, options: str, side: int) -> tuple[float, int] | None:
    """(forward FLOPs of one ``side`` × ``side`` image, feature width) of the backbone ``name`` with
    ``options`` (JSON); None when it cannot be built or run."""
    try:
        backbone = get_backbone(name, **json.loads(options)).eval()
        flops = layer_flops(backbone, torch.zeros(1, 3, side, side))
    except Exception:  # noqa: BLE001 - a backbone that cannot be counted: the cost model's default
        return None
    return flops, int(backbone.feature_dim)


def head_flops(train: Mapping[str, Any], in_dim: int) -> float | None:
    """FLOPs of one vector through the run's projector (and predictor, for a method that has one),
    resolved from their specs as build_method resolves them; None when a spec does not resolve."""
    try:
        cls = get_method_class(str(train.get("method")))
        source = f"backbone {train.get('backbone')!r}"
        heads = [resolve_head(train.get("head"), in_dim, role="projector", source=source, default=cls.default_head)]
        if cls.HAS_PREDICTOR:
            heads.append(resolve_head(train.get("predictor"), heads[0].out_dim, role="predictor", source="projector",
                                      default=cls.default_predictor))
    except (TypeError, ValueError):
        return None
    return float(sum(2 * a * b for spec in heads for a, b in zip(spec.widths, spec.widths[1:])))


def forward_flops(train: Mapping[str, Any]) -> float | None:
    """FLOPs of one image's forward pass through the backbone, the projector and the predictor of the
    run ``train`` (a ``TrainConfig.to_dict()``) at :func:`image_side`; None when not countable."""
    options = json.dumps(json_safe(dict(train.get("backbone_options") or {})), sort_keys=True)  # a hashable cache key
    counted = backbone_flops(str(train.get("backbone")), options, image_side(train))
    if counted is None:
        return None
    flops, width = counted
    head = head_flops(train, width)
    return None if head is None else flops + head

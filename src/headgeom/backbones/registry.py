"""Backbones by name: ``BACKBONES`` maps a name to its builder, ``get_backbone`` builds one.

Every backbone maps (N, C, H, W) images to (N, feature_dim) features and carries an int
``feature_dim`` attribute. Builders take keyword options only; unknown names or options raise
with the list of what is accepted, so configs and the CLI fail early and clearly.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from torch import nn

from .resnet import resnet18, resnet50
from .vit import vit_small, vit_tiny

__all__ = ["BACKBONES", "BackboneSpec", "get_backbone"]

BACKBONES: dict[str, Callable[..., nn.Module]] = {
    "resnet18": resnet18,  # CIFAR ResNet-18 of docs/paper.md §3 by default (3×3 stem, no max-pool)
    "resnet50": resnet50,  # torchvision ResNet-50 trunk (DINO / VICReg / Barlow Twins releases)
    "vit_tiny": vit_tiny,  # the paper's 3-layer CIFAR ViT-Tiny, no final LayerNorm
    "vit_small": vit_small,  # DINO ViT-S/16
}


def _accepted(builder: Callable[..., nn.Module]) -> list[str]:
    return [p.name for p in inspect.signature(builder).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def get_backbone(name: str, **kwargs: Any) -> nn.Module:
    """Build the backbone registered as ``name`` with keyword options ``kwargs``.

    Raises:
        ValueError: unknown ``name`` (the message lists the registered names).
        TypeError: an option the builder does not take (the message lists those it takes).
    """
    if not isinstance(name, str) or name not in BACKBONES:
        raise ValueError(f"unknown backbone {name!r}; choose one of {sorted(BACKBONES)}.")
    builder = BACKBONES[name]
    accepted = _accepted(builder)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise TypeError(f"backbone {name!r} does not take option(s) {unknown}; it accepts {accepted}.")
    model = builder(**kwargs)
    if not isinstance(getattr(model, "feature_dim", None), int):
        raise TypeError(f"builder for {name!r} returned a module without an int feature_dim attribute.")
    return model


@dataclass(frozen=True)
class BackboneSpec:
    """A backbone as data: registry name plus builder options, e.g. BackboneSpec("resnet18", {"width": 0.5})."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> nn.Module:
        return get_backbone(self.name, **dict(self.options))

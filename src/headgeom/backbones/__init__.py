"""Backbones f: images (N, C, H, W) -> representations z (N, feature_dim) (docs/paper.md §1, §3).

ResNets carry torchvision's key names and ViTs DINO's, so official checkpoints load with
``load_state_dict``; build them by name with ``get_backbone``.
"""

from .registry import BACKBONES, BackboneSpec, get_backbone
from .resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet50
from .vit import VisionTransformer, interpolate_pos_embed, vit_small, vit_tiny

__all__ = [
    "BACKBONES",
    "BackboneSpec",
    "get_backbone",
    "BasicBlock",
    "Bottleneck",
    "ResNet",
    "resnet18",
    "resnet50",
    "VisionTransformer",
    "interpolate_pos_embed",
    "vit_small",
    "vit_tiny",
]

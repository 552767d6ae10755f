"""Backbone architecture read off a state dict's keys and shapes (headgeom.backbones naming).

ResNets use torchvision's keys and ViTs DINO's (see headgeom.backbones), so the keys say which
family it is, and the shapes give depth, width, stem and patch size. The number of ViT
attention heads is invisible in the tensors (``qkv`` is (3·D, D) for any head count); it
defaults to embed_dim // 64, the rule of DINO's ViT-S/B and of timm's ViT-Ti/S/B.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from torch import Tensor

from headgeom.checkpoints.heads_from_state import CheckpointArchitectureError

__all__ = ["infer_backbone"]


def _stage_blocks(state: Mapping[str, Tensor], stage: int) -> int:
    prefix = f"layer{stage}."
    return len({k.split(".")[1] for k in state if k.startswith(prefix)})


def _resnet(state: Mapping[str, Tensor]) -> tuple[str, dict[str, Any], list[str]]:
    stem = state["conv1.weight"]
    if stem.ndim != 4 or stem.shape[-1] not in (3, 7):
        raise CheckpointArchitectureError(
            f"conv1.weight has shape {tuple(stem.shape)}; a ResNet stem is (C, in, 7, 7) (ImageNet) or "
            f"(C, in, 3, 3) (CIFAR)."
        )
    bottleneck = "layer1.0.conv3.weight" in state
    blocks = tuple(_stage_blocks(state, s) for s in range(1, 5))
    if bottleneck and blocks == (3, 4, 6, 3):
        name = "resnet50"
    elif not bottleneck and blocks == (2, 2, 2, 2):
        name = "resnet18"
    else:
        kind = "Bottleneck" if bottleneck else "BasicBlock"
        raise CheckpointArchitectureError(
            f"the state dict is a ResNet with {kind} blocks {blocks} per stage; headgeom builds only "
            f"resnet18 (BasicBlock, (2, 2, 2, 2)) and resnet50 (Bottleneck, (3, 4, 6, 3))."
        )
    width = int(stem.shape[0]) / 64
    kwargs: dict[str, Any] = {"cifar_stem": stem.shape[-1] == 3, "in_chans": int(stem.shape[1])}
    if width != 1.0:
        kwargs["width"] = width
    notes = [f"backbone {name} ({'CIFAR 3x3' if kwargs['cifar_stem'] else 'ImageNet 7x7'} stem, width "
             f"{width:g}) inferred from the tensors."]
    return name, kwargs, notes


def _vit(state: Mapping[str, Tensor], num_heads: int | None) -> tuple[str, dict[str, Any], list[str]]:
    proj = state["patch_embed.proj.weight"]  # (D, C, p, p)
    dim, in_chans, patch = int(proj.shape[0]), int(proj.shape[1]), int(proj.shape[2])
    depth = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    n_patch = int(state["pos_embed"].shape[1]) - 1
    grid = math.isqrt(n_patch)
    if grid * grid != n_patch:
        raise CheckpointArchitectureError(f"pos_embed holds {n_patch} patch positions, not a square grid.")
    notes = []
    if num_heads is None:
        if dim % 64:
            raise CheckpointArchitectureError(
                f"embed_dim {dim} is not a multiple of 64, so the number of attention heads cannot be "
                f"guessed; pass num_heads=..."
            )
        num_heads = dim // 64
        notes.append(f"num_heads={num_heads} assumed (embed_dim // 64, DINO's rule; the tensors do not say).")
    fc1 = state.get("blocks.0.mlp.fc1.weight")
    kwargs: dict[str, Any] = {
        "img_size": grid * patch, "patch_size": patch, "in_chans": in_chans, "embed_dim": dim,
        "depth": depth, "num_heads": num_heads,
        "mlp_ratio": (int(fc1.shape[0]) / dim) if fc1 is not None else 4.0,
        "qkv_bias": "blocks.0.attn.qkv.bias" in state, "final_norm": "norm.weight" in state,
    }
    notes.insert(0, f"backbone ViT (patch {patch}, dim {dim}, depth {depth}, {grid}x{grid} grid) inferred "
                    f"from the tensors.")
    return "vit", kwargs, notes


def infer_backbone(state: Mapping[str, Tensor], num_heads: int | None = None) -> tuple[str, dict[str, Any], list[str]]:
    """(name, builder kwargs, notes) of the backbone whose tensors are ``state``.

    ``name`` is "resnet18" / "resnet50" (``headgeom.backbones.get_backbone``) or "vit"
    (``headgeom.backbones.VisionTransformer(**kwargs)``).
    """
    if "conv1.weight" in state and "layer1.0.conv1.weight" in state:
        return _resnet(state)
    if "patch_embed.proj.weight" in state and "pos_embed" in state and "cls_token" in state:
        return _vit(state, num_heads)
    keys = list(state)
    shown = ", ".join(keys[:6]) + (", ..." if len(keys) > 6 else "")
    raise CheckpointArchitectureError(
        f"the backbone tensors ({len(keys)} keys: {shown or 'none'}) are neither a torchvision-named ResNet "
        f"(conv1.weight, layer1.0.conv1.weight, ...) nor a DINO-named ViT (cls_token, pos_embed, "
        f"patch_embed.proj.weight, blocks.*); headgeom cannot build this architecture."
    )

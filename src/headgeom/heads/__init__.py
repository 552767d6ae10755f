"""Projection heads built from typed specs (HeadSpec), compact strings and named presets.

>>> from headgeom.heads import head_from
>>> head = head_from("512-2048-2048:silu:nobias")      # or head_from("paper_projector")
>>> [type(m).__name__ for m in head.layers]
['Linear', 'SiLU', 'Linear']
"""
from headgeom.heads.activations import (
    ACTIVATION_REGISTRY,
    ACTIVATIONS,
    ALIASES,
    ActivationDef,
    ActParam,
    canonical_act,
    get_act,
    is_identity,
    valid_activation_names,
)
from headgeom.heads.build import L2Normalize, ProjectionHead, build_layers, head_from, scale_linear_weights_
from headgeom.heads.presets import HEAD_PRESETS, get_head_spec
from headgeom.heads.spec import LAST_NORMS, NORMS, HeadSpec, parse_head

__all__ = [
    "ACTIVATION_REGISTRY", "ACTIVATIONS", "ALIASES", "ActivationDef", "ActParam", "canonical_act", "get_act", "is_identity",
    "valid_activation_names", "L2Normalize", "ProjectionHead", "build_layers", "head_from",
    "scale_linear_weights_", "HEAD_PRESETS", "get_head_spec", "LAST_NORMS", "NORMS", "HeadSpec",
    "parse_head",
]

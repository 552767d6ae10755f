"""Batched on-device augmentations (pure torch) and differentiable augmentation families.

- :mod:`~headgeom.augment.functional`: pure ops on (N, 3, H, W) batches in [0, 1], one
  parameter per sample, differentiable in image and parameter (``torch.func.jvp`` works).
- :mod:`~headgeom.augment.random_ops`: random ops ``op(x, generator) -> x``.
- :mod:`~headgeom.augment.recipes`: each SSL method's recipe, ``get_recipe(name, size)``.
- :mod:`~headgeom.augment.families`: families t_ξ for orbits and tangents (docs/paper.md §1, §3).

Colour ops act on [0, 1] pixels; normalisation is the separate last step (docs/paper.md §4, pitfall 6).
"""

from headgeom.augment.families import FAMILIES, AugmentationFamily, get_family, orbit, orbit_values, tangent
from headgeom.augment.functional import normalize
from headgeom.augment.random_ops import (
    ColorJitter,
    Compose,
    GaussianBlur,
    Normalize,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomRotation,
    Solarization,
)
from headgeom.augment.recipes import RECIPES, MultiCrop, Recipe, get_recipe

__all__ = [
    "FAMILIES", "AugmentationFamily", "get_family", "orbit", "orbit_values", "tangent", "normalize",
    "ColorJitter", "Compose", "GaussianBlur", "Normalize", "RandomGrayscale", "RandomHorizontalFlip",
    "RandomResizedCrop", "RandomRotation", "Solarization", "RECIPES", "MultiCrop", "Recipe", "get_recipe",
]

"""Orbit features: N images × K parameter steps of one augmentation family through the backbone
and every head layer (docs/paper.md §3 "Orbits" and "Pretrained"; §4 pitfalls 5-6).

For each batch of images the orbit t_{ξ_k}(x) (headgeom.augment.families.orbit) is built on
[0, 1] pixels, *then* normalised by (x − mean) / std (colour families act before normalisation,
pitfall 6), run through the backbone in eval mode under no_grad in one batched pass of
(images × steps), and read at every feature point of headgeom.eval.features (``"z"``, then
``"head.<i>"`` after each leaf layer of the head; the last head point is h(z)). Heads read raw z
by default; ``head_input="l2"`` gives the paper's h(z / ‖z‖) (pitfall 5) as ``"l2z/head.<i>"``.

The orbit's anchor is the image at the family's identity value (ξ = 0 for rotation and hue, 1
for saturation): read from the orbit when the identity lies on the grid, otherwise the clean
image is appended to the same forward pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from headgeom.augment.families import AugmentationFamily, get_family, orbit, orbit_values
from headgeom.eval.features import Heads, as_head_chain, eval_mode, feature_points, point_names
from headgeom.threads import torch_threads

__all__ = ["OrbitFeatures", "as_unit_images", "eval_mode", "extract_orbits", "run_points",
           "torch_threads"]


@dataclass
class OrbitFeatures:
    """Features of one family's orbits.

    features: point name -> (N, K, D_point) float32 CPU; anchors: point name -> (N, D_point).
    xi: the K parameter values; anchor_step: the step index of the identity, or None when the
    anchor was a separate forward pass of the clean image.
    """

    family: str
    xi: list[float]
    identity_value: float
    units: str
    features: dict[str, Tensor]
    anchors: dict[str, Tensor]
    anchor_step: int | None
    meta: dict = field(default_factory=dict)

    @property
    def points(self) -> list[str]:
        return list(self.features)


def as_unit_images(images: Tensor) -> Tensor:
    """uint8 (N, 3, H, W) -> float32 in [0, 1]; a float batch must already be in [0, 1]."""
    if not isinstance(images, Tensor) or images.ndim != 4:
        shape = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(f"images must be a (N, C, H, W) tensor, got {shape}")
    if images.shape[0] == 0:
        raise ValueError("no images to build orbits from (N = 0)")
    if images.dtype == torch.uint8:
        return images.float().div_(255.0)
    if not images.dtype.is_floating_point:
        raise TypeError(f"images must be uint8 or float in [0, 1], got dtype {images.dtype}")
    lo, hi = float(images.min()), float(images.max())
    if lo < -1e-6 or hi > 1 + 1e-6:
        raise ValueError(f"float images must be [0, 1] pixels before normalisation (colour "
                         f"augmentations act on them, docs/paper.md §4 pitfall 6); got values in "
                         f"[{lo:.3g}, {hi:.3g}]: pass unnormalised pixels and mean/std instead")
    return images.float()


def run_points(z: Tensor, chain: list[tuple[str, Callable]], variants: Sequence[str]) -> dict[str, Tensor]:
    """Every feature point for representations z (B, d): "z" and each variant's head points."""
    out = {"z": z}
    for variant in variants if chain else ():
        out.update(feature_points(z, chain, variant))
    return out


def _identity_step(xi: list[float], identity: float) -> int | None:
    for k, v in enumerate(xi):
        if math.isclose(v, identity, rel_tol=0.0, abs_tol=1e-9):
            return k
    return None


def extract_orbits(backbone: Callable[[Tensor], Tensor], images: Tensor,
                   family: str | AugmentationFamily, steps: int,
                   heads: Heads | Callable | None = None, *,
                   head_input: str | Sequence[str] = "raw",
                   value_range: tuple[float, float] | None = None, batch_size: int = 256,
                   device: torch.device | str = "cpu", mean: Sequence[float] | None = None,
                   std: Sequence[float] | None = None,
                   aux_threads: int | None = 1) -> OrbitFeatures:
    """Orbit features of ``images`` under ``family`` at ``steps`` values over ``value_range``.

    Args:
        backbone: images (B, 3, H, W) -> z (B, d); eval mode, no grad.
        images: uint8 (N, 3, H, W), or float pixels in [0, 1].
        heads: None, one head, or an ordered mapping name -> head (chained, as in
            headgeom.eval.features).
        head_input: "raw" (default), "l2" (the paper's h(z/‖z‖)) or both.
        value_range: (lo, hi) of ξ; default the family's range.
        batch_size: backbone batch size in augmented images (images per batch = batch_size // K).
        mean, std: per-channel normalisation applied after the augmentation (None: none).
        aux_threads: intra-op threads for the augmentation, normalisation and copies around the
            backbone and heads (see :func:`torch_threads`; None keeps torch's setting).
    Returns:
        OrbitFeatures with features (N, K, D) and anchors (N, D) for every point.
    """
    fam = get_family(family)
    x_all = as_unit_images(images)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps must be an int >= 2 (an orbit needs two points), got {steps!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    if (mean is None) != (std is None):
        raise ValueError(f"give both mean and std or neither, got mean={mean}, std={std}")
    names = point_names(heads, head_input)  # validates head_input and the chain
    variants = [head_input] if isinstance(head_input, str) else list(head_input)
    chain = as_head_chain(heads)
    xi = orbit_values(fam, steps, value_range)
    anchor_step = _identity_step(xi, fam.identity_value)
    extra = 0 if anchor_step is not None else 1
    n, k = x_all.shape[0], steps
    per_batch = max(1, batch_size // (k + extra))
    if mean is not None:
        m = torch.tensor(mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
        s = torch.tensor(std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    feats: dict[str, list[Tensor]] = {p: [] for p in names}
    anchors: dict[str, list[Tensor]] = {p: [] for p in names}
    with eval_mode([backbone] + [h for _, h in chain]), torch.no_grad():
        for start in range(0, n, per_batch):
            x = x_all[start:start + per_batch].to(device)
            b = x.shape[0]
            with torch_threads(aux_threads):
                orb = orbit(x, fam, k, value_range).reshape(b * k, *x.shape[1:])
                batch = orb if extra == 0 else torch.cat([orb, x])
                if mean is not None:
                    batch = (batch - m) / s
            z = backbone(batch)
            if z.ndim != 2 or z.shape[0] != batch.shape[0]:
                raise ValueError(f"backbone must return (B, d) features, got shape "
                                 f"{tuple(z.shape)} for a batch of {batch.shape[0]} images")
            points = run_points(z, chain, variants)
            with torch_threads(aux_threads):
                for p, v in points.items():
                    v = v.float().cpu()
                    orbit_part = v[:b * k].reshape(b, k, -1)
                    feats[p].append(orbit_part)
                    anchors[p].append(orbit_part[:, anchor_step] if extra == 0 else v[b * k:])
    with torch_threads(aux_threads):
        features = {p: torch.cat(v) for p, v in feats.items()}
        anchor_features = {p: torch.cat(v) for p, v in anchors.items()}
    return OrbitFeatures(
        family=fam.name, xi=xi, identity_value=fam.identity_value, units=fam.units,
        features=features, anchors=anchor_features, anchor_step=anchor_step,
        meta={"head_input": variants, "mean": None if mean is None else list(mean),
              "std": None if std is None else list(std), "batch_size": batch_size,
              "aux_threads": aux_threads},
    )

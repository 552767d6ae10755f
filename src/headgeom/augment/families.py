"""Parametrised continuous augmentation families t_ξ for orbits and tangent vectors.

docs/paper.md §1: the augmentation tangent space at x is V_aug = span{∂ f(t_ξ(x)) / ∂ξ} over the
continuous parameters ξ of the families below. Each family is one scalar parameter per
sample, ``apply(x, ξ)`` is differentiable in ξ (forward and reverse mode), and
``range`` is the default orbit interval of the paper's protocol (docs/paper.md §3): rotation
0-330° (12 steps of 30°, ResNet orbits) and 0-45° (pretrained), hue ±0.4, saturation 0-2,
Gaussian blur σ 0.1-3.0. Geometric families pad with zeros, as torchvision's rotate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.func import jvp

from headgeom.augment import functional as AF

Tensor = torch.Tensor


@dataclass(frozen=True)
class AugmentationFamily:
    """A one-parameter family t_ξ acting on image batches.

    fn(x, xi): x (N, C, H, W), xi (N,) -> (N, C, H, W). ``identity_value`` gives t_ξ = id;
    ``tangent_value`` (default: the identity) is where :func:`tangent` differentiates.
    """

    name: str
    fn: Callable[[Tensor, Tensor], Tensor]
    identity_value: float
    range: tuple[float, float]
    units: str = ""
    tangent_value: float | None = None

    def apply(self, x: Tensor, xi: float | Tensor) -> Tensor:
        """t_ξ(x); ``xi`` a number, a 0-d tensor (broadcast) or a tensor of shape (N,)."""
        AF.check_images(x)
        return self.fn(x, AF.as_param(xi, x, f"xi of family {self.name!r}"))

    @property
    def tangent_point(self) -> float:
        return self.identity_value if self.tangent_value is None else self.tangent_value


def _rotation(x: Tensor, xi: Tensor) -> Tensor:
    return AF.rotate(x, xi, padding_mode="zeros")


def _translate_x(x: Tensor, xi: Tensor) -> Tensor:
    return AF.translate(x, xi, 0.0, padding_mode="zeros")


def _translate_y(x: Tensor, xi: Tensor) -> Tensor:
    return AF.translate(x, 0.0, xi, padding_mode="zeros")


def _scale(x: Tensor, xi: Tensor) -> Tensor:
    return AF.scale(x, xi, padding_mode="zeros")


def _blur(x: Tensor, xi: Tensor) -> Tensor:
    # The kernel covers ±3σ for σ up to 3 (the orbit's top), capped to fit the image.
    return AF.gaussian_blur(x, xi, AF.default_kernel_size(3.0, x.shape[-2], x.shape[-1]))


FAMILIES: dict[str, AugmentationFamily] = {
    f.name: f
    for f in (
        AugmentationFamily("rotation", _rotation, 0.0, (0.0, 330.0), "degrees, counter-clockwise"),
        AugmentationFamily("rotation_45", _rotation, 0.0, (0.0, 45.0), "degrees (pretrained orbits)"),
        AugmentationFamily("hue", AF.adjust_hue, 0.0, (-0.4, 0.4), "turns of the HSV hue circle"),
        AugmentationFamily("saturation", AF.adjust_saturation, 1.0, (0.0, 2.0), "blend factor"),
        # Brightness/contrast: ColorJitter(0.4)'s factor interval.
        AugmentationFamily("brightness", AF.adjust_brightness, 1.0, (0.6, 1.4), "factor"),
        AugmentationFamily("contrast", AF.adjust_contrast, 1.0, (0.6, 1.4), "factor"),
        # σ = 0 is the identity, but the discrete Gaussian's taps exp(-t²/2σ²) are flat to all
        # orders there, so the tangent would be 0: differentiate at σ = 1 instead.
        AugmentationFamily("blur", _blur, 0.0, (0.1, 3.0), "sigma in pixels", tangent_value=1.0),
        # Translation ±1/8 of the side = ±4 px on 32×32, the CIFAR pad-4 crop; scale ±20 %.
        AugmentationFamily("translate_x", _translate_x, 0.0, (-0.125, 0.125), "fraction of W, +right"),
        AugmentationFamily("translate_y", _translate_y, 0.0, (-0.125, 0.125), "fraction of H, +down"),
        AugmentationFamily("scale", _scale, 1.0, (0.8, 1.2), "zoom factor"),
    )
}


def get_family(name: str | AugmentationFamily) -> AugmentationFamily:
    """The registered family ``name`` (an AugmentationFamily passes through)."""
    if isinstance(name, AugmentationFamily):
        return name
    if name not in FAMILIES:
        raise ValueError(f"unknown augmentation family {name!r}; available: {sorted(FAMILIES)}")
    return FAMILIES[name]


def orbit(x: Tensor, family: str | AugmentationFamily, steps: int,
          range: tuple[float, float] | None = None) -> Tensor:
    """Orbit t_ξ(x) at ``steps`` equally spaced ξ over ``range`` (endpoints included).

    x: (N, C, H, W) -> (N, K, C, H, W) with K = steps; default range is the family's.
    """
    fam = get_family(family)
    AF.check_images(x)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    lo, hi = fam.range if range is None else range
    n, k = x.shape[0], steps
    xi = torch.linspace(lo, hi, k, dtype=x.dtype, device=x.device)
    rep = x.unsqueeze(1).expand(n, k, *x.shape[1:]).reshape(n * k, *x.shape[1:])
    out = fam.apply(rep, xi.repeat(n))
    return out.reshape(n, k, *x.shape[1:])


def orbit_values(family: str | AugmentationFamily, steps: int,
                 range: tuple[float, float] | None = None) -> list[float]:
    """The ξ values :func:`orbit` uses, for labelling."""
    fam = get_family(family)
    lo, hi = fam.range if range is None else range
    return torch.linspace(lo, hi, steps, dtype=torch.float64).tolist()


def tangent(fn: Callable[[Tensor], Tensor], x: Tensor, family: str | AugmentationFamily,
            xi0: float | Tensor | None = None) -> Tensor:
    """Per-sample tangent d fn(t_ξ(x)) / dξ at ξ = xi0, by forward mode (``torch.func.jvp``).

    fn maps images (N, C, H, W) to features (N, ...) row by row (e.g. a backbone in eval
    mode: BatchNorm in train mode couples samples and mixes their tangents). Returns
    (N, ...) like fn's output. xi0 defaults to the family's ``tangent_point``.
    """
    fam = get_family(family)
    AF.check_images(x)
    xi = AF.as_param(fam.tangent_point if xi0 is None else xi0, x, "xi0").clone()  # not an expand view
    # Each sample has its own ξ_i, so one jvp with tangent 1 gives every sample's derivative.
    _, t = jvp(lambda v: fn(fam.apply(x, v)), (xi,), (torch.ones_like(xi),))
    return t


__all__ = ["AugmentationFamily", "FAMILIES", "get_family", "orbit", "orbit_values", "tangent"]

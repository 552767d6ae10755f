"""Random batched augmentations: ``op(x, generator) -> x`` on image batches ``(N, 3, H, W)``.

Each op draws one set of parameters per sample from the passed ``torch.Generator`` (on the
generator's device, then moved to the images'), so a batch is augmented in a few tensor
operations with no Python loop over samples, and a seed reproduces it exactly. The
semantics and default ranges follow torchvision.transforms, applied per sample as
torchvision does per image; images stay in [0, 1] (normalise last, docs/paper.md §4 pitfall 6).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from headgeom.augment import functional as AF

Tensor = torch.Tensor
Op = Callable[[Tensor, torch.Generator], Tensor]


def _check_generator(generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"expected a torch.Generator, got {type(generator).__name__}; "
            "pass e.g. torch.Generator().manual_seed(0) so that augmentations are reproducible"
        )
    return generator


def uniform(n: int, low: float, high: float, generator: torch.Generator, like: Tensor,
            shape: tuple[int, ...] = ()) -> Tensor:
    """U(low, high) of shape ``(n, *shape)``, drawn on the generator's device, cast like ``like``."""
    u = torch.rand((n, *shape), generator=_check_generator(generator), device=generator.device,
                   dtype=torch.float64)
    return (low + (high - low) * u).to(device=like.device, dtype=like.dtype)


def bernoulli_mask(n: int, p: float, generator: torch.Generator, like: Tensor) -> Tensor:
    """Boolean (N, 1, 1, 1): which samples get the op, each with probability p."""
    return (uniform(n, 0.0, 1.0, generator, like) < p).view(n, 1, 1, 1)


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability p must be in [0, 1], got {p}")


def _pair(value: float | Sequence[float], name: str, *, symmetric_about: float,
          lower: float | None = None) -> tuple[float, float]:
    """torchvision's range rule: v -> (center - v, center + v) (clipped at ``lower``), or a pair."""
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
        lo, hi = symmetric_about - value, symmetric_about + value
        if lower is not None:
            lo = max(lo, lower)
    else:
        lo, hi = (float(v) for v in value)
    if lo > hi:
        raise ValueError(f"{name} range must have low <= high, got ({lo}, {hi})")
    return float(lo), float(hi)


@dataclass(frozen=True)
class RandomResizedCrop:
    """torchvision's RandomResizedCrop: area fraction ~ U(scale), log aspect ~ U(log ratio),
    up to ``attempts`` tries per sample, else a centre crop with the ratio clamped.

    Boxes are integer-valued (torchvision rounds h, w); resizing is bilinear without antialias.
    """

    size: int | tuple[int, int]
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    attempts: int = 10

    def __post_init__(self) -> None:
        s0, s1 = self.scale
        r0, r1 = self.ratio
        if not 0 < s0 <= s1 <= 1:
            raise ValueError(f"scale must satisfy 0 < low <= high <= 1, got {self.scale}")
        if not 0 < r0 <= r1:
            raise ValueError(f"ratio must satisfy 0 < low <= high, got {self.ratio}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")

    def sample_boxes(self, n: int, height: int, width: int, generator: torch.Generator,
                     like: Tensor) -> Tensor:
        """(N, 4) boxes (top, left, height, width) in pixels, with ``like``'s dtype and device."""
        ref = torch.empty((), dtype=torch.float64, device=like.device)
        t = self.attempts
        area = height * width * uniform(n, *self.scale, generator, ref, (t,))
        aspect = torch.exp(uniform(n, math.log(self.ratio[0]), math.log(self.ratio[1]), generator, ref, (t,)))
        w = torch.round(torch.sqrt(area * aspect))
        h = torch.round(torch.sqrt(area / aspect))
        ok = (w > 0) & (w <= width) & (h > 0) & (h <= height)
        first = torch.argmax(ok.to(torch.int8), dim=1, keepdim=True)  # first valid attempt
        found = ok.any(dim=1)
        w, h = w.gather(1, first).squeeze(1), h.gather(1, first).squeeze(1)
        # Fallback (torchvision): whole image with the aspect ratio clamped into ``ratio``.
        in_ratio = width / height
        if in_ratio < self.ratio[0]:
            fw, fh = width, round(width / self.ratio[0])
        elif in_ratio > self.ratio[1]:
            fw, fh = round(height * self.ratio[1]), height
        else:
            fw, fh = width, height
        w = torch.where(found, w, torch.full_like(w, fw))
        h = torch.where(found, h, torch.full_like(h, fh))
        top = torch.floor(uniform(n, 0.0, 1.0, generator, ref) * (height - h + 1)).clamp_max(height - h)
        left = torch.floor(uniform(n, 0.0, 1.0, generator, ref) * (width - w + 1)).clamp_max(width - w)
        top = torch.where(found, top, torch.full_like(top, (height - fh) // 2))
        left = torch.where(found, left, torch.full_like(left, (width - fw) // 2))
        return torch.stack([top, left, h, w], dim=-1).to(like.dtype)

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        AF.check_images(x)
        n, _, height, width = x.shape
        return AF.resized_crop(x, self.sample_boxes(n, height, width, generator, x), self.size, differentiable=False)


@dataclass(frozen=True)
class RandomHorizontalFlip:
    """Mirror each sample with probability p."""

    p: float = 0.5

    def __post_init__(self) -> None:
        _check_p(self.p)

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        AF.check_images(x)
        return torch.where(bernoulli_mask(x.shape[0], self.p, generator, x), x.flip(-1), x)


@dataclass(frozen=True)
class ColorJitter:
    """torchvision's ColorJitter applied with probability p (SimCLR's RandomApply(..., p=0.8)).

    Factors: brightness/contrast/saturation v -> U(max(0, 1 - v), 1 + v), hue v -> U(-v, v)
    (or give (low, high) pairs). With ``random_order`` (default, as torchvision) each sample
    applies the four in its own random order; otherwise the fixed order b, c, s, h.
    """

    brightness: float | tuple[float, float] = 0.0
    contrast: float | tuple[float, float] = 0.0
    saturation: float | tuple[float, float] = 0.0
    hue: float | tuple[float, float] = 0.0
    p: float = 1.0
    random_order: bool = True

    def __post_init__(self) -> None:
        _check_p(self.p)
        lo, hi = self.ranges()[3]
        if not -0.5 <= lo <= hi <= 0.5:
            raise ValueError(f"hue range must lie in [-0.5, 0.5] (torchvision), got ({lo}, {hi})")

    def ranges(self) -> list[tuple[float, float]]:
        """(low, high) for brightness, contrast, saturation, hue."""
        return [
            _pair(self.brightness, "brightness", symmetric_about=1.0, lower=0.0),
            _pair(self.contrast, "contrast", symmetric_about=1.0, lower=0.0),
            _pair(self.saturation, "saturation", symmetric_about=1.0, lower=0.0),
            _pair(self.hue, "hue", symmetric_about=0.0),
        ]

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """Each op is applied to the samples that take it at that place of their order, and only to
        those (every op acts per sample, so a sample's result does not depend on the others)."""
        AF.check_images(x, rgb=True)
        n = x.shape[0]
        fns = (AF.adjust_brightness, AF.adjust_contrast, AF.adjust_saturation,
               functools.partial(AF.adjust_hue, differentiable=False))  # training views: no derivative
        identity = (1.0, 1.0, 1.0, 0.0)
        active = [j for j, r in enumerate(self.ranges()) if r != (identity[j], identity[j])]
        params = {j: uniform(n, *self.ranges()[j], generator, x) for j in active}
        if self.random_order:
            order = torch.argsort(uniform(n, 0.0, 1.0, generator, x, (4,)), dim=1)
        else:
            order = torch.arange(4, device=x.device).expand(n, 4)
        applied = bernoulli_mask(n, self.p, generator, x).view(n)
        out = x.clone()
        for step in range(4):
            for j in active:
                idx = torch.nonzero(applied & (order[:, step] == j)).squeeze(1)
                if idx.numel():
                    out[idx] = fns[j](out[idx], params[j][idx])
        return out


@dataclass(frozen=True)
class RandomGrayscale:
    """Replace each sample by its 3-channel ITU-R 601 grayscale with probability p."""

    p: float = 0.1

    def __post_init__(self) -> None:
        _check_p(self.p)

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        AF.check_images(x, rgb=True)
        gray = AF.to_grayscale(x, num_output_channels=3)
        return torch.where(bernoulli_mask(x.shape[0], self.p, generator, x), gray, x)


@dataclass(frozen=True)
class GaussianBlur:
    """Blur with σ ~ U(sigma) per sample, with probability p (SimCLR/BYOL/DINO: σ in [0.1, 2]).

    ``kernel_size=None`` covers ±3σ_max (capped to fit the image), close to PIL's
    GaussianBlur(radius=σ) used by the official BYOL/DINO/VICReg/Barlow Twins code.
    """

    p: float = 0.5
    sigma: tuple[float, float] = (0.1, 2.0)
    kernel_size: int | None = None

    def __post_init__(self) -> None:
        _check_p(self.p)
        if not 0 <= self.sigma[0] <= self.sigma[1]:
            raise ValueError(f"sigma must satisfy 0 <= low <= high, got {self.sigma}")

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        AF.check_images(x)
        n, _, h, w = x.shape
        k = self.kernel_size or AF.default_kernel_size(self.sigma[1], h, w)
        sigma = uniform(n, *self.sigma, generator, x)
        mask = bernoulli_mask(n, self.p, generator, x)
        return torch.where(mask, AF.gaussian_blur(x, sigma, k), x)


@dataclass(frozen=True)
class Solarization:
    """Solarise (x -> 1 - x above ``threshold``) with probability p (BYOL: p = 0.2 on view 2)."""

    p: float = 0.2
    threshold: float = 0.5

    def __post_init__(self) -> None:
        _check_p(self.p)

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        AF.check_images(x)
        mask = bernoulli_mask(x.shape[0], self.p, generator, x)
        return torch.where(mask, AF.solarize(x, self.threshold), x)


@dataclass(frozen=True)
class RandomRotation:
    """Rotate by an angle ~ U(-degrees, degrees) (or U(low, high)), zeros padding (torchvision fill=0)."""

    degrees: float | tuple[float, float]
    padding_mode: str = "zeros"

    def __post_init__(self) -> None:
        _pair(self.degrees, "degrees", symmetric_about=0.0)
        AF._check_padding(self.padding_mode)

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        AF.check_images(x)
        lo, hi = _pair(self.degrees, "degrees", symmetric_about=0.0)
        return AF.rotate(x, uniform(x.shape[0], lo, hi, generator, x), self.padding_mode, differentiable=False)


@dataclass(frozen=True)
class Normalize:
    """Per-channel (x - mean) / std: the separate last step (draws no randomness)."""

    mean: tuple[float, ...]
    std: tuple[float, ...]

    def __call__(self, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return AF.normalize(x, self.mean, self.std)


@dataclass(frozen=True)
class Compose:
    """Apply ops in order, all drawing from the same generator."""

    ops: tuple[Op, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        for op in self.ops:
            if not callable(op):
                raise TypeError(f"Compose needs callables op(x, generator), got {type(op).__name__}")

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        _check_generator(generator)
        for op in self.ops:
            x = op(x, generator)
        return x

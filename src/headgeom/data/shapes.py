"""``shapes``: an embedded procedural dataset of 10 shape classes, the offline default.

Each image is one shape on a background; the class is the shape kind. Colour, background
gradient, noise texture, position, scale and rotation vary per image, so a model must learn
shape, not colour. Rendering is vectorised over images with signed-distance functions on a
pixel grid and anti-aliased edges (coverage = clamp(½ − sdf / pixel, 0, 1)); everything is
drawn from one ``torch.Generator``, so a seed fixes the dataset exactly.
"""

from __future__ import annotations

import math

import torch

from .dataset import ImageDataset

__all__ = ["SHAPE_CLASSES", "load_shapes", "make_shapes", "shape_sdf", "shapes_seed"]

SHAPE_CLASSES: tuple[str, ...] = ("disk", "square", "triangle", "ring", "cross", "star",
                                  "ellipse", "stripes", "checker", "crescent")
DEFAULT_SIZES = {"train": 10_000, "test": 2_000}
_CHUNK = 2048

# Shape geometry in local units: every shape lies within radius √2·0.8 ≈ 1.13 of its centre,
# so with scale ≤ 0.62 and |centre| ≤ 0.3 it stays (almost always wholly) inside the image.
MAX_RADIUS = math.sqrt(2) * 0.8
DISK_R = 0.9
SQUARE_HALF = 0.75
TRIANGLE_INRADIUS = 0.5           # equilateral, apex up, circumradius 1
RING_R, RING_HALF_WIDTH = 0.7, 0.22
CROSS_HALF_LEN, CROSS_HALF_WIDTH = 0.9, 0.28
STAR_POINTS, STAR_OUTER, STAR_INNER = 5, 1.0, 0.42
ELLIPSE_A, ELLIPSE_B = 1.0, 0.5
PATCH_HALF = 0.8                  # stripes and checker patches
PATTERN_FREQ = 2.5                # stripe / checker periods per unit length
CRESCENT_R, CRESCENT_CUT_R, CRESCENT_CUT = 0.9, 0.75, (0.45, 0.15)


def _box(x: torch.Tensor, y: torch.Tensor, hx: float, hy: float) -> torch.Tensor:
    return torch.maximum(x.abs() - hx, y.abs() - hy)


def shape_sdf(kind: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Signed distance (negative inside, approximate away from the edge) of a shape.

    ``x``, ``y``: local coordinates of any shape (y up). Patterns of ``stripes``/``checker``
    are not part of the outline; see :func:`shape_pattern`.
    """
    r = torch.sqrt(x * x + y * y)
    if kind == "disk":
        return r - DISK_R
    if kind in ("square", "stripes", "checker"):
        half = SQUARE_HALF if kind == "square" else PATCH_HALF
        return _box(x, y, half, half)
    if kind == "triangle":
        edges = [x * math.cos(a) + y * math.sin(a)
                 for a in (-math.pi / 2, math.pi / 6, 5 * math.pi / 6)]
        return torch.maximum(torch.maximum(edges[0], edges[1]), edges[2]) - TRIANGLE_INRADIUS
    if kind == "ring":
        return (r - RING_R).abs() - RING_HALF_WIDTH
    if kind == "cross":
        return torch.minimum(_box(x, y, CROSS_HALF_LEN, CROSS_HALF_WIDTH),
                             _box(x, y, CROSS_HALF_WIDTH, CROSS_HALF_LEN))
    if kind == "star":
        # radius varies linearly in angle between tips (outer) and notches (inner)
        t = torch.remainder(torch.atan2(y, x) * (STAR_POINTS / (2 * math.pi)), 1.0)
        radius = STAR_INNER + (STAR_OUTER - STAR_INNER) * (2 * t - 1).abs()
        return (r - radius) * 0.6  # 0.6 ≈ the boundary's slope, for anti-aliasing only
    if kind == "ellipse":
        return (torch.sqrt((x / ELLIPSE_A) ** 2 + (y / ELLIPSE_B) ** 2) - 1.0) * ELLIPSE_B
    if kind == "crescent":
        cut = torch.sqrt((x - CRESCENT_CUT[0]) ** 2 + (y - CRESCENT_CUT[1]) ** 2)
        return torch.maximum(r - CRESCENT_R, CRESCENT_CUT_R - cut)
    raise ValueError(f"unknown shape {kind!r}; expected one of {SHAPE_CLASSES}")


def shape_pattern(kind: str, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
    """Signed pattern inside a patch (> 0: foreground colour, < 0: second colour), or None."""
    if kind == "stripes":
        return torch.sin(math.pi * PATTERN_FREQ * x)
    if kind == "checker":
        return torch.sin(math.pi * PATTERN_FREQ * x) * torch.sin(math.pi * PATTERN_FREQ * y)
    return None


def _coverage(signed: torch.Tensor, pixel: torch.Tensor) -> torch.Tensor:
    """Anti-aliased coverage in [0, 1] of {signed < 0}; ``pixel`` is one pixel in the same units."""
    return (0.5 - signed / pixel).clamp_(0.0, 1.0)


def _draw_params(n: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    u = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    bg = u(n, 3)
    return {
        "labels": torch.randperm(n, generator=g).remainder_(len(SHAPE_CLASSES)),
        "cx": u(n) * 0.6 - 0.3, "cy": u(n) * 0.6 - 0.3,       # centre, image spans [-1, 1]
        "scale": 0.38 + 0.24 * u(n),                          # shape radius in image units
        "angle": 2 * math.pi * u(n),
        "bg": bg,
        "fg": torch.remainder(bg + 0.3 + 0.4 * u(n, 3), 1.0),  # every channel differs ≥ 0.3
        "grad_amp": 0.25 * u(n), "grad_dir": 2 * math.pi * u(n),
        "shade": 0.2 * u(n) - 0.1,
        "noise": 0.08 * u(n),                                 # std of luminance grain
    }


def _render(p: dict[str, torch.Tensor], size: int, g: torch.Generator) -> torch.Tensor:
    """float32 (n, 3, size, size) in [0, 1] for one chunk of parameters."""
    n = p["labels"].shape[0]
    coords = (torch.arange(size, dtype=torch.float32) + 0.5) * (2.0 / size) - 1.0
    gy, gx = torch.meshgrid(-coords, coords, indexing="ij")    # y up, row 0 at the top
    dx = gx - p["cx"].view(n, 1, 1)
    dy = gy - p["cy"].view(n, 1, 1)
    cos, sin = torch.cos(p["angle"]).view(n, 1, 1), torch.sin(p["angle"]).view(n, 1, 1)
    scale = p["scale"].view(n, 1, 1)
    lx = (dx * cos + dy * sin) / scale
    ly = (-dx * sin + dy * cos) / scale
    pixel = (2.0 / size) / scale                                # one pixel in local units
    mask = torch.empty(n, size, size)
    mix = torch.ones(n, size, size)                             # 1: fg colour, 0: second colour
    for k, kind in enumerate(SHAPE_CLASSES):
        idx = (p["labels"] == k).nonzero(as_tuple=True)[0]
        if idx.numel() == 0:
            continue
        x, y, px = lx[idx], ly[idx], pixel[idx]
        mask[idx] = _coverage(shape_sdf(kind, x, y), px)
        pattern = shape_pattern(kind, x, y)
        if pattern is not None:
            slope = math.pi * PATTERN_FREQ * (2.0 if kind == "checker" else 1.0)
            mix[idx] = _coverage(-pattern / slope, px)
    # image = bg + w·(fg − bg) with w = coverage · pattern; the per-pixel terms (background
    # ramp, foreground shading, luminance grain) are single-channel, which keeps this cheap.
    w = mask.mul_(mix)
    ramp = gx * torch.cos(p["grad_dir"]).view(n, 1, 1) + gy * torch.sin(p["grad_dir"]).view(n, 1, 1)
    ramp.mul_(0.5 * p["grad_amp"].view(n, 1, 1))
    shade = lx.mul_(p["shade"].view(n, 1, 1))
    grain = torch.randn(n, size, size, generator=g).mul_(p["noise"].view(n, 1, 1))
    flat = ramp.add_(w * (shade - ramp)).add_(grain)
    bg_c, fg_c = p["bg"].view(n, 3, 1, 1), p["fg"].view(n, 3, 1, 1)
    img = w.unsqueeze(1) * (fg_c - bg_c)
    img.add_(bg_c).add_(flat.unsqueeze(1))
    return img.clamp_(0.0, 1.0)


def make_shapes(n: int, seed: int = 0, size: int = 32, split: str = "train") -> ImageDataset:
    """Render ``n`` images (uint8 (n, 3, size, size)) with balanced labels from ``seed``.

    Class counts differ by at most one. The same (n, seed, size) always gives the same bytes.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int ≥ 8 pixels, got {size!r}")
    g = torch.Generator().manual_seed(int(seed))
    params = _draw_params(n, g)
    images = torch.empty(n, 3, size, size, dtype=torch.uint8)
    for start in range(0, n, _CHUNK):
        chunk = {k: v[start:start + _CHUNK] for k, v in params.items()}
        images[start:start + _CHUNK] = _render(chunk, size, g).mul_(255.0).round_().to(torch.uint8)
    return ImageDataset(images, params["labels"].long(), list(SHAPE_CLASSES), "shapes", split)


def shapes_seed(seed: int, split: str) -> int:
    """The generator seed of a split: train and test never share one (2·seed + 0 / 1)."""
    offsets = {"train": 0, "test": 1}
    if split not in offsets:
        raise ValueError(f"shapes has splits {tuple(offsets)}, got {split!r}")
    return 2 * int(seed) + offsets[split]


def load_shapes(split: str = "train", n: int | None = None, seed: int = 0, size: int = 32
                ) -> ImageDataset:
    """The ``shapes`` split: 10,000 train / 2,000 test images by default, disjoint seeds."""
    seed_used = shapes_seed(seed, split)
    return make_shapes(DEFAULT_SIZES[split] if n is None else n, seed_used, size, split)

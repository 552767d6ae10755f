"""The procedural ``shapes`` dataset: geometry against closed-form areas, determinism, balance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from headgeom.data import SHAPE_CLASSES, load_dataset, make_shapes
from headgeom.data import shapes as S


def lens_area(R: float, r: float, d: float) -> float:
    """Area of the intersection of two disks (radii R, r, centre distance d)."""
    a = r * r * math.acos((d * d + r * r - R * R) / (2 * d * r))
    b = R * R * math.acos((d * d + R * R - r * r) / (2 * d * R))
    c = 0.5 * math.sqrt((-d + r + R) * (d + r - R) * (d - r + R) * (d + r + R))
    return a + b - c


def star_area() -> float:
    """½ ∮ R(φ)² dφ for the star's piecewise-linear radius, by a fine midpoint rule."""
    phi = (np.arange(200_000) + 0.5) * (2 * np.pi / 200_000)
    t = (phi * S.STAR_POINTS / (2 * np.pi)) % 1.0
    radius = S.STAR_INNER + (S.STAR_OUTER - S.STAR_INNER) * np.abs(2 * t - 1)
    return float(0.5 * np.sum(radius ** 2) * (2 * np.pi / 200_000))


AREAS = {
    "disk": math.pi * S.DISK_R ** 2,
    "square": (2 * S.SQUARE_HALF) ** 2,
    "triangle": 3 * math.sqrt(3) * S.TRIANGLE_INRADIUS ** 2,
    "ring": math.pi * ((S.RING_R + S.RING_HALF_WIDTH) ** 2 - (S.RING_R - S.RING_HALF_WIDTH) ** 2),
    "cross": 2 * (2 * S.CROSS_HALF_LEN) * (2 * S.CROSS_HALF_WIDTH) - (2 * S.CROSS_HALF_WIDTH) ** 2,
    "star": star_area(),
    "ellipse": math.pi * S.ELLIPSE_A * S.ELLIPSE_B,
    "stripes": (2 * S.PATCH_HALF) ** 2,
    "checker": (2 * S.PATCH_HALF) ** 2,
    "crescent": math.pi * S.CRESCENT_R ** 2 - lens_area(
        S.CRESCENT_R, S.CRESCENT_CUT_R, math.hypot(*S.CRESCENT_CUT)),
}


@pytest.fixture(scope="module")
def fine_grid():
    coords = torch.linspace(-1.25, 1.25, 1001, dtype=torch.float64)
    y, x = torch.meshgrid(coords, coords, indexing="ij")
    return x, y, (2.5 / 1000) ** 2


@pytest.mark.parametrize("kind", SHAPE_CLASSES)
def test_shape_area_matches_closed_form(kind, fine_grid):
    x, y, cell = fine_grid
    area = float((S.shape_sdf(kind, x, y) < 0).sum()) * cell
    assert area == pytest.approx(AREAS[kind], rel=0.01), kind


def test_shapes_fit_in_stated_radius(fine_grid):
    x, y, _ = fine_grid
    for kind in SHAPE_CLASSES:
        m = S.shape_sdf(kind, x, y) < 0
        assert (x[m] ** 2 + y[m] ** 2).max().sqrt() <= S.MAX_RADIUS + 1e-9, kind


def test_outlines_differ_at_every_rotation():
    """No two outlines overlap by more than IoU 0.85 however one is rotated (15° steps).

    The closest pair is disk vs square (IoU ≈ 0.80: they differ by the square's corners,
    ~30 pixels at the typical scale); stripes/checker share the square outline but differ
    in their fill pattern (tested below).
    """
    coords = torch.linspace(-1.25, 1.25, 251, dtype=torch.float64)
    y, x = torch.meshgrid(coords, coords, indexing="ij")
    outlines = [k for k in SHAPE_CLASSES if k not in ("stripes", "checker")]
    angles = torch.arange(0, 360, 15, dtype=torch.float64) * math.pi / 180
    cos, sin = torch.cos(angles).view(-1, 1, 1), torch.sin(angles).view(-1, 1, 1)
    xr, yr = x * cos + y * sin, -x * sin + y * cos          # (24, 251, 251)
    for i, a in enumerate(outlines):
        ma = S.shape_sdf(a, x, y) < 0
        for b in outlines[i + 1:]:
            mb = S.shape_sdf(b, xr, yr) < 0
            iou = ((ma & mb).sum((1, 2)) / (ma | mb).sum((1, 2))).max()
            assert float(iou) < 0.85, (a, b, float(iou))


@pytest.mark.parametrize("kind", ["stripes", "checker"])
def test_patterns_split_patch_in_half(kind, fine_grid):
    x, y, _ = fine_grid
    inside = S.shape_sdf(kind, x, y) < 0
    fraction = float((S.shape_pattern(kind, x, y)[inside] > 0).double().mean())
    assert 0.35 < fraction < 0.65


def test_deterministic_per_seed_and_differs_across_seeds():
    a, b, c = make_shapes(300, seed=3), make_shapes(300, seed=3), make_shapes(300, seed=4)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)
    assert (a.images.float() - c.images.float()).abs().mean() > 20


def test_dtype_shape_range_and_balance():
    ds = make_shapes(1000, seed=0)
    assert ds.images.dtype == torch.uint8 and ds.images.shape == (1000, 3, 32, 32)
    assert ds.labels.dtype == torch.int64 and ds.classes == list(SHAPE_CLASSES)
    assert ds.class_counts().tolist() == [100] * 10
    assert int(ds.images.min()) == 0 and int(ds.images.max()) == 255  # full range is used
    f = ds.to_float()
    assert f.dtype == torch.float32 and 0.0 <= float(f.min()) and float(f.max()) <= 1.0
    uneven = make_shapes(1003, seed=1).class_counts()
    assert int(uneven.sum()) == 1003 and int(uneven.max() - uneven.min()) <= 1


def test_images_vary_in_colour_and_position():
    ds = make_shapes(500, seed=0)
    x = ds.to_float()
    mean_colour = x.mean(dim=(2, 3))                       # (N, 3)
    assert float(mean_colour.std(dim=0).min()) > 0.1
    # where the shape is: pixels far from the image's corner (background) colour
    corner = x[:, :, :2, :2].mean(dim=(2, 3), keepdim=True)
    fg = ((x - corner).abs().sum(1) > 0.6).float()        # (N, H, W)
    rows = torch.arange(32.0).view(1, 32, 1)
    centre_row = (fg * rows).sum((1, 2)) / fg.sum((1, 2)).clamp_min(1)
    assert float(centre_row.std()) > 2.0                   # shapes move around
    area = fg.mean((1, 2))
    assert float(area.std()) > 0.03                        # and change size


def test_splits_use_distinct_seeds_and_registry():
    train = load_dataset("shapes", "train", n=200, seed=5)
    test = load_dataset("shapes", "test", n=200, seed=5)
    assert (train.split, test.split) == ("train", "test")
    assert torch.equal(train.images, make_shapes(200, seed=10).images)
    assert torch.equal(test.images, make_shapes(200, seed=11).images)
    assert not torch.equal(train.images, test.images)
    assert len(load_dataset("shapes", "test")) == 2000
    assert load_dataset("shapes", n=20, size=16).images.shape == (20, 3, 16, 16)
    with pytest.raises(ValueError, match="splits"):
        load_dataset("shapes", "val")


def test_bad_arguments():
    with pytest.raises(ValueError, match="positive"):
        make_shapes(0)
    with pytest.raises(ValueError, match="size"):
        make_shapes(10, size=4)
    with pytest.raises(ValueError, match="unknown shape"):
        S.shape_sdf("blob", torch.zeros(1), torch.zeros(1))

"""headgeom.augment.recipes: view counts and shapes, the quoted settings, multi-crop, registry."""

from __future__ import annotations

import pytest
import torch

from headgeom.augment import recipes as R
from headgeom.augment.random_ops import (
    ColorJitter,
    GaussianBlur,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomRotation,
    Solarization,
)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def images(n=4, size=16):
    return torch.rand(n, 3, size, size, generator=gen(0))


def op_types(view):
    return [type(op) for op in view.ops]


def find(view, cls):
    return [op for op in view.ops if isinstance(op, cls)]


@pytest.mark.parametrize("name", sorted(set(R.RECIPES) - {"dino"}))
def test_two_view_recipes_shapes_and_range(name):
    x = images(size=16)
    views = R.get_recipe(name, 12)(x, gen(1))
    assert isinstance(views, tuple) and len(views) == 2
    for v in views:
        assert v.shape == (4, 3, 12, 12)
        assert v.min() >= 0 and v.max() <= 1  # no normalisation unless asked
    assert not torch.equal(views[0], views[1])
    again = R.get_recipe(name, 12)(x, gen(1))
    assert all(torch.equal(a, b) for a, b in zip(views, again))


def test_normalisation_is_the_last_step():
    x = images()
    mean, std = R.CIFAR10_MEAN, R.CIFAR10_STD
    raw = R.get_recipe("simclr", 16)(x, gen(2))
    normed = R.get_recipe("simclr", 16, mean=mean, std=std)(x, gen(2))
    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)
    for a, b in zip(raw, normed):
        torch.testing.assert_close(b, (a - m) / s)
    with pytest.raises(ValueError, match="both mean and std"):
        R.get_recipe("simclr", 16, mean=mean)


def test_simclr_settings():
    view = R.get_recipe("simclr", 32).views[0]
    crop, = find(view, RandomResizedCrop)
    jit, = find(view, ColorJitter)
    assert crop.scale == (0.08, 1.0)
    assert (jit.brightness, jit.contrast, jit.saturation, jit.hue, jit.p) == (0.4, 0.4, 0.4, 0.1, 0.8)
    assert find(view, RandomGrayscale)[0].p == 0.2
    assert not find(view, GaussianBlur)  # CIFAR variant: blur off


def test_paper_recipes_settings():
    view = R.get_recipe("paper_simclr", 32).views[0]
    assert op_types(view) == [RandomResizedCrop, RandomHorizontalFlip, RandomRotation, ColorJitter]
    assert find(view, RandomRotation)[0].degrees == 45.0
    jit, = find(view, ColorJitter)
    assert (jit.brightness, jit.contrast, jit.saturation, jit.hue, jit.p) == (0.4, 0.4, 0.4, 0.1, 0.8)
    simsiam = R.get_recipe("paper_simsiam", 32)
    assert op_types(simsiam.views[0]) == [RandomResizedCrop, RandomHorizontalFlip]
    assert simsiam.views[0].ops[0].scale == (0.2, 1.0)
    assert simsiam.mean is None


@pytest.mark.parametrize("name", ["byol", "vicreg", "barlow_twins"])
def test_byol_style_asymmetry(name):
    v1, v2 = R.get_recipe(name, 32).views
    assert [op.p for op in find(v1, GaussianBlur)] == [1.0]
    assert [op.p for op in find(v2, GaussianBlur)] == [0.1]
    assert [op.p for op in find(v1, Solarization)] == [0.0]
    assert [op.p for op in find(v2, Solarization)] == [0.2]
    jit, = find(v1, ColorJitter)
    assert (jit.brightness, jit.contrast, jit.saturation, jit.hue, jit.p) == (0.4, 0.4, 0.2, 0.1, 0.8)


def test_simsiam_official_order():
    view = R.get_recipe("simsiam", 32).views[0]
    expected = [RandomResizedCrop, ColorJitter, RandomGrayscale, GaussianBlur, RandomHorizontalFlip]
    assert op_types(view) == expected
    assert view.ops[0].scale == (0.2, 1.0)


def test_multicrop_counts_and_sizes():
    x = images(n=3, size=20)
    mc = R.MultiCrop(16, 6, n_local=3)
    views = mc(x, gen(0))
    assert isinstance(views, list) and len(views) == 5
    assert [tuple(v.shape) for v in views] == [(3, 3, 16, 16)] * 2 + [(3, 3, 6, 6)] * 3
    assert all(v.min() >= 0 and v.max() <= 1 for v in views)
    assert len(R.MultiCrop(16, 6, n_local=0)(x, gen(0))) == 2
    gcrop = mc._pipelines[0].ops[0]
    lcrop = mc._pipelines[2].ops[0]
    assert gcrop.scale == (0.4, 1.0) and lcrop.scale == (0.05, 0.4)


def test_dino_recipe_defaults():
    x = images(n=2, size=32)
    views = R.get_recipe("dino", 32)(x, gen(0))
    assert isinstance(views, tuple) and len(views) == 10  # 2 global + 8 local (DINO default)
    assert [v.shape[-1] for v in views] == [32, 32] + [14] * 8  # 32 * 96 / 224 = 13.7
    assert R.get_recipe("dino", 224, n_local=2).views[0].local_size == 96


def test_registry_errors():
    with pytest.raises(ValueError, match="unknown augmentation recipe 'simclrr'.*available"):
        R.get_recipe("simclrr", 32)
    with pytest.raises(ValueError, match="positive int"):
        R.get_recipe("simclr", 0)

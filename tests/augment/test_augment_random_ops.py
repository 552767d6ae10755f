"""headgeom.augment.random_ops: reproducibility, per-sample randomness, ranges and semantics."""

from __future__ import annotations

import pytest
import torch

from headgeom.augment import functional as AF
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
    bernoulli_mask,
    uniform,
)

LUMA = (0.299, 0.587, 0.114)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def images(n=6, h=12, w=12, seed=0):
    return torch.rand(n, 3, h, w, generator=gen(seed))


OPS = [
    RandomResizedCrop(10),
    RandomHorizontalFlip(0.5),
    ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8),
    RandomGrayscale(0.5),
    GaussianBlur(p=0.5),
    Solarization(p=0.5),
    RandomRotation(30.0),
    Compose((RandomResizedCrop(8), RandomHorizontalFlip(), ColorJitter(0.4, 0.4, 0.2, 0.1))),
]


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_reproducible_and_seed_dependent_and_in_range(op):
    x = images(n=16)
    a, b = op(x, gen(3)), op(x, gen(3))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    c = op(x, gen(4))
    assert not torch.equal(a, c)
    assert a.min() >= 0 and a.max() <= 1


# Ops applied to identical images must still give different outputs per sample.
BATCHED = [RandomResizedCrop(10), ColorJitter(0.4, 0.4, 0.4, 0.1), GaussianBlur(p=1.0), RandomRotation(30.0)]


@pytest.mark.parametrize("op", BATCHED, ids=lambda op: type(op).__name__)
def test_per_sample_parameters_differ(op):
    x = images(n=1).expand(8, -1, -1, -1).contiguous()
    y = op(x, gen(0)).flatten(1)
    dists = torch.cdist(y, y)
    off = dists[~torch.eye(8, dtype=torch.bool)]
    assert off.min() > 1e-4  # no two samples got the same parameters


def boxes_for(op, n, h, w, seed=0):
    return op.sample_boxes(n, h, w, gen(seed), torch.empty(0, dtype=torch.float64))


@pytest.mark.parametrize("hw", [(32, 32), (24, 40)])
@pytest.mark.parametrize("scale,ratio", [((0.08, 1.0), (3 / 4, 4 / 3)), ((0.2, 0.5), (0.5, 2.0))])
def test_resized_crop_boxes_respect_bounds(hw, scale, ratio):
    h_img, w_img = hw
    b = boxes_for(RandomResizedCrop(8, scale=scale, ratio=ratio), 4000, h_img, w_img)
    top, left, h, w = b.unbind(-1)
    assert torch.equal(b, b.round())  # integer boxes like torchvision
    assert (h >= 1).all() and (w >= 1).all()
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + h <= h_img).all() and (left + w <= w_img).all()
    area = h_img * w_img
    # h, w are rounded from sqrt(a / r), sqrt(a r): allow half a pixel each way.
    assert ((w + 0.5) * (h + 0.5) >= scale[0] * area).all()
    assert ((w - 0.5) * (h - 0.5) <= scale[1] * area).all()
    assert ((w + 0.5) / (h - 0.5) >= ratio[0]).all()
    assert ((w - 0.5) / (h + 0.5) <= ratio[1]).all()
    # Positions are spread over the image, not always one corner.
    assert top.unique().numel() > 5 and left.unique().numel() > 5


def test_resized_crop_fallback_is_centre_crop_with_clamped_ratio():
    # Area 1 with aspect >= 2 never fits a square image: torchvision's fallback.
    b = boxes_for(RandomResizedCrop(8, scale=(1.0, 1.0), ratio=(2.0, 3.0)), 50, 20, 20)
    expected = torch.tensor([5.0, 0.0, 10.0, 20.0], dtype=torch.float64)  # w = W, h = W / 2, centred
    torch.testing.assert_close(b, expected.expand(50, 4))


def test_resized_crop_uses_its_boxes():
    op = RandomResizedCrop((6, 5), scale=(0.3, 0.9))
    x = images(n=5)
    boxes = op.sample_boxes(5, 12, 12, gen(7), x)
    # training views sample with F.grid_sample (no derivative is taken of them: augment.functional)
    torch.testing.assert_close(op(x, gen(7)), AF.resized_crop(x, boxes, (6, 5), differentiable=False), rtol=0, atol=0)
    assert op(x, gen(7)).shape == (5, 3, 6, 5)


def test_flip_is_per_sample_bernoulli():
    x = images(n=400, h=4, w=4)
    y = RandomHorizontalFlip(0.5)(x, gen(1))
    same = (y == x).flatten(1).all(1)
    flipped = (y == x.flip(-1)).flatten(1).all(1)
    assert (same | flipped).all()
    assert 0.4 < flipped.float().mean() < 0.6  # 4 standard deviations of a Binomial(400, 0.5)
    torch.testing.assert_close(RandomHorizontalFlip(1.0)(x, gen(0)), x.flip(-1))
    torch.testing.assert_close(RandomHorizontalFlip(0.0)(x, gen(0)), x)


def test_grayscale_op():
    x = images(n=400, h=4, w=4)
    gray = (LUMA[0] * x[:, 0:1] + LUMA[1] * x[:, 1:2] + LUMA[2] * x[:, 2:3]).expand_as(x)
    torch.testing.assert_close(RandomGrayscale(1.0)(x, gen(0)), gray)
    y = RandomGrayscale(0.5)(x, gen(0))
    is_gray = torch.isclose(y, gray).flatten(1).all(1)
    assert (is_gray | (y == x).flatten(1).all(1)).all()
    assert 0.4 < is_gray.float().mean() < 0.6


def test_brightness_jitter_factors_are_in_torchvision_range():
    n = 64
    x = images(n=n)
    x[:, :, 0, 0] = 0.5  # a known pixel reveals each sample's factor
    y = ColorJitter(brightness=0.4, p=1.0)(x, gen(2))
    b = y[:, 0, 0, 0] / 0.5
    assert (b >= 0.6 - 1e-6).all() and (b <= 1.4 + 1e-6).all()
    assert b.std() > 0.1  # spread over the interval, one factor per sample
    torch.testing.assert_close(y, (b.view(n, 1, 1, 1) * x).clamp(0, 1), rtol=0, atol=1e-5)


def test_hue_jitter_keeps_max_and_min_per_pixel():
    x = images()
    y = ColorJitter(hue=0.5)(x, gen(0))
    torch.testing.assert_close(y.amax(1), x.amax(1), rtol=0, atol=1e-6)
    torch.testing.assert_close(y.amin(1), x.amin(1), rtol=0, atol=1e-6)
    assert not torch.allclose(y, x, atol=1e-3)


def test_jitter_probability_and_ranges():
    x = images()
    torch.testing.assert_close(ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.0)(x, gen(0)), x)
    assert ColorJitter(0.4, 0.4, 0.2, 0.1).ranges() == [(0.6, 1.4), (0.6, 1.4), (0.8, 1.2), (-0.1, 0.1)]
    assert ColorJitter(brightness=1.5).ranges()[0] == (0.0, 2.5)
    with pytest.raises(ValueError, match="hue"):
        ColorJitter(hue=0.6)
    with pytest.raises(ValueError, match="p must be"):
        ColorJitter(0.4, p=1.2)


def _jitter_on_every_sample(op: ColorJitter, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """ColorJitter as it was written before it applied each op to its own samples only: every op on the
    whole batch at each of the four places, the sample's own kept by torch.where (the same draws)."""
    n = x.shape[0]
    fns = (AF.adjust_brightness, AF.adjust_contrast, AF.adjust_saturation, AF.adjust_hue)
    identity = (1.0, 1.0, 1.0, 0.0)
    active = [j for j, r in enumerate(op.ranges()) if r != (identity[j], identity[j])]
    params = {j: uniform(n, *op.ranges()[j], generator, x) for j in active}
    order = (torch.argsort(uniform(n, 0.0, 1.0, generator, x, (4,)), dim=1) if op.random_order
             else torch.arange(4).expand(n, 4))
    out = x
    for step in range(4):
        for j in active:
            out = torch.where((order[:, step] == j).view(n, 1, 1, 1), fns[j](out, params[j]), out)
    return torch.where(bernoulli_mask(n, op.p, generator, x), out, x)


@pytest.mark.parametrize("op", [ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8), ColorJitter(0.4, 0.4, 0.2, 0.1, p=0.8),
                                ColorJitter(0.5, 0.0, 0.5, 0.0, p=1.0, random_order=False), ColorJitter(hue=0.3, p=0.5)])
def test_jitter_on_each_samples_own_ops_is_the_whole_batch_computation_bit_for_bit(op):
    """Each op acts per sample, so applying it to the samples that take it (and only those) gives the
    values of the whole-batch computation exactly, from the same draws."""
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 256, (97, 3, 16, 16), generator=g).float() / 255
    x[:10, 1] = x[:10, 0]
    assert torch.equal(op(x, gen(11)), _jitter_on_every_sample(op, x, gen(11)))


def test_random_order_differs_from_fixed_order():
    # Saturation 0 then hue gives the luma of x; hue then saturation 0 the luma of the
    # hue-rotated image, which differs: the two orders are distinguishable per sample.
    x = images(n=64)
    fixed = ColorJitter(saturation=(0.0, 0.0), hue=(0.3, 0.3), random_order=False)(x, gen(0))
    s_then_h = AF.adjust_hue(AF.adjust_saturation(x, 0.0), 0.3)
    h_then_s = AF.adjust_saturation(AF.adjust_hue(x, 0.3), 0.0)
    assert not torch.allclose(s_then_h, h_then_s, atol=1e-3)
    torch.testing.assert_close(fixed, s_then_h, rtol=0, atol=1e-6)
    rnd = ColorJitter(saturation=(0.0, 0.0), hue=(0.3, 0.3))(x, gen(0))
    is_sh = torch.isclose(rnd, s_then_h, atol=1e-6).flatten(1).all(1)
    is_hs = torch.isclose(rnd, h_then_s, atol=1e-6).flatten(1).all(1)
    assert (is_sh | is_hs).all() and is_sh.any() and is_hs.any()


def test_blur_solarize_rotation_semantics():
    x = images()
    torch.testing.assert_close(GaussianBlur(p=0.0)(x, gen(0)), x)
    torch.testing.assert_close(Solarization(p=1.0)(x, gen(0)), torch.where(x >= 0.5, 1 - x, x))
    torch.testing.assert_close(RandomRotation((90.0, 90.0))(x, gen(0)), torch.rot90(x, 1, dims=(-2, -1)),
                               rtol=0, atol=1e-6)
    blurred = GaussianBlur(p=1.0, sigma=(1.0, 1.0), kernel_size=5)(x, gen(0))
    torch.testing.assert_close(blurred, AF.gaussian_blur(x, 1.0, 5))


def test_compose_and_normalize():
    x = images()
    ops = (RandomHorizontalFlip(), ColorJitter(0.4, 0.4, 0.4, 0.1))
    g = gen(5)
    manual = ops[1](ops[0](x, g), g)
    torch.testing.assert_close(Compose(ops)(x, gen(5)), manual, rtol=0, atol=0)
    norm = Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    torch.testing.assert_close(norm(x, gen(0)), (x - 0.5) / 0.25)


def test_errors():
    x = images()
    with pytest.raises(TypeError, match="torch.Generator"):
        RandomHorizontalFlip()(x, 0)
    with pytest.raises(TypeError, match="callables"):
        Compose((RandomHorizontalFlip(), 3))
    with pytest.raises(ValueError, match="scale"):
        RandomResizedCrop(8, scale=(0.5, 0.2))
    with pytest.raises(ValueError, match="ratio"):
        RandomResizedCrop(8, ratio=(0.0, 1.0))
    with pytest.raises(ValueError, match="sigma"):
        GaussianBlur(sigma=(2.0, 1.0))

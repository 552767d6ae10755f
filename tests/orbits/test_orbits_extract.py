"""Orbit extraction and controls (headgeom.orbits.extract / controls) on a tiny ResNet-18 + head."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.augment.families import get_family, orbit
from headgeom.backbones import resnet18
from headgeom.heads import ProjectionHead, head_from
from headgeom.orbits.controls import fresh_head, head_points_on, random_direction_orbits
from headgeom.orbits.extract import extract_orbits, torch_threads

MEAN, STD = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    backbone = resnet18(width=0.0625)  # 32-d output
    head = head_from("32-16-8:gelu:bn:last=bn")
    for bn in [m for m in list(backbone.modules()) + list(head.modules()) if isinstance(m, nn.BatchNorm2d | nn.BatchNorm1d)]:
        bn.running_mean.uniform_(-0.2, 0.2)  # non-trivial eval statistics
        bn.running_var.uniform_(0.5, 2.0)
    images = torch.randint(0, 256, (5, 3, 16, 16), generator=torch.Generator().manual_seed(1),
                           dtype=torch.uint8)
    return backbone, head, images


def reference(backbone, head, x01: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(z, h(z)) of [0, 1] images, normalised here, in eval mode, computed directly."""
    m = torch.tensor(MEAN).view(1, 3, 1, 1)
    s = torch.tensor(STD).view(1, 3, 1, 1)
    backbone.eval(), head.eval()
    with torch.no_grad():
        z = backbone((x01 - m) / s)
        return z, head(z)


def test_shapes_last_point_and_anchor_on_the_grid(model):
    backbone, head, images = model
    of = extract_orbits(backbone, images, "hue", 5, head, mean=MEAN, std=STD, batch_size=7)
    assert of.points == ["z"] + [f"head.{i}" for i in range(5)]
    dims = {"z": 32, "head.0": 16, "head.1": 16, "head.2": 16, "head.3": 8, "head.4": 8}
    for p, f in of.features.items():
        assert f.shape == (5, 5, dims[p]) and of.anchors[p].shape == (5, dims[p])
        assert f.dtype == torch.float32
    x = images.float() / 255
    orb = orbit(x, "hue", 5).reshape(25, 3, 16, 16)  # colour op on [0, 1] pixels, then normalise
    z, h = reference(backbone, head, orb)
    torch.testing.assert_close(of.features["z"], z.reshape(5, 5, -1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(of.features["head.4"], h.reshape(5, 5, -1), rtol=1e-5, atol=1e-5)
    assert of.xi == pytest.approx([-0.4, -0.2, 0.0, 0.2, 0.4]) and of.anchor_step == 2
    torch.testing.assert_close(of.anchors["head.4"], of.features["head.4"][:, 2])
    # the anchor is the clean image: hue 0 is the identity
    torch.testing.assert_close(of.anchors["z"], reference(backbone, head, x)[0], rtol=1e-5, atol=1e-5)


def test_anchor_off_the_grid_is_a_clean_forward_and_batching_does_not_matter(model):
    backbone, head, images = model
    a = extract_orbits(backbone, images, "saturation", 4, head, mean=MEAN, std=STD, batch_size=1000)
    b = extract_orbits(backbone, images, "saturation", 4, head, mean=MEAN, std=STD, batch_size=3)
    assert a.anchor_step is None  # linspace(0, 2, 4) misses the identity 1
    z, h = reference(backbone, head, images.float() / 255)
    torch.testing.assert_close(a.anchors["z"], z, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.anchors["head.4"], h, rtol=1e-5, atol=1e-5)
    for p in a.features:
        torch.testing.assert_close(a.features[p], b.features[p], rtol=1e-5, atol=1e-5)


def test_l2_variant_feeds_normalised_z_and_modes_are_restored(model):
    backbone, head, images = model
    backbone.train(), head.train()
    of = extract_orbits(backbone, images, "rotation", 3, head, head_input=("raw", "l2"),
                        value_range=(0.0, 90.0), mean=MEAN, std=STD)
    assert backbone.training and head.training
    assert [p for p in of.points if p.startswith("l2z/")] == [f"l2z/head.{i}" for i in range(5)]
    z = of.features["z"].reshape(15, -1)
    head.eval()
    with torch.no_grad():
        want = head(F.normalize(z, dim=-1)).reshape(5, 3, -1)
    head.train()
    torch.testing.assert_close(of.features["l2z/head.4"], want, rtol=1e-5, atol=1e-5)
    assert of.xi == pytest.approx([0.0, 45.0, 90.0])


def test_float_pixels_and_errors(model):
    backbone, head, images = model
    x = images.float() / 255
    a = extract_orbits(backbone, x, "blur", 3, None)
    assert a.points == ["z"] and a.features["z"].shape == (5, 3, 32)
    with pytest.raises(ValueError, match=r"\[0, 1\] pixels before normalisation"):
        extract_orbits(backbone, (x - 0.5) / 0.2, "blur", 3, None)
    with pytest.raises(ValueError, match="unknown augmentation family 'twirl'"):
        extract_orbits(backbone, images, "twirl", 3, head)
    with pytest.raises(ValueError, match="steps must be an int >= 2"):
        extract_orbits(backbone, images, "hue", 1, head)
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        extract_orbits(backbone, images[0], "hue", 3, head)
    with pytest.raises(ValueError, match="mean and std"):
        extract_orbits(backbone, images, "hue", 3, head, mean=MEAN)
    with pytest.raises(ValueError, match=r"expects inputs with last dim 16, got shape \(15, 32\)"):
        extract_orbits(backbone, images, "hue", 3, head_from("16-8:relu"))
    with pytest.raises(ValueError, match="head_input"):
        extract_orbits(backbone, images, "hue", 3, head, head_input="unit")


def test_random_direction_control_keeps_each_orbits_mean_and_size():
    g = torch.Generator().manual_seed(2)
    z = torch.randn(6, 7, 20, generator=g) * torch.linspace(0.1, 3, 6).view(6, 1, 1) + 1.0
    r = random_direction_orbits(z, seed=0)
    zd, rd = z.double(), r.double()
    torch.testing.assert_close(rd.mean(dim=1), zd.mean(dim=1), rtol=1e-6, atol=1e-6)
    size = lambda a: (a - a.mean(dim=1, keepdim=True)).pow(2).sum(dim=(1, 2))  # noqa: E731
    torch.testing.assert_close(size(rd), size(zd), rtol=1e-5, atol=0)
    assert torch.equal(r, random_direction_orbits(z, seed=0))
    assert not torch.equal(r, random_direction_orbits(z, seed=1))
    # the directions are new: displacements barely correlate with the real ones
    cos = F.cosine_similarity((rd - rd.mean(1, keepdim=True)).flatten(1),
                              (zd - zd.mean(1, keepdim=True)).flatten(1), dim=1)
    assert float(cos.abs().max()) < 0.5
    with pytest.raises(ValueError, match="K >= 2"):
        random_direction_orbits(z[:, :1])


def test_fresh_head_same_architecture_new_weights_seeded():
    head = head_from("12-16-4:relu:bn:last=bn")
    with torch.no_grad():
        head.layers[0].weight.mul_(5.0)
    a, b = fresh_head(head, seed=3), fresh_head(head, seed=3)
    assert isinstance(a, ProjectionHead) and a.spec == head.spec
    assert torch.equal(a.layers[0].weight, b.layers[0].weight)
    assert not torch.equal(a.layers[0].weight, head.layers[0].weight)
    assert not torch.equal(a.layers[0].weight, fresh_head(head, seed=4).layers[0].weight)
    plain = nn.Sequential(nn.Linear(12, 8), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 4))
    with torch.no_grad():
        plain[1].running_mean.fill_(3.0)
    state = torch.get_rng_state()
    fp = fresh_head(plain, seed=0)
    assert torch.equal(torch.get_rng_state(), state)  # the global RNG is untouched
    assert [type(m) for m in fp] == [type(m) for m in plain]
    assert not torch.equal(fp[0].weight, plain[0].weight) and float(fp[1].running_mean.abs().max()) == 0
    with pytest.raises(TypeError, match="nn.Module"):
        fresh_head(lambda z: z)


def test_head_points_on_stored_z_equal_the_head():
    head = head_from("6-5-3:silu").eval()
    z = torch.randn(4, 3, 6)
    pts = head_points_on(z, [("head", head)], ["raw", "l2"], batch_size=5)
    assert pts["z"].shape == (4, 3, 6) and pts["head.2"].shape == (4, 3, 3)
    with torch.no_grad():
        torch.testing.assert_close(pts["head.2"], head(z))
        torch.testing.assert_close(pts["l2z/head.2"], head(F.normalize(z, dim=-1)))
    assert get_family("hue").identity_value == 0.0


def test_torch_threads_is_scoped_and_checked():
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("restored even on error")
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="positive int or None"), torch_threads(0):
        pass

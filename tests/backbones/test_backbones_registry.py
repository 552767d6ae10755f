"""Backbone registry: names, building with options, feature_dim = output width, clear errors."""

from __future__ import annotations

import pytest
import torch

from headgeom.backbones import BACKBONES, BackboneSpec, get_backbone

SMALL = {  # name -> (options that keep the test fast, input side, expected feature_dim)
    "resnet18": ({"width": 0.25}, 32, 128),
    "resnet50": ({"width": 0.125}, 32, 256),
    "vit_tiny": ({}, 32, 192),
    "vit_small": ({"depth": 1, "img_size": 32}, 32, 384),
}


def test_registry_names():
    assert set(BACKBONES) == {"resnet18", "resnet50", "vit_tiny", "vit_small"}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_feature_dim_is_the_output_width(name):
    opts, side, dim = SMALL[name]
    torch.manual_seed(0)
    m = get_backbone(name, **opts).eval()
    assert isinstance(m.feature_dim, int) and m.feature_dim == dim
    with torch.no_grad():
        assert m(torch.randn(2, 3, side, side)).shape == (2, dim)


def test_defaults_are_the_papers_models():
    assert get_backbone("resnet18").feature_dim == 512
    assert get_backbone("resnet18").conv1.kernel_size == (3, 3)  # CIFAR stem by default
    assert get_backbone("resnet50").conv1.kernel_size == (7, 7)  # ImageNet stem by default
    vt = get_backbone("vit_tiny")
    assert (vt.feature_dim, len(vt.blocks), vt.img_size, vt.patch_size) == (192, 3, 32, 4)


def test_spec_builds_the_same_model():
    spec = BackboneSpec("resnet18", {"width": 0.25, "cifar_stem": False})
    torch.manual_seed(1)
    a = spec.build()
    torch.manual_seed(1)
    b = get_backbone("resnet18", width=0.25, cifar_stem=False)
    assert a.conv1.kernel_size == (7, 7)
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())


def test_unknown_name_lists_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown backbone 'resnet34'.*resnet18.*vit_tiny"):
        get_backbone("resnet34")
    with pytest.raises(ValueError, match="unknown backbone"):
        get_backbone(None)  # type: ignore[arg-type]


def test_unknown_option_is_rejected_by_name():
    with pytest.raises(TypeError, match=r"'vit_tiny' does not take option\(s\) \['width'\].*accepts.*depth"):
        get_backbone("vit_tiny", width=0.5)
    with pytest.raises(TypeError, match=r"\['cifar'\]"):
        get_backbone("resnet18", cifar=True)

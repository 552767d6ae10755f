"""load_checkpoint on synthetic files with each official container and key layout.

The reference modules (tests/official_models.py) are small re-writings of the official code, so
their state_dict keys are the official ones by construction. Backbones are headgeom's own
(torchvision / DINO key names) at reduced width; every test checks the detected release and
architecture and that the loaded backbone and head give the outputs of the saved models.
"""
from __future__ import annotations

import argparse

import pytest
import torch

from headgeom.backbones import VisionTransformer, resnet18, resnet50
from headgeom.checkpoints import load_checkpoint, safe_load
from official_models import BarlowTwins, DDP, DINOHead, MultiCropWrapper, SimSiam, VICReg, randomise_

ATOL = 1e-5


def _images(size: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    """|a - b| <= ATOL + 1e-5 |b| elementwise (torch.testing.assert_close would import sympy: +3 s)."""
    assert a.shape == b.shape, (a.shape, b.shape)
    err = (a - b).abs() - (ATOL + 1e-5 * b.abs())
    assert (err <= 0).all(), f"max excess {err.max().item():.3g} at {divmod(int(err.argmax()), a.shape[-1])}"


def _tiny_vit() -> VisionTransformer:
    return VisionTransformer(img_size=16, patch_size=4, embed_dim=128, depth=2, num_heads=2)


@pytest.mark.parametrize("which, legacy", [(None, False), ("student", False), ("teacher", True)])
def test_dino_vit_full_checkpoint(tmp_path, which, legacy):
    torch.manual_seed(0)
    nets = {}
    for name in ("student", "teacher"):
        head = DINOHead(128, 96, nlayers=3, hidden_dim=48, bottleneck_dim=16, norm_last_layer=False)
        with torch.no_grad():  # a trained norm_last_layer=False head: g is no longer 1
            head.last_layer.weight_g.uniform_(0.5, 2.0)
        nets[name] = randomise_(MultiCropWrapper(_tiny_vit(), head), seed=len(name))
    args = argparse.Namespace(arch="vit_small", patch_size=4, out_dim=96, norm_last_layer=False, use_bn_in_head=False)
    path = tmp_path / "dino_deitsmall16_pretrain_full_checkpoint.pth"
    torch.save({"student": DDP(nets["student"]).state_dict(), "teacher": nets["teacher"].state_dict(),
                "optimizer": {"state": {}, "param_groups": [{"lr": 0.1, "params": [0]}]}, "epoch": 100,
                "args": args, "dino_loss": {"center": torch.zeros(1, 96)}}, path,
               _use_new_zipfile_serialization=not legacy)
    assert "module.backbone.cls_token" in safe_load(path).obj["student"]  # the official layout

    m = load_checkpoint(path, which=which)
    ref = nets[which or "teacher"]
    assert m.release == "dino_vit" and m.backbone_name == "vit"
    assert m.backbone_kwargs["embed_dim"] == 128 and m.backbone_kwargs["depth"] == 2
    assert m.backbone_kwargs["patch_size"] == 4 and m.backbone_kwargs["num_heads"] == 2
    assert m.head_spec.to_string() == "128-48-48-96:gelu:dino=16:nonormlast"
    assert m.missing == [] and m.unexpected == []
    assert m.sha256_check.status == "unknown" and "argparse.Namespace" in " ".join(m.notes)
    x = _images(16)
    with torch.no_grad():
        _close(m.backbone(x), ref.backbone(x))
        z = ref.backbone(x)
        _close(m.head(z), ref.head(z))


def test_dino_resnet50_full_checkpoint_with_plain_last_layer(tmp_path):
    """Released head: 2048->4096, BN, GELU, ->256, plain last Linear (here at width 1/16 and tiny widths)."""
    torch.manual_seed(1)
    backbone = resnet50(width=0.0625)  # feature_dim 128
    head = DINOHead(128, 40, use_bn=True, nlayers=2, hidden_dim=64, bottleneck_dim=12, plain_last=True)
    with torch.no_grad():
        head.last_layer.weight[3].zero_()  # a dead output unit must survive the g, v conversion
    teacher = randomise_(MultiCropWrapper(backbone, head), seed=3)
    student = randomise_(MultiCropWrapper(resnet50(width=0.0625), DINOHead(128, 40, use_bn=True, nlayers=2,
                                          hidden_dim=64, bottleneck_dim=12, plain_last=True)), seed=4)
    path = tmp_path / "dino_resnet50_pretrain_full_checkpoint.pth"
    torch.save({"student": DDP(student).state_dict(), "teacher": DDP(teacher).state_dict(), "epoch": 800}, path)

    m = load_checkpoint(path)
    assert m.release == "dino_resnet50" and m.backbone_name == "resnet50"
    assert m.backbone_kwargs == {"width": 0.0625, "cifar_stem": False, "in_chans": 3}
    assert m.head_spec.to_string() == "128-64-40:gelu:bn:dino=12"
    assert m.missing == [] and m.unexpected == []
    assert any("plain Linear" in n for n in m.notes)
    x = _images(16)
    with torch.no_grad():
        z = teacher.backbone(x)
        _close(m.backbone(x), z)
        _close(m.head(z), teacher.head(z))


def _vicreg_file(tmp_path, monkeypatch, legacy=False):
    from test_checkpoints_safe_load import _throwaway_module  # the same throwaway-module recipe

    torch.manual_seed(2)
    model = randomise_(VICReg(resnet50(width=0.0625), 128, "96-96-80"), seed=5)
    name, fn, imported = _throwaway_module(tmp_path, monkeypatch)
    opt = {"state": {}, "param_groups": [{"lr": 0, "weight_decay": 1e-6, "weight_decay_filter": fn,
                                          "lars_adaptation_filter": fn, "params": list(range(4))}]}
    path = tmp_path / "resnet50_fullckpt.pth"
    torch.save({"epoch": 1000, "model": DDP(model).state_dict(), "optimizer": opt}, path,
               _use_new_zipfile_serialization=not legacy)
    import sys

    del sys.modules[name]
    imported.unlink()
    return path, model, imported


def test_vicreg_fullckpt_with_pickled_function(tmp_path, monkeypatch):
    path, model, imported = _vicreg_file(tmp_path, monkeypatch)
    m = load_checkpoint(path)
    assert not imported.exists()
    assert m.release == "vicreg" and m.backbone_name == "resnet50"
    assert m.head_spec.to_string() == "128-96-96-80:relu:bn:nolastbias"
    assert any("matches headgeom's 'vicreg' preset" in n for n in m.notes)
    assert any("exclude_bias_and_norm" in n for n in m.notes)
    assert m.missing == [] and m.unexpected == []
    x = _images(16)
    with torch.no_grad():
        z = model.backbone(x)
        _close(m.backbone(x), z)
        _close(m.head(z), model.projector(z))


def test_barlow_twins_checkpoint(tmp_path):
    torch.manual_seed(3)
    model = randomise_(BarlowTwins(resnet50(width=0.0625), 128, "64-64-48"), seed=6)
    opt = {"state": {}, "param_groups": [{"lr": 0, "weight_decay": 1.5e-6, "weight_decay_filter": True,
                                          "lars_adaptation_filter": True, "params": [0, 1]}]}
    path = tmp_path / "checkpoint.pth"
    torch.save({"epoch": 1000, "model": DDP(model).state_dict(), "optimizer": opt}, path)
    m = load_checkpoint(path)
    assert m.release == "barlow_twins"
    assert m.head_spec.to_string() == "128-64-64-48:relu:bn:nobias"
    assert any("matches headgeom's 'barlow_twins' preset" in n for n in m.notes)
    assert "model.bn.*" in m.ignored and m.missing == [] and m.unexpected == []
    x = _images(16)
    with torch.no_grad():
        z = model.backbone(x)
        _close(m.backbone(x), z)
        _close(m.head(z), model.projector(z))


def test_simsiam_checkpoint(tmp_path):
    torch.manual_seed(4)
    model = randomise_(SimSiam(resnet50(width=0.0625), dim=72, pred_dim=24), seed=7)
    with torch.no_grad():
        model.encoder.fc[6].bias.normal_()  # the frozen bias is kept exactly
    params = list(model.parameters())  # torch.optim.SGD(...).state_dict() layout, without importing torch.optim
    opt = {"state": {i: {"momentum_buffer": torch.zeros_like(p)} for i, p in enumerate(params)},
           "param_groups": [{"lr": 0.05, "momentum": 0.9, "dampening": 0, "weight_decay": 1e-4, "nesterov": False,
                             "maximize": False, "foreach": None, "differentiable": False, "fused": None,
                             "params": list(range(len(params)))}]}
    path = tmp_path / "checkpoint_0099.pth.tar"
    torch.save({"epoch": 100, "arch": "resnet50", "state_dict": DDP(model).state_dict(), "optimizer": opt}, path)
    m = load_checkpoint(path)
    assert m.release == "simsiam" and m.backbone_name == "resnet50"
    assert m.head_spec.to_string() == "128-128-128-72:relu:bn:last=bn_noaffine:nobias:lastbias"
    assert m.predictor.spec.to_string() == "72-24-72:relu:bn:nobias:lastbias"
    assert m.missing == [] and m.unexpected == []
    x = _images(16)
    with torch.no_grad():
        z = model.encoder(x)  # headgeom's ResNet.forward stops before fc: the backbone output
        _close(m.backbone(x), z)
        p = model.encoder.fc(z)
        _close(m.head(z), p)
        _close(m.predictor(p), model.predictor(p))


@pytest.mark.parametrize("container", ["bare", "state_dict", "module_prefix"])
def test_torchvision_layout_resnet18_with_classifier(tmp_path, container):
    torch.manual_seed(5)
    net = randomise_(resnet18(width=0.125, cifar_stem=False), seed=8)
    state = dict(net.state_dict())
    state["fc.weight"], state["fc.bias"] = torch.randn(10, 64), torch.randn(10)  # torchvision's classifier
    if container == "module_prefix":
        state = {f"module.{k}": v for k, v in state.items()}
    obj = {"state_dict": state, "epoch": 3} if container == "state_dict" else state
    path = tmp_path / "resnet18.pth"
    torch.save(obj, path)
    m = load_checkpoint(path)
    assert m.release == "torchvision_resnet" and m.backbone_name == "resnet18"
    assert m.backbone_kwargs == {"width": 0.125, "cifar_stem": False, "in_chans": 3}
    assert m.head is None and "fc.*" in m.ignored and m.missing == [] and m.unexpected == []
    x = _images(16)
    with torch.no_grad():
        _close(m.backbone(x), net(x))


def test_plain_vit_and_cifar_resnet_backbones(tmp_path):
    torch.manual_seed(6)
    vit = randomise_(_tiny_vit(), seed=9)
    cifar = randomise_(resnet18(width=0.125), seed=10)  # CIFAR stem: 3x3 conv1
    for net, name, release in ((vit, "vit", "vit_backbone"), (cifar, "resnet18", "torchvision_resnet")):
        path = tmp_path / f"{name}.pth"
        torch.save(net.state_dict(), path)
        m = load_checkpoint(path, strict=True)
        assert (m.release, m.backbone_name) == (release, name)
        x = _images(16)
        with torch.no_grad():
            _close(m.backbone(x), net(x))
    assert load_checkpoint(tmp_path / "resnet18.pth").backbone_kwargs["cifar_stem"] is True


def test_hub_named_file_sha_prefix(tmp_path):
    from headgeom.checkpoints import file_sha256

    net = resnet18(width=0.125)
    tmp = tmp_path / "x.pth"
    torch.save(net.state_dict(), tmp)
    sha = file_sha256(tmp)
    path = tmp.rename(tmp_path / f"resnet18-{sha[:8]}.pth")
    m = load_checkpoint(path)
    assert m.sha256 == sha and m.sha256_check.status == "match"
    assert "sha256 check: match" in m.report()

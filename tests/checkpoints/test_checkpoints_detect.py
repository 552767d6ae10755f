"""Release detection and its error paths: wrong architectures, inconsistent heads, key reports."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from headgeom.backbones import VisionTransformer, resnet18, resnet50
from headgeom.backbones.resnet import BasicBlock, ResNet
from headgeom.checkpoints import CheckpointArchitectureError, detect, load_checkpoint, load_layout
from headgeom.heads import get_head_spec
from headgeom.checkpoints.heads_from_state import (
    _weight_norm_from_plain,
    sequential_modules,
    spec_from_modules,
)


def _small_resnet18_state() -> dict[str, torch.Tensor]:
    return dict(resnet18(width=0.125).state_dict())


def _projector_state(bias: bool, widths=(64, 32, 32, 16)) -> dict[str, torch.Tensor]:
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-2], widths[1:-1]):
        layers += [nn.Linear(a, b, bias=bias), nn.BatchNorm1d(b), nn.ReLU()]
    layers.append(nn.Linear(widths[-2], widths[-1], bias=False))
    return dict(nn.Sequential(*layers).state_dict())


def _vicreg_like(backbone: dict, projector: dict) -> dict:
    model = {f"module.backbone.{k}": v for k, v in backbone.items()}
    model.update({f"module.projector.{k}": v for k, v in projector.items()})
    return {"epoch": 1, "model": model, "optimizer": {"state": {}, "param_groups": []}}


def test_wrong_resnet_depth_file_is_refused(tmp_path):
    resnet34 = ResNet(BasicBlock, (3, 4, 6, 3), width=0.125)
    path = tmp_path / "resnet34.pth"
    torch.save(resnet34.state_dict(), path)
    with pytest.raises(CheckpointArchitectureError, match=r"BasicBlock blocks \(3, 4, 6, 3\).*resnet18.*resnet50"):
        load_checkpoint(path)


def test_unknown_layouts_are_refused_with_what_was_found(tmp_path):
    path = tmp_path / "gpt.pth"
    torch.save({"wte.weight": torch.zeros(5, 4), "h.0.attn.c_attn.weight": torch.zeros(4, 12)}, path)
    with pytest.raises(CheckpointArchitectureError, match="wte.weight.*neither a torchvision-named ResNet"):
        load_checkpoint(path)
    with pytest.raises(CheckpointArchitectureError, match="no state dict of tensors"):
        detect({"epoch": 3, "notes": "hello"})
    moco = {"arch": "resnet50", "state_dict": {f"module.encoder_q.{k}": v for k, v in _small_resnet18_state().items()}}
    with pytest.raises(CheckpointArchitectureError, match="MoCo"):
        detect(moco)


def test_inconsistent_head_shapes_are_refused():
    projector = _projector_state(bias=True)
    projector["3.weight"] = torch.zeros(32, 31)  # takes 31 inputs after a 32-wide layer
    with pytest.raises(CheckpointArchitectureError, match=r"projector.3.weight takes 31 inputs .* gives 32"):
        detect(_vicreg_like(_small_resnet18_state(), projector))


def test_backbone_shape_mismatch_is_refused():
    backbone = _small_resnet18_state()
    backbone["layer2.1.conv1.weight"] = torch.zeros(16, 16, 5, 5)
    layout = detect(_vicreg_like(backbone, _projector_state(bias=True)))
    with pytest.raises(CheckpointArchitectureError, match=r"backbone.layer2.1.conv1.weight: file \(16, 16, 5, 5\)"):
        load_layout(layout)


def test_which_only_for_dino():
    obj = _vicreg_like(_small_resnet18_state(), _projector_state(bias=True))
    with pytest.raises(ValueError, match="only to DINO"):
        detect(obj, which="student")
    dino = {"student": {}, "teacher": {}}
    with pytest.raises(ValueError, match="'teacher' or 'student'"):
        detect(dino, which="ema")


def test_missing_and_unexpected_keys_are_reported_and_strict_raises(tmp_path):
    backbone = _small_resnet18_state()
    del backbone["layer3.0.bn1.running_var"]
    teacher = {f"backbone.{k}": v for k, v in backbone.items()}
    teacher["backbone.fc.weight"] = torch.zeros(3, 64)  # reaches the backbone: unexpected there
    teacher["extra.weight"] = torch.zeros(2)  # belongs to no part
    path = tmp_path / "dino_like.pth"
    torch.save({"teacher": teacher, "student": {}}, path)
    m = load_checkpoint(path)
    assert (m.release, m.backbone_name) == ("dino_resnet18", "resnet18")
    assert m.missing == ["backbone.layer3.0.bn1.running_var"]
    assert sorted(m.unexpected) == ["backbone.fc.weight", "teacher.extra.weight"]
    assert m.head is None and any("no DINO head tensors" in n for n in m.notes)
    assert "missing keys (1)" in m.report()
    with pytest.raises(CheckpointArchitectureError, match="missing.*layer3.0.bn1.running_var"):
        load_checkpoint(path, strict=True)


def test_vit_head_count_must_be_given_when_not_dim_over_64(tmp_path):
    vit = VisionTransformer(img_size=8, patch_size=4, embed_dim=48, depth=1, num_heads=3).eval()
    path = tmp_path / "vit48.pth"
    torch.save(vit.state_dict(), path)
    with pytest.raises(CheckpointArchitectureError, match="pass num_heads"):
        load_checkpoint(path)
    m = load_checkpoint(path, num_heads=3, strict=True)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert torch.allclose(m.backbone(x), vit(x), atol=1e-6)


def test_sequential_modules_classification_and_errors():
    seq = nn.Sequential(nn.Linear(4, 6), nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 3, bias=False),
                        nn.BatchNorm1d(3, affine=False))
    mods = sequential_modules(dict(seq.state_dict()), "p")
    assert [(m.index, m.kind) for m in mods] == [(0, "linear"), (1, "ln"), (3, "linear"), (4, "bn")]
    spec = spec_from_modules(mods, "gelu", "p")
    assert spec.to_string() == "4-6-3:gelu:ln:last=bn_noaffine:nolastbias"
    with pytest.raises(CheckpointArchitectureError, match="not an nn.Sequential key"):
        sequential_modules({"weight": torch.zeros(2, 2)}, "p")
    with pytest.raises(CheckpointArchitectureError, match="cannot tell what module p.0 is"):
        sequential_modules({"0.weight": torch.zeros(2, 2, 2)}, "p")
    two_norms = sequential_modules({"0.weight": torch.zeros(3, 2), "1.weight": torch.ones(3),
                                    "1.bias": torch.zeros(3), "2.weight": torch.ones(3), "2.bias": torch.zeros(3)}, "p")
    with pytest.raises(CheckpointArchitectureError, match="p.2 is a ln where a Linear"):
        spec_from_modules(two_norms, "relu", "p")


def test_weight_norm_from_plain_weight_is_exact():
    w = torch.randn(5, 7, dtype=torch.float64)
    w[2] = 0.0
    g, v = _weight_norm_from_plain(w)
    assert g.shape == (5, 1) and g[2, 0] == 0
    # what parametrizations.weight_norm(dim=0) computes from (original0, original1)
    rebuilt = torch._weight_norm(v, g, 0)
    assert torch.allclose(rebuilt, w, atol=1e-14, rtol=0)
    assert torch.isfinite(rebuilt).all()


def test_teacher_saved_alone_loads_its_backbone(tmp_path):
    """{"teacher": state} with backbone.* / head.* keys (no student): the backbone loads, the rest is listed."""
    net = resnet18(width=0.125).eval()
    teacher = {f"backbone.{k}": v for k, v in net.state_dict().items()}
    teacher["head.mlp.0.weight"] = torch.zeros(8, 64)
    teacher["center"] = torch.zeros(8)
    path = tmp_path / "teacher_only.pth"
    torch.save({"teacher": teacher}, path)
    m = load_checkpoint(path)
    assert (m.release, m.backbone_name) == ("torchvision_resnet", "resnet18")
    assert m.missing == [] and m.unexpected == ["center"] and "head.*" in m.ignored
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.allclose(m.backbone(x), net(x), atol=1e-6)


def test_incomplete_dino_head_is_reported_not_built():
    teacher = {f"backbone.{k}": v for k, v in _small_resnet18_state().items()}
    teacher["head.mlp.0.weight"] = torch.zeros(8, 64)
    layout = detect({"teacher": teacher, "student": {}})
    assert layout.head is None and layout.unused == ["teacher.head.mlp.0.weight"]
    assert any("incomplete DINO head" in n for n in layout.notes)


def _meta(shape) -> torch.Tensor:
    return torch.empty(shape, device="meta")


def _meta_sequential(*layers: nn.Module) -> dict[str, torch.Tensor]:
    with torch.device("meta"):
        return dict(nn.Sequential(*layers).state_dict())


def test_full_size_official_layouts_detect_to_the_official_architectures():
    """Real release sizes on the meta device (shapes only, no memory): what each file's keys and
    shapes must turn into (docs/paper.md §4.10 and the releases' code). Initialising on meta
    imports sympy once per process (~3 s alone, shared with other suites that use torch.func)."""
    with torch.device("meta"):
        rn50 = {f"backbone.{k}": v for k, v in resnet50().state_dict().items()}
        vits = {f"backbone.{k}": v for k, v in VisionTransformer().state_dict().items()}  # ViT-S/16 defaults
    # DINO ViT-S/16: mlp 384-2048-2048-256 with GELU, weight-normed last layer to 65536
    mlp = _meta_sequential(nn.Linear(384, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                           nn.Linear(2048, 256))
    teacher = {**vits, **{f"head.mlp.{k}": v for k, v in mlp.items()},
               "head.last_layer.weight_g": torch.ones(65536, 1), "head.last_layer.weight_v": _meta((65536, 256))}
    layout = detect({"teacher": teacher, "student": {f"module.{k}": v for k, v in teacher.items()}})
    assert layout.release == "dino_vit"
    assert layout.backbone_kwargs == {"img_size": 224, "patch_size": 16, "in_chans": 3, "embed_dim": 384,
                                      "depth": 12, "num_heads": 6, "mlp_ratio": 4.0, "qkv_bias": True,
                                      "final_norm": True}
    assert layout.head.spec.to_string() == "384-2048-2048-65536:gelu:dino=256"
    # DINO ResNet-50 release: 2048->4096, BN, GELU, ->256, plain last layer to 60000
    mlp = _meta_sequential(nn.Linear(2048, 4096), nn.BatchNorm1d(4096), nn.GELU(), nn.Linear(4096, 256))
    teacher = {**rn50, **{f"head.mlp.{k}": v for k, v in mlp.items()}, "head.last_layer.weight": _meta((60000, 256))}
    layout = detect({"teacher": {f"module.{k}": v for k, v in teacher.items()}, "student": {}})
    assert (layout.release, layout.backbone_name, layout.backbone_kwargs) == (
        "dino_resnet50", "resnet50", {"cifar_stem": False, "in_chans": 3})
    assert layout.head.spec.to_string() == "2048-4096-60000:gelu:bn:dino=256"
    # VICReg and Barlow Twins: 2048-8192-8192-8192, the presets of headgeom.heads
    for name, bias in (("vicreg", True), ("barlow_twins", False)):
        proj = _meta_sequential(nn.Linear(2048, 8192, bias=bias), nn.BatchNorm1d(8192), nn.ReLU(),
                                nn.Linear(8192, 8192, bias=bias), nn.BatchNorm1d(8192), nn.ReLU(),
                                nn.Linear(8192, 8192, bias=False))
        layout = detect(_vicreg_like({k[len("backbone."):]: v for k, v in rn50.items()}, proj))
        assert layout.release == name and layout.head.spec == get_head_spec(name)
    # SimSiam: encoder.fc 2048-2048-2048-2048 (BN, ReLU; last BN affine-free), predictor 2048-512-2048
    fc = _meta_sequential(nn.Linear(2048, 2048, bias=False), nn.BatchNorm1d(2048), nn.ReLU(),
                          nn.Linear(2048, 2048, bias=False), nn.BatchNorm1d(2048), nn.ReLU(),
                          nn.Linear(2048, 2048), nn.BatchNorm1d(2048, affine=False))
    pred = _meta_sequential(nn.Linear(2048, 512, bias=False), nn.BatchNorm1d(512), nn.ReLU(), nn.Linear(512, 2048))
    state = {**{f"module.encoder.{k[len('backbone.'):]}": v for k, v in rn50.items()},
             **{f"module.encoder.fc.{k}": v for k, v in fc.items()},
             **{f"module.predictor.{k}": v for k, v in pred.items()}}
    layout = detect({"epoch": 100, "arch": "resnet50", "state_dict": state, "optimizer": {}})
    assert layout.release == "simsiam"
    assert layout.head.spec.to_string() == "2048-2048-2048-2048:relu:bn:last=bn_noaffine:nobias:lastbias"
    assert layout.predictor.spec == get_head_spec("simsiam_predictor")

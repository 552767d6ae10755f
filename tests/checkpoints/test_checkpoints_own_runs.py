"""load_checkpoint on headgeom's own training checkpoints (headgeom.train.save_checkpoint files)."""
from __future__ import annotations

import pytest
import torch

from headgeom.checkpoints import CheckpointArchitectureError, load_checkpoint
from headgeom.train import TrainConfig, build_method_from_config, save_checkpoint


def _run(tmp_path, method: str, head: str | None, predictor: str | None = None):
    config = TrainConfig(method=method, backbone="resnet18", backbone_options={"width": 0.125}, head=head,
                         predictor=predictor, device="cpu", epochs=2)
    torch.manual_seed(0)
    model = build_method_from_config(config)
    with torch.no_grad():  # move every tensor off its init so a wrong copy shows
        for key, t in model.state_dict().items():
            if not (isinstance(t, torch.Tensor) and t.is_floating_point()):  # DINO keeps an extra-state dict
                continue
            if key.endswith("running_var"):
                t.mul_(1 + torch.rand_like(t))
            else:
                t.add_(0.05 * torch.randn_like(t))
    state = {"step": 12, "epoch": 1, "method": model.state_dict(), "optimizer": {"state": {}, "param_groups": []},
             "data_generator": torch.zeros(8, dtype=torch.uint8), "aug_generator": torch.zeros(8, dtype=torch.uint8),
             "torch_rng": torch.get_rng_state(), "cuda_rng": None, "config": config.to_dict()}
    save_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt", state)
    return model.eval(), tmp_path / "run"


def _check(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6, rtol=1e-5), (a - b).abs().max()


def test_own_vicreg_run_directory(tmp_path):
    model, run = _run(tmp_path, "vicreg", "64-32-24:relu:bn")
    m = load_checkpoint(run, strict=True)
    assert m.release == "headgeom_vicreg" and m.backbone_name == "resnet18"
    assert m.head_spec.to_string() == "64-32-24:relu:bn" and m.predictor is None
    assert m.missing == [] and m.unexpected == [] and m.sha256_check.status == "unknown"
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        z = model.backbone(x)
        _check(m.backbone(x), z)
        _check(m.head(z), model.projector(z))
    with pytest.raises(ValueError, match="DINO runs"):
        load_checkpoint(run, which="teacher")


def test_own_simsiam_checkpoint_file_with_predictor(tmp_path):
    model, run = _run(tmp_path, "simsiam", "64-32-32:relu:bn:last=bn_noaffine:nobias",
                      "32-8-32:relu:bn:nobias:lastbias")
    m = load_checkpoint(run / "checkpoints" / "last.pt")
    assert m.release == "headgeom_simsiam" and m.predictor is not None
    z = torch.randn(3, 64)
    with torch.no_grad():
        _check(m.head(z), model.projector(z))
        _check(m.predictor(m.head(z)), model.predictor(model.projector(z)))


def test_own_dino_run_teacher_and_student(tmp_path):
    model, run = _run(tmp_path, "dino", "64-32-32-40:gelu:dino=16")
    teacher, student = load_checkpoint(run), load_checkpoint(run, which="student")
    assert teacher.release == "headgeom_dino" and any("EMA teacher" in n for n in teacher.notes)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        _check(teacher.backbone(x), model.teacher.module[0](x))
        _check(student.backbone(x), model.backbone(x))
        z = model.backbone(x)
        _check(teacher.head(z), model.teacher.module[1](z))
        _check(student.head(z), model.projector(z))
        assert not torch.allclose(teacher.head(z), student.head(z))


def test_run_directory_without_checkpoint_and_bad_version(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoints/last.pt"):
        load_checkpoint(tmp_path)
    path = tmp_path / "v9.pt"
    torch.save({"format": "headgeom.train.checkpoint", "version": 9, "config": {}, "method": {}}, path)
    with pytest.raises(CheckpointArchitectureError, match="version 9"):
        load_checkpoint(path)

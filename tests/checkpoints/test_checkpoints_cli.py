"""``headgeom checkpoint PATH`` (headgeom.checkpoints.cli), run through its own parser."""
from __future__ import annotations

import json
import os

import torch

from headgeom.backbones import resnet18
from headgeom.checkpoints import file_sha256
from headgeom.cli import main as _main


class _System:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_prints_report_and_writes_json(tmp_path, capsys):
    path = tmp_path / "resnet18.pth"
    torch.save(resnet18(width=0.125).state_dict(), path)
    out = tmp_path / "summary.json"
    assert _main(["checkpoint", str(path), "--json", str(out), "--strict"]) == 0
    printed = capsys.readouterr().out
    assert "release: torchvision_resnet" in printed and "missing keys (0): none" in printed
    summary = json.loads(out.read_text())
    assert summary["sha256"] == file_sha256(path) and summary["release"] == "torchvision_resnet"
    assert summary["backbone"] == {"name": "resnet18", "options": {"width": 0.125, "cifar_stem": True, "in_chans": 3},
                                   "feature_dim": 64}
    assert summary["head"] is None and summary["sha256_check"]["status"] == "unknown"


def test_errors_exit_2_and_run_nothing(tmp_path, capsys):
    marker = tmp_path / "PWNED"
    hostile = tmp_path / "hostile.pth"
    torch.save({"model": {}, "x": _System(marker)}, hostile)
    assert _main(["checkpoint", str(hostile)]) == 2
    assert "refusing to load" in capsys.readouterr().err and not marker.exists()

    state = dict(resnet18(width=0.125).state_dict())
    del state["bn1.weight"]
    partial = tmp_path / "partial.pth"
    torch.save(state, partial)
    assert _main(["checkpoint", str(partial), "--strict"]) == 2
    assert "backbone.bn1.weight" in capsys.readouterr().err
    assert _main(["checkpoint", str(tmp_path / "nothing.pth")]) == 2

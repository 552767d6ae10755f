"""headgeom.train.recipes: the presets' data and scale said once (on_cifar10, paper_scale)."""
from __future__ import annotations

import dataclasses

import pytest

from headgeom.train.recipes import SIMCLR, SIMSIAM, on_cifar10, paper_scale


@pytest.mark.parametrize("base", [SIMSIAM, SIMCLR])
def test_paper_scale_changes_the_data_and_scale_and_nothing_else(base):
    small = on_cifar10(base, batch_size=128)
    paper = paper_scale(base, batch_size=512, epochs=50)
    assert (small.data, small.data_options, small.batch_size) == ("cifar10", {}, 128)
    assert (paper.data, paper.data_options, paper.backbone_options, paper.max_steps, paper.device) == (
        "cifar10", {}, {"width": 1.0}, None, "auto")
    assert (paper.batch_size, paper.epochs) == (512, 50)
    changed = {"data", "data_options", "backbone_options", "max_steps", "device", "batch_size", "epochs"}
    for f in dataclasses.fields(base):
        if f.name not in changed:
            assert getattr(paper, f.name) == getattr(base, f.name), f.name
    assert base.data == "shapes" and base.data_options  # the bases are not changed

"""headgeom.theory.invariance_system: the presets' systems, the regimes and the cells C6 and C7 share."""
import dataclasses

import pytest

import torch

from headgeom.theory.invariance import InvarianceSpec, PatternManifold, trained_system
from headgeom.theory.invariance_system import REGIMES, SYSTEMS, cell_system, preset_system, regime_cells, regime_spec


def test_regime_spec_sets_only_whether_the_backbone_trains():
    base = SYSTEMS["quick"]
    joint, head_only = regime_spec(base, "joint"), regime_spec(base, "head_only")
    assert joint.train_backbone and not head_only.train_backbone
    assert dataclasses.replace(head_only, train_backbone=True) == joint
    # whatever the given spec says, the regime decides
    assert regime_spec(dataclasses.replace(base, train_backbone=False), "joint").train_backbone
    with pytest.raises(ValueError, match="unknown regime 'frozen'"):
        regime_spec(base, "frozen")


def test_regime_cells_are_regimes_outer_seeds_inner_and_validated():
    assert regime_cells("C6", ("head_only", "joint"), 2) == [
        {"regime": "head_only", "seed": 0}, {"regime": "head_only", "seed": 1},
        {"regime": "joint", "seed": 0}, {"regime": "joint", "seed": 1}]
    assert regime_cells("C7", REGIMES[:1], 1) == [{"regime": "joint", "seed": 0}]
    with pytest.raises(ValueError, match=r"C7 needs at least one seed; got 0: pass --seeds"):
        regime_cells("C7", REGIMES, 0)
    with pytest.raises(ValueError, match="C6: unknown regime 'frozen'"):
        regime_cells("C6", ("joint", "frozen"), 3)


def test_preset_systems_grow_from_quick_to_paper_and_unknown_presets_are_refused():
    assert set(SYSTEMS) == {"quick", "small", "paper"} and SYSTEMS["quick"] == InvarianceSpec()
    sizes = [(s.size, s.n_content, s.d, s.steps) for s in (preset_system(p) for p in ("quick", "small", "paper"))]
    assert all(a < b for lo, hi in zip(sizes, sizes[1:]) for a, b in zip(lo, hi))
    with pytest.raises(ValueError, match="no invariance system for preset 'huge'"):
        preset_system("huge")


def test_cell_system_is_the_regimes_trained_system_and_manifold_of_the_cells_seed():
    tiny = InvarianceSpec(size=8, n_content=3, hidden=8, d=6, head_hidden=8, k=5, n_train=64, steps=5, batch=32)
    for regime in REGIMES:
        spec, system, manifold = cell_system(tiny, {"regime": regime, "seed": "1"})
        assert spec == regime_spec(tiny, regime)
        assert system is trained_system(spec, 1)  # cached: C6 and C7 analyse the same trained models
        assert manifold.dtype == torch.float64
        g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
        same = PatternManifold(spec, 1, torch.float64)
        assert torch.equal(manifold.render(manifold.sample(3, g1)), same.render(same.sample(3, g2)))

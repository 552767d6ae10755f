"""headgeom.tracking.updates: the head/backbone relative update size against the formula written here."""
import math

import pytest
import torch

from headgeom.tracking.updates import UpdateRatio, relative_change


def test_update_ratio_formula_on_a_known_change():
    torch.manual_seed(0)
    head = [torch.randn(3, 4), torch.randn(4)]
    backbone = [torch.randn(5, 5)]
    tracker = UpdateRatio()
    assert tracker.update(0, head, backbone) == {}
    delta = [torch.randn_like(p) * 0.01 for p in head]
    head_new = [p + dp for p, dp in zip(head, delta)]
    backbone_new = [backbone[0] * 1.25]  # relative change exactly 0.25
    out = tracker.update(10, head_new, backbone_new)
    r_head = math.sqrt(sum(float(dp.double().square().sum()) for dp in delta)) / math.sqrt(
        sum(float(p.double().square().sum()) for p in head))
    assert out["update_head_rel"] == pytest.approx(r_head, rel=1e-5)
    assert out["update_backbone_rel"] == pytest.approx(0.25, rel=1e-6)
    assert out["update_ratio"] == pytest.approx(r_head / 0.25, rel=1e-5)
    assert out["update_steps"] == 10.0
    # unchanged backbone: the ratio is undefined (NaN), never a division error
    out = tracker.update(20, head, backbone_new)
    assert out["update_backbone_rel"] == 0.0 and math.isnan(out["update_ratio"])


def test_update_ratio_errors():
    with pytest.raises(ValueError, match="changed between"):
        relative_change([torch.ones(3)], [torch.ones(4)])
    with pytest.raises(ValueError, match="empty"):
        UpdateRatio().update(0, [], [torch.ones(2)])


def test_state_round_trip_continues_the_series(tmp_path):
    head, backbone = [torch.randn(3, 2)], [torch.randn(4)]
    a = UpdateRatio()
    a.update(0, head, backbone)
    torch.save(a.state_dict(), tmp_path / "u.pt")
    b = UpdateRatio()
    b.load_state_dict(torch.load(tmp_path / "u.pt", weights_only=True))
    later = ([head[0] * 1.1], [backbone[0] + 0.5])
    assert b.update(7, *later) == a.update(7, *later)
    with pytest.raises(ValueError, match="together"):
        UpdateRatio().load_state_dict({"step": 3, "head": None, "backbone": None})

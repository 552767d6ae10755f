"""The induced collapse (headgeom.train.collapse, TrainConfig.collapse): every head, linear, ReLU, SiLU, with and
without BatchNorm, starts at the stated spread (depth / sqrt(k)), which the paper's ×0.1 cannot do for the
homogeneous and BN heads and a collapse in representation space cannot do for BN heads; a run sets it up on its
probe batch, keeps it in its checkpoint and is rebuilt with it."""
from __future__ import annotations

import copy
import dataclasses
import math

import pytest
import torch

from headgeom.eval.rankme import spread_l2, uniform_spread
from headgeom.heads import scale_linear_weights_
from headgeom.heads.offset import OutputOffset, check_collapse
from headgeom.methods import build_method, build_method_from_spec
from headgeom.tracking.reference import reference_spread
from headgeom.train import TrainConfig, build_method_from_config
from headgeom.train.collapse import calibrate_offset, output_offset
from headgeom.train.setup import set_up

K = 16
HEADS = [(act, bn) for act in ("linear", "relu", "silu") for bn in (False, True)]


def _method(act: str, bn: bool, collapse: float | None = 0.05, seed: int = 0):
    torch.manual_seed(seed)
    return build_method("simsiam", backbone="resnet18", backbone_options={"width": 0.0625},
                        head=f"d-32-{K}:{act}:nobias" + (":bn:last=bn" if bn else ""),
                        predictor=f"d-8-{K}:{act}:nobias" + (":bn" if bn else ""), collapse=collapse)


def _spread(method, x) -> float:
    """The spread as the tracker measures it: backbone in eval mode, projector in train mode, no gradient."""
    m = copy.deepcopy(method)
    m.train()
    m.backbone.eval()
    with torch.no_grad():
        return spread_l2(m.projector(m.backbone(x)))


X = torch.rand(24, 3, 16, 16, generator=torch.Generator().manual_seed(5))


@pytest.mark.parametrize("act,bn", HEADS)
def test_every_head_starts_at_the_stated_spread(act, bn):
    method = _method(act, bn)
    before = _spread(method, X)  # the offset is zero until calibrated: the normal init
    info = calibrate_offset(method, X, 0.05, seed=0)
    assert info["target"] == pytest.approx(0.05 * uniform_spread(K)) and info["spread_without"] == pytest.approx(before)
    assert _spread(method, X) == pytest.approx(0.05 / math.sqrt(K), rel=1e-5)  # float32 forward, float64 solve
    assert info["offset_norm"] > 0 and float(output_offset(method).shift.norm()) == pytest.approx(info["offset_norm"],
                                                                                                  rel=1e-6)
    # the reference (the same head at normal init) is the spread without the offset
    assert reference_spread(method, [X], None, "train") == pytest.approx(before, rel=1e-6)


@pytest.mark.parametrize("act,bn", HEADS)
def test_the_papers_x01_is_inert_for_homogeneous_and_bn_heads(act, bn):
    """The measurement behind the choice: ×0.1 on the projector's Linear weights leaves the spread of a bias-free
    linear or ReLU head and of a BN head unchanged (ratio 1 up to BN's eps); it moves a smooth head's."""
    normal = _method(act, bn, collapse=None)
    scaled = scale_linear_weights_(copy.deepcopy(normal), 0.1)
    ratio = _spread(scaled, X) / _spread(normal, X)
    if act in ("linear", "relu") or bn:
        assert ratio == pytest.approx(1.0, abs=2e-3)
    else:
        assert abs(ratio - 1.0) > 1e-2


@pytest.mark.parametrize("act,bn", HEADS)
def test_a_collapse_in_representation_space_is_undone_by_bn_heads(act, bn):
    """z_i -> zbar + eps (z_i - zbar) after the backbone: a head without BN keeps the collapse (its spread shrinks
    with eps), a BN head's centring and scaling undo it (the spread stays within BN's eps of the normal init)."""
    method = _method(act, bn, collapse=None)
    method.train()
    method.backbone.eval()
    with torch.no_grad():
        z = method.backbone(X)
        zbar = z.mean(dim=0, keepdim=True)
        normal = spread_l2(copy.deepcopy(method.projector)(z))
        squeezed = spread_l2(copy.deepcopy(method.projector)(zbar + 1e-2 * (z - zbar)))
    if bn:
        assert squeezed / normal == pytest.approx(1.0, abs=0.05)
    else:
        assert squeezed / normal < 0.05


def test_a_head_already_below_the_stated_spread_is_left_where_it_is():
    method = _method("relu", False, collapse=0.5)
    x = X.clone()
    without = _spread(method, x)
    depth = 0.5 * without * math.sqrt(K)  # half the head's own spread: an offset is needed
    assert calibrate_offset(method, x, depth, 0)["offset_norm"] > 0
    info = calibrate_offset(method, x, min(0.99, 2 * without * math.sqrt(K)), 0)  # above its own spread
    assert info["offset_norm"] == 0.0 and float(output_offset(method).shift.abs().max()) == 0.0
    assert _spread(method, x) == pytest.approx(without)


def test_the_offset_is_a_buffer_never_trained_and_rebuilt_from_the_spec():
    method = _method("silu", True)
    calibrate_offset(method, X, 0.05, 0)
    offset = output_offset(method)
    assert isinstance(offset, OutputOffset) and not list(offset.parameters())
    assert all(p is not offset.shift for p in method.parameters())
    again = build_method_from_spec(method.spec)
    assert method.spec.collapse == 0.05 and output_offset(again) is not None
    again.load_state_dict(method.state_dict())
    torch.testing.assert_close(output_offset(again).shift, offset.shift)
    with pytest.raises(ValueError, match="collapse must be None or the depth"):
        check_collapse(1.5)
    with pytest.raises(ValueError, match="built with collapse"):
        calibrate_offset(_method("relu", False, collapse=None), X, 0.05, 0)


CONFIG = TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.0625},
                     head=f"d-16-{K}:relu:nobias:bn:last=bn", predictor=f"{K}-4-{K}:relu:nobias:bn", data="shapes",
                     data_options={"n": 16, "size": 16}, batch_size=8, epochs=1, probe_size=16, seed=3, device="cpu",
                     progress=False, collapse=0.05)


def test_a_run_sizes_its_offset_on_its_probe_batch_and_nothing_else_changes():
    s = set_up(CONFIG, build_method_from_config, with_probe=True)
    assert _spread(s.method, s.probe[0]) == pytest.approx(0.05 / math.sqrt(K), rel=1e-5)
    # without a tracker the same probe batch is drawn to size it: the same offset
    bare = set_up(CONFIG, build_method_from_config, with_probe=False)
    torch.testing.assert_close(output_offset(bare.method).shift, output_offset(s.method).shift)
    # the parameters and their draws are those of the run without the induced collapse
    plain = set_up(dataclasses.replace(CONFIG, collapse=None), build_method_from_config, with_probe=True)
    got, ref = s.method.state_dict(), plain.method.state_dict()
    assert set(got) - set(ref) == {f"projector.layers.{len(s.method.projector.layers) - 1}.shift"}
    assert all(torch.equal(got[k], ref[k]) for k in ref)
    with pytest.raises(ValueError, match="collapse must be None"):
        dataclasses.replace(CONFIG, collapse=0.0)

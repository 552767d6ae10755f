"""GeometryTracker on the real headgeom.methods (tiny backbone and heads).

Every method: the tracker returns its documented keys, and the method is left bit-identical
(parameters, buffers, modes, RNG), so tracking never moves a training run. SimSiam: the
tracked spectrum equals an independent float64 autograd Hessian of the view-1 part of its
training loss, −½ cos(pred(proj(z1)), sg(proj(z2))), with respect to z1.
"""
import copy
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.autograd.functional import hessian

from headgeom.methods import METHODS, build_method
from headgeom.tracking import GeometryTracker

D = 4


class TinyBackbone(nn.Module):
    feature_dim = D

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(8, D), nn.BatchNorm1d(D))

    def forward(self, x):
        return self.net(x)


def _method(name: str, seed: int = 0):
    torch.manual_seed(seed)
    # a train-mode BN head (coupled path) for SimCLR only: the coupled blocks are the slow part
    kwargs = {"head": {"dino": "d-6-5:silu:dino=3", "simclr": "d-6-5:silu:bn"}.get(name, "d-6-5:silu")}
    if METHODS[name].HAS_PREDICTOR:
        kwargs["predictor"] = "d-3-5:silu"
    return build_method(name, backbone=TinyBackbone(), **kwargs)


def _views(n: int = 6, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, 2, 2, 2, generator=g) for _ in range(2)]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_is_tracked_and_left_unchanged(name):
    method, views = _method(name), _views()
    method.train()
    before = copy.deepcopy(method.state_dict())  # tensors, and DINO's extra state (a dict)
    modes = [m.training for m in method.modules()]
    rng = torch.get_rng_state()
    tracker = GeometryTracker(views, block_samples=3)
    out = tracker(0, method)
    out2 = tracker(1, method)
    coupled = name == "simclr"  # its train-mode BN head couples samples: Lanczos on the whole H_eff
    p = "heff_ambient_mean_" + ("op_" if coupled else "")
    keys = ("lambda_min", "lambda_max", "floor") if coupled else (
        "lambda_min", "lambda_max", "n_negative", "frac_samples_negative", "floor")
    for key in keys:
        assert math.isfinite(out[p + key])
    assert out[p + "lambda_min"] <= out[p + "lambda_max"]
    for key in ("spread_z", "spread_projector", "spread_head", "rankme_z", "cov_rank_z"):
        assert key in out
    assert out2[p + "lambda_min"] == out[p + "lambda_min"]  # same state, same probe: same numbers
    assert out2["update_head_rel"] == 0.0 and out2["update_backbone_rel"] == 0.0
    after = method.state_dict()
    assert sorted(after) == sorted(before)
    assert all(torch.equal(before[k], after[k]) if isinstance(before[k], torch.Tensor) else before[k] == after[k]
               for k in before)
    assert [m.training for m in method.modules()] == modes
    assert torch.equal(torch.get_rng_state(), rng)
    assert tracker.metadata()["last_call"]["n_blocks"] == (None if coupled else 3)


def test_simsiam_spectrum_matches_autograd_on_its_training_loss():
    method, views = _method("simsiam", seed=2), _views(5, seed=4)
    method.projector = copy.deepcopy(method.projector).eval()  # no BN coupling needed here
    ref = copy.deepcopy(method)
    ref.backbone.eval()
    with torch.no_grad():
        z1, z2 = (ref.backbone(v) for v in views)
        target = ref.projector(z2).double()  # the method's constant: float32 projector output
    z1 = z1.double()
    proj, pred = copy.deepcopy(ref.projector).double(), copy.deepcopy(ref.predictor).double()
    proj.train(), pred.train()
    tracker = GeometryTracker(views, head_mode="train")
    out = tracker(0, method)
    n = z1.shape[0]

    def loss_of(zf):
        p = pred(proj(zf.reshape(n, D)))
        return -0.5 * torch.nn.functional.cosine_similarity(p, target, dim=1).mean()

    full = hessian(loss_of, z1.reshape(-1)).reshape(n, D, n, D)
    idx = torch.arange(n)
    blocks = full[idx, :, idx, :].numpy()
    lam = np.linalg.eigvalsh(blocks)
    scale = np.abs(lam).max()
    p = "heff_ambient_mean_"
    assert out[p + "lambda_min"] == pytest.approx(lam.min(), abs=1e-8 * scale)
    assert out[p + "lambda_max"] == pytest.approx(lam.max(), abs=1e-8 * scale)
    assert out[p + "n_negative"] == int((lam < -1e-10 * scale).sum())


@pytest.mark.parametrize("name", ["simclr", "vicreg", "barlow_twins"])
def test_tracking_with_declared_diagonal_blocks_equals_hvp_blocks(monkeypatch, name):
    """A row-wise head with block_samples < N: the first rows' loss carries the declared diagonal
    blocks (NT-Xent, VICReg; checked by the engine), and every tracked number equals the one
    computed from loss HVPs with the declaration stripped."""
    cls = METHODS[name]

    def tracked():
        torch.manual_seed(0)
        method = build_method(name, backbone=TinyBackbone(), head="d-6-5:silu")
        return GeometryTracker(_views(), block_samples=3)(0, method)

    declared = tracked()
    problem = cls.geometry_problem

    def undeclared(self, z_views):
        head, loss = problem(self, z_views)
        assert loss.diagonal_blocks is not None
        return head, (lambda u: loss(u))

    monkeypatch.setattr(cls, "geometry_problem", undeclared)
    plain = tracked()
    assert declared.keys() == plain.keys()
    for key, value in declared.items():
        if isinstance(value, float) and math.isfinite(value) and "seconds" not in key:
            assert value == pytest.approx(plain[key], rel=1e-8, abs=1e-12), key

"""headgeom.theory.pseudo_collapse: the pseudo-collapse's ×α is invisible to H_eff for bias-free
ReLU and linear heads under a cosine loss (positive homogeneity) and visible for a smooth one,
the method handed in is left as it was, and bad factors fail clearly.

The reference for "invisible" is the homogeneity argument itself, checked independently here: the
scaled head's output is the unscaled one times α^depth (float64, relative 1e-12), and a cosine
loss does not see that factor; the gap is then round-off (<= INERT_REL_TOL)."""
import copy
import dataclasses

import pytest
import torch

from headgeom.experiments.c8_hessian_tracking import TRAIN, C8Config
from headgeom.heads import scale_linear_weights_
from headgeom.claims.curvature_verdict import INERT_REL_TOL
from headgeom.theory.pseudo_collapse import gap_at_init, pseudo_collapse_gap
from headgeom.train import build_method_from_config
from headgeom.train.recipes import simsiam_cell

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = C8Config(train=dataclasses.replace(TRAIN, data_options={"n": 24, "size": 16}, batch_size=8),
                hidden=16, out_dim=16, pred_hidden=16, block_samples=3, seeds=1)
READINGS = ("ambient", "tangential")


def train_config(config: C8Config, run: str, seed: int):
    """The ×0.1 run of ``run`` = "collapsed-<activation>": C8's recipe and head widths, pseudo-collapsed ×0.1."""
    return simsiam_cell(dataclasses.replace(config.train, pseudo_collapse=0.1), run.split("-")[1], seed,
                        hidden=config.hidden, out_dim=config.out_dim, pred_hidden=config.pred_hidden)


def _gap(run: str, seed: int = 0) -> dict[str, float]:
    tc = train_config(TINY, run, seed)
    return gap_at_init(lambda: build_method_from_config(tc), tc.pseudo_collapse, 3, seed, READINGS)


def test_the_scaling_is_round_off_for_a_linear_head_and_seen_by_a_smooth_one():
    linear, smooth = _gap("collapsed-linear"), _gap("collapsed-silu")
    assert set(linear) == set(smooth) == set(READINGS)
    assert max(linear.values()) <= INERT_REL_TOL
    assert min(smooth.values()) > 1e-3
    assert _gap("collapsed-silu") == smooth  # seeded: the builder runs after torch.manual_seed(seed)


def test_a_linear_projector_scaled_by_alpha_is_the_unscaled_one_times_alpha_squared():
    # the homogeneity the zero gap rests on, independently of H_eff
    tc = train_config(TINY, "collapsed-linear", 0)
    torch.manual_seed(0)
    method = build_method_from_config(tc).double().eval()
    unscaled = copy.deepcopy(method)
    scale_linear_weights_(unscaled.projector, 1.0 / tc.pseudo_collapse)
    z = torch.randn(5, method.spec.feature_dim, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(method.projector(z), tc.pseudo_collapse ** 2 * unscaled.projector(z),
                                   rtol=1e-12, atol=0.0)


def test_the_method_is_left_untouched_and_bad_factors_fail_clearly():
    tc = train_config(TINY, "collapsed-silu", 0)
    torch.manual_seed(0)
    method = build_method_from_config(tc)
    before = {k: v.clone() for k, v in method.state_dict().items()}
    z1 = torch.randn(3, method.spec.feature_dim, dtype=torch.float64)
    pseudo_collapse_gap(method, tc.pseudo_collapse, [z1, z1 + 0.1], ("ambient",))
    after = method.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before) and method.training
    for alpha in (0.0, float("inf"), None):
        with pytest.raises(ValueError, match="finite nonzero pseudo-collapse factor"):
            pseudo_collapse_gap(method, alpha, [z1, z1], ("ambient",))

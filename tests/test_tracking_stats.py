"""headgeom.tracking.stats and updates against numpy formulas written here (float64)."""
import math

import numpy as np
import pytest
import torch

from headgeom.tracking.stats import covariance_condition, rankme, representation_spread
from headgeom.tracking.updates import UpdateRatio, relative_change


def _np_spread(x: np.ndarray) -> float:
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    return float(np.std(xn, axis=0, ddof=1).mean())


def _np_cond(x: np.ndarray, rel_tol: float) -> tuple[float, int]:
    lam = np.linalg.eigvalsh(np.cov(x, rowvar=False, ddof=1))
    kept = lam[lam > rel_tol * lam.max()]
    return float(kept.max() / kept.min()), int(kept.size)


def _np_rankme(x: np.ndarray, eps: float = 1e-7) -> float:
    s = np.linalg.svd(x, compute_uv=False)
    p = s / np.abs(s).sum() + eps
    return float(np.exp(-(p * np.log(p)).sum()))


@pytest.mark.parametrize("n,d", [(40, 6), (5, 12)])
def test_statistics_match_numpy(n, d):
    rng = np.random.default_rng(n * d)
    x = rng.normal(size=(n, d)) * np.linspace(0.1, 3.0, d)
    t = torch.tensor(x, dtype=torch.float32)
    x32 = t.double().numpy()  # the float32 values the functions see
    assert representation_spread(t) == pytest.approx(_np_spread(x32), rel=1e-12)
    assert rankme(t) == pytest.approx(_np_rankme(x32), rel=1e-10)
    cc = covariance_condition(t, rel_tol=1e-8)
    cond, rank = _np_cond(x32, 1e-8)
    assert cc.rank == rank == min(d, n - 1)  # n <= d: the zero eigenvalues are left out (pitfall 3)
    assert cc.condition_number == pytest.approx(cond, rel=1e-8)
    assert 1.0 < cc.condition_number < 1e4


def test_statistics_on_collapsed_and_structured_batches():
    same = torch.ones(8, 5)
    assert representation_spread(same) == 0.0
    assert math.isnan(covariance_condition(same).condition_number)
    assert covariance_condition(same).rank == 0
    # two directions only: RankMe close to 2, covariance rank 2 whatever the dimension
    base = torch.randn(30, 2, dtype=torch.float64)
    x = base @ torch.randn(2, 7, dtype=torch.float64)
    assert covariance_condition(x).rank == 2
    assert 1.0 < rankme(x) <= 2.0 + 1e-5


@pytest.mark.parametrize("bad", [torch.ones(5), torch.ones(1, 4), torch.full((3, 2), float("nan"))])
def test_statistics_reject_bad_input(bad):
    with pytest.raises(ValueError):
        representation_spread(bad)
    with pytest.raises(ValueError, match="rel_tol"):
        covariance_condition(torch.randn(4, 3), rel_tol=0.0)


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

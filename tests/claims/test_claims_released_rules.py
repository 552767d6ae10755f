"""The rules the authors' released runs are re-judged by, on built cases: each gives the verdict its stated
criterion implies (headgeom.claims.estimated_curvature, collapse_escape; the single-run rules of C9, C11 and
C12, orbit_verdicts, depth_trend and probe_gap, on one run: tests/claims/test_claims_single_run.py)."""
from __future__ import annotations


import pytest

from headgeom.claims.collapse_escape import c5_parts, judge_escape
from headgeom.claims.depth_trend import accuracy_outcome
from headgeom.claims.estimated_curvature import NO_FLOOR, estimated_curvature, estimated_curvature_robustness
from headgeom.claims.orbit_verdicts import MAIN_RULE, NOT_FORMED, SELECTIVE_RULE, orbit_outcome
from headgeom.claims.probe_gap import gap_verdict
from headgeom.claims.row import Row
from headgeom.claims.sources import AUTHORS, is_authors, ours

GRID = [(a, bn, lr) for a in ("silu", "relu") for bn in (False, True) for lr in (0.5, 0.005, 0.05)]  # (act, bn, lr)


def _runs(smooth, relu, floor=None):
    return {"normal-silu": {"activation": "silu", "lambda_min": smooth, "floor": floor},
            "collapsed-relu": {"activation": "relu", "lambda_min": relu, "floor": floor}}


def test_estimates_without_a_floor_are_inconclusive_whatever_their_signs():
    verdict, meas, criterion, face = estimated_curvature(_runs([-1e-6] * 7 + [1e-7] * 3, [0.0] * 10),
                                                         negative_points=0.5, majority=0.8, estimator="float32")
    assert verdict == "inconclusive" and face == "supported"  # at face value the contrast would hold
    assert NO_FLOOR in criterion and "float32" in criterion
    assert meas["frac_epochs_estimate_below_0[normal-silu]"]["value"] == pytest.approx(0.7)
    assert meas["frac_epochs_estimate_exactly_0[collapsed-relu]"]["value"] == 1.0
    assert meas["median_abs_estimate[normal-silu]"]["value"] == pytest.approx(1e-6)
    # a ReLU run negative at face value: the face-value reading fails, the verdict is still undecided
    verdict, _, _, face = estimated_curvature(_runs([-1e-6] * 10, [-1e-6] * 10), negative_points=0.5, majority=0.8,
                                              estimator="e")
    assert (verdict, face) == ("inconclusive", "not supported")
    # no convention can decide it: robust at every share of negative points and majority swept
    conventions, rob, words = estimated_curvature_robustness(_runs([-1e-6] * 7 + [1e-7] * 3, [0.0] * 10), "h",
                                                             negative_points=0.5, majority=0.8, estimator="e")
    assert conventions == ("negative_points", "majority") and all(r.status == "robust" for r in rob.values())
    assert set(rob["negative_points"].verdicts) == {"inconclusive"} and "not swept" in words


def test_estimates_with_a_floor_are_judged_by_c8s_rule():
    floor = [1e-7] * 10
    assert estimated_curvature(_runs([-1e-6] * 10, [0.0] * 10, floor), negative_points=0.5, majority=0.8,
                               estimator="e")[0] == "supported"
    assert estimated_curvature(_runs([-1e-6] * 10, [-1e-6] * 10, floor), negative_points=0.5, majority=0.8,
                               estimator="e")[0] == "not supported"
    # below zero but above -floor is not negative: the smooth run never shows it
    assert estimated_curvature(_runs([-1e-8] * 10, [0.0] * 10, floor), negative_points=0.5, majority=0.8,
                               estimator="e")[0] == "not supported"


def test_gap_verdict_of_one_model():
    one = lambda z, h, n=10_000: [{"z": z, "h": h, "n": n}]  # noqa: E731
    assert gap_verdict(one(0.5227, 0.3755), 0.25).outcome == "supported"
    assert gap_verdict(one(0.3755, 0.5227), 0.25).outcome == "not supported"
    assert gap_verdict(one(0.40, 0.395), 0.25).outcome == "inconclusive"  # within the interval of 10,000 examples
    assert gap_verdict(one(0.5227, 0.3755, None), 0.25).outcome == "inconclusive"  # no test-set size, no interval
    assert gap_verdict([], 0.25).outcome == "inconclusive"


def _e(lo, hi):
    return {"value": (lo + hi) / 2, "ci": [lo, hi], "level": 0.95}


def test_a_control_not_formed_can_refute_but_never_support():
    good = {"selectivity": _e(1.2, 1.5), "class_orbit_change": _e(1.1, 1.3)}
    out, sides = orbit_outcome(good, MAIN_RULE, not_formed=("vs_random_heads_selectivity",))
    assert out == "undecided" and sides["vs_random_heads_selectivity"] == NOT_FORMED
    bad = {**good, "selectivity": _e(0.5, 0.8)}
    assert orbit_outcome(bad, MAIN_RULE, not_formed=("vs_random_heads_selectivity",))[0] == "refutes"
    assert orbit_outcome(good, SELECTIVE_RULE, not_formed=("vs_random_directions_selectivity",))[0] == "undecided"
    with pytest.raises(KeyError):  # a measure missing without being declared not formed is an error
        orbit_outcome(good, SELECTIVE_RULE)


def test_the_released_spread_series_are_judged_against_the_same_level():
    """The authors' grids store the spread per seed and epoch and no normal-init run: the head-independent level
    (collapse_fraction / sqrt(k)) needs none, so their contrast is decided from the series alone."""
    (_, pos, neg), _ = c5_parts(GRID)
    k = 2048  # level 0.5 / sqrt(2048) = 0.011
    escaping = [1e-4, 1e-3, 2e-2]
    staying = [1e-4, 1e-4, 1e-4]
    runs = {pos[0]: [{"spread_projector": escaping, "out_dim": k, "dead_head": None, "diverged": None}],
            neg[0]: [{"spread_projector": staying, "out_dim": k, "dead_head": None, "diverged": None}]}
    j = judge_escape(runs, pos, neg)
    assert j.verdict.outcome == "supported" and j.measured[f"escaped[{pos[0]}]"]["n"] == 1
    assert j.measured[f"escaped[{pos[0]}]"]["value"] == 1.0 and j.measured[f"grew[{neg[0]}]"]["value"] == 0.0
    # growth short of the level: undecided; a group never under the level: no usable seed
    short = {**runs, pos[0]: [{**runs[pos[0]][0], "spread_projector": [1e-4, 1e-3, 5e-3]}]}
    assert judge_escape(short, pos, neg).verdict.outcome == "inconclusive"
    high = {**runs, neg[0]: [{**runs[neg[0]][0], "spread_projector": [0.02, 0.02]}]}
    assert "groups without usable seeds" in judge_escape(high, pos, neg).verdict.reason


def test_one_model_per_depth_is_judged_by_its_interval_and_the_learned_floor():
    assert accuracy_outcome({1: 0.4752, 2: 0.5000, 3: 0.5235}, 10_000, 0.25)[0] == "supports"
    assert accuracy_outcome({1: 0.26, 2: 0.27, 3: 0.28}, 10**6, 0.25)[0] == "undecided"  # not above chance + 0.05


def test_sources():
    row = Row(id="C9", statement="s", setting={}, measured={"x": 1.0}, verdict="supported", evidence="test",
              headline="x", criterion="c")
    assert ours("quick") == "ours (quick)" and is_authors(row.replace(source=AUTHORS)) and not is_authors(row)

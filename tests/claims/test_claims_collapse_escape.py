"""The escape rule of C5 and C8 (headgeom.claims.collapse_escape, ESCAPE_DEFINITION) on built spread series: one
level for every head (collapse_fraction / sqrt(k)), read as the level reached and as growth from the start, one
inclusion rule, and the verdict's robustness over its conventions."""
from __future__ import annotations

import math

import pytest

from headgeom.claims.collapse_escape import (CONVENTIONS, c5_parts, escape_flags, escape_verdict, judge_escape,
                                             run_name)
from headgeom.claims.robustness import ROBUST
from headgeom.claims.training_verdicts import escape, usable_escape

K = 64
U = 1 / math.sqrt(K)  # the uniform spread; the level at fraction 0.5 is 0.5 * U

# built series as fractions of the uniform spread: (start, ..., end)
ESCAPED = [0.05, 0.2, 0.7]  # collapsed, then past the level and 14x the start
STUCK = [0.05, 0.06, 0.055]  # collapsed and stays there
NEVER = [0.9, 0.95]  # never under the level
HEADS = [(act, bn) for act in ("linear", "relu", "silu", "gelu") for bn in (False, True)]

GRID = [(a, bn, lr) for a in ("silu", "relu") for bn in (False, True) for lr in (0.5, 0.005, 0.05)]  # (act, bn, lr)


def _run(series, k=K, **extra):
    return {"spread_projector": [s / math.sqrt(k) for s in series], "out_dim": k, "dead_head": False,
            "diverged": None, **extra}


def test_escape_reads_the_level_and_the_growth_against_one_head_independent_reference():
    out = escape(_run(ESCAPED)["spread_projector"], K, 0.5, 2.0)
    assert out["collapse_level"] == pytest.approx(0.5 / math.sqrt(K))  # 1/sqrt(k): uniform directions' std
    assert out["collapsed_initially"] and out["escaped"] and out["grew"]
    assert out["spread_ratio"] == pytest.approx(0.7 / 0.05)
    stuck = escape(_run(STUCK)["spread_projector"], K, 0.5, 2.0)
    assert stuck["collapsed_initially"] and not stuck["escaped"] and not stuck["grew"]
    never = escape(_run(NEVER)["spread_projector"], K, 0.5, 2.0)
    assert not never["collapsed_initially"] and never["escaped"] and not usable_escape({**never, "dead_head": False})
    # the level follows k, not the head: the same fractions of 1/sqrt(k) give the same flags at another width
    assert {k: v for k, v in escape(_run(ESCAPED, 2048)["spread_projector"], 2048, 0.5).items()
            if k in ("collapsed_initially", "escaped", "grew")} == {"collapsed_initially": True, "escaped": True,
                                                                   "grew": True}
    assert escape([], K, 0.5)["escaped"] is None and escape([0.1], None, 0.5)["escaped"] is None
    with pytest.raises(ValueError, match="collapse_fraction"):
        escape([0.1], K, 1.5)
    with pytest.raises(ValueError, match="growth"):
        escape([0.1], K, 0.5, 1.0)


@pytest.mark.parametrize("act,bn", HEADS)
def test_one_rule_for_every_activation_and_bn_setting(act, bn):
    """The flags depend on the series and k only: collapsed and escaped, collapsed and stuck, never collapsed,
    for every head alike; a dead or diverged seed gives no flag."""
    groups = {run_name(act, bn, 0.05): [_run(ESCAPED), _run(STUCK), _run(NEVER), _run(ESCAPED, dead_head=True),
                                        _run(ESCAPED, diverged="non-finite loss")]}
    runs = groups[run_name(act, bn, 0.05)]
    assert escape_flags(runs, "level") == [True, False]
    assert escape_flags(runs, "growth") == [True, False]
    j = judge_escape(groups, [run_name(act, bn, 0.05)], [], collapse_fraction=0.5, growth=2.0, majority=0.8)
    meas = j.measured
    name = run_name(act, bn, 0.05)
    assert meas[f"escaped[{name}]"]["n"] == 2 and meas[f"escaped[{name}]"]["value"] == 0.5
    assert meas[f"collapsed_at_start_seeds[{name}]"]["value"] == 4 and meas[f"dead_seeds[{name}]"]["value"] == 1
    assert meas[f"initial_over_uniform[{name}]"]["min"] == pytest.approx(0.05)


def _contrast(pos_series, neg_series, **kw):
    groups = {"silu": [_run(s) for s in pos_series], "relu": [_run(s) for s in neg_series]}
    return judge_escape(groups, ["silu"], ["relu"], **{"collapse_fraction": 0.5, "growth": 2.0, "majority": 0.8, **kw})


def test_the_contrast_under_both_readings():
    assert _contrast([ESCAPED] * 3, [STUCK] * 3).verdict.outcome == "supported"
    assert _contrast([STUCK] * 3, [STUCK] * 3).verdict.outcome == "not supported"
    assert _contrast([ESCAPED] * 3, [ESCAPED] * 3).verdict.outcome == "not supported"
    # a group that never collapsed has no usable seed: the contrast cannot be judged
    j = _contrast([ESCAPED] * 3, [NEVER] * 3)
    assert j.verdict.outcome == "inconclusive" and "groups without usable seeds" in j.verdict.reason
    # growth without reaching the level: the two readings disagree, so the row does not decide
    grew_low = [0.01, 0.05, 0.2]  # x20, still under 0.5
    j = _contrast([grew_low] * 3, [STUCK] * 3)
    assert j.verdict.outcome == "inconclusive" and "disagree" in j.verdict.reason
    assert "level reached: not supported" in j.verdict.reason and "growth: supported" in j.verdict.reason
    assert j.verdict.headline == "escaped[silu]" and j.conventions == CONVENTIONS
    # and the criterion names both readings and the swept ranges
    assert "reached = final >= level" in j.criterion and "grew = final / initial >= growth" in j.criterion
    assert "collapse_fraction [0.1, 0.25, 0.5, 0.75, 1.0]" in j.criterion


def test_robustness_flips_at_the_known_values():
    # the expected group ends at 0.6/sqrt(k): it reaches the level up to fraction 0.6, not beyond
    ends_at_06 = [0.05, 0.3, 0.6]
    j = _contrast([ends_at_06] * 3, [STUCK] * 3)
    assert j.verdict.outcome == "supported"
    rob = j.robustness["collapse_fraction"]
    assert rob.at == 0.5 and rob.values == (0.1, 0.25, 0.5, 0.75, 1.0)
    # at 0.1 the stuck group (0.055) is under the level from the start but never reaches 0.1: still supported
    assert rob.verdicts == ("supported", "supported", "supported", "inconclusive", "inconclusive")
    assert rob.status == "flips at 0.75, 1"
    # growth: the expected group grows x12, so the verdict holds up to a factor 12 and flips beyond
    assert j.robustness["growth"].status == ROBUST
    assert _contrast([[0.2, 0.55]] * 3, [STUCK] * 3).robustness["growth"].status == "flips at 3, 5"  # x2.75
    # majority: 2 of 3 expected seeds escape: supported at 0.6, inconclusive at 0.8 and 1
    j = _contrast([ESCAPED, ESCAPED, STUCK], [STUCK] * 3, majority=0.6)
    assert j.verdict.outcome == "supported" and j.robustness["majority"].status == "flips at 0.8, 1"
    # the row's own value is swept even when the stated grid lacks it
    assert 0.3 in _contrast([ESCAPED] * 3, [STUCK] * 3, collapse_fraction=0.3).robustness["collapse_fraction"].values


def test_escape_verdict_is_the_rule_the_sweep_reruns():
    groups = {"silu": [_run(ESCAPED)] * 2, "relu": [_run(STUCK)] * 2}
    v = escape_verdict(groups, ["silu"], ["relu"], collapse_fraction=0.75, growth=2.0, majority=0.8)
    # 0.7 < 0.75: the level is not reached, while the growth reading holds: the readings disagree
    assert v.outcome == "inconclusive" and v.headline == "escaped[silu]"
    assert v.reason.startswith("level reached: not supported")
    v = escape_verdict(groups, ["silu"], ["relu"], collapse_fraction=0.5, growth=20.0, majority=0.8)
    assert v.outcome == "inconclusive" and "growth: not supported" in v.reason  # x14 < x20
    assert v.headline == "grew[silu]"  # the reading that failed names the headline


def test_the_headline_is_the_entry_that_decided_and_always_has_a_value():
    groups = {"silu": [_run(ESCAPED)] * 2, "relu": [_run(STUCK)] * 2, "never": [_run(NEVER)] * 2}
    # an expected group with usable seeds that never escapes decides "not supported", before any empty group
    j = judge_escape(groups, ["never", "relu"], ["silu"])
    assert j.verdict.outcome == "not supported" and j.verdict.headline == "escaped[relu]"
    # a not-expected group escaping in the majority
    assert judge_escape(groups, ["silu"], ["silu"]).verdict.headline == "escaped[silu]"
    # a group with no usable seed: its count of seeds under the level (0 of 2), a number, not "nan (n=0)"
    j = judge_escape(groups, ["silu"], ["never"])
    assert j.verdict.outcome == "inconclusive" and j.verdict.headline == "collapsed_at_start_seeds[never]"
    assert j.measured[j.verdict.headline]["value"] == 0 and j.measured[j.verdict.headline]["n"] == 2
    assert "never" in j.headline_text and "no usable seed" in j.headline_text
    # a group absent from the data altogether (the authors' ViT-Tiny grid has no SiLU run at lr 0.005)
    j = judge_escape(groups, ["absent"], ["relu"])
    assert j.verdict.headline == "collapsed_at_start_seeds[absent]" and j.measured[j.verdict.headline]["value"] == 0
    assert judge_escape(groups, ["silu"], ["relu"]).headline_text.startswith("share of the collapsed silu seeds")


def test_c5_parts():
    (part, pos, neg), (_, pos2, neg2) = c5_parts(GRID)
    assert "lr 0.005" in part and pos == ["silu/nobn/lr=0.005"] and neg == ["relu/nobn/lr=0.005"]
    assert pos2 == ["relu/bn/lr=0.005", "relu/bn/lr=0.05", "relu/bn/lr=0.5", "relu/nobn/lr=0.5"] and neg2 == neg

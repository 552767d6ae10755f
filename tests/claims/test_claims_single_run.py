"""The single-run standard (headgeom.claims.single_run) and the C9, C11, C12 rules that use it, on built cases:
each outcome the stated criterion implies, the accuracy interval against an independent bound, and robustness
sweeps that flip exactly where the built numbers say."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from headgeom.claims.depth_trend import accuracy_judgement, accuracy_outcome, compression_judgement, compression_outcome
from headgeom.claims.orbit_verdicts import MAIN_RULE, NOT_FORMED, SELECTIVE_RULE, orbit_judgement, orbit_outcome
from headgeom.claims.probe_gap import gap_judgement, gap_outcome, gap_verdict, smallest_deciding_n
from headgeom.claims.single_run import (gap_interval, interval_at, quantile, robustness, run_outcome, runs_verdict,
                                        side)
from headgeom.claims.verdict import Verdict

Z95 = 1.959963984540054  # the 97.5% normal quantile, written out


def test_run_outcome_reads_the_interval_against_the_null_and_the_margin():
    assert run_outcome(0.2, (0.1, 0.3), null=0.0, margin=0.05) == "supports"
    assert run_outcome(0.04, (0.01, 0.07), null=0.0, margin=0.05) == "undecided"  # beyond noise, below the margin
    assert run_outcome(0.01, (-0.01, 0.03), null=0.0, margin=0.05) == "refutes"  # an effect of 0.05 is excluded
    assert run_outcome(0.2, (-0.1, 0.5), null=0.0, margin=0.05) == "undecided"  # noise covers it
    assert run_outcome(-0.3, (-0.4, -0.2), null=0.0) == "refutes"
    assert run_outcome(0.3, None, null=0.0) == "undecided"  # no interval decides nothing
    with pytest.raises(ValueError, match="margin"):
        run_outcome(0.3, (0.1, 0.4), null=0.0, margin=-0.1)


def test_interval_at_reads_ci_at_and_the_own_level():
    est = {"value": 1.2, "ci": [1.1, 1.3], "level": 0.95, "ci_at": {"0.9": [1.15, 1.25], "0.99": [0.9, float("nan")]}}
    assert interval_at(est, 0.95) == (1.1, 1.3) and interval_at(est, 0.9) == (1.15, 1.25)
    assert interval_at(est, 0.99) is None and interval_at({"value": 1}, 0.95) is None
    assert side((1.1, 1.3), 1.0) == "above" and side((0.5, 0.9), 1.0) == "below" and side(None, 1.0) == "undefined"


def test_quantile_is_numpys():
    xs = [0.3, 0.1, 0.7, 0.2, 0.9, 0.4]
    for p in (0.0, 0.05, 0.5, 0.9, 0.95, 1.0):
        assert quantile(xs, p) == pytest.approx(float(np.quantile(xs, p)))
    assert math.isnan(quantile([], 0.5))


def test_gap_interval_is_the_worst_pairing_bound():
    a, b, n = 0.52, 0.38, 10_000
    lo, hi = gap_interval(a, b, n)
    half = Z95 * (math.sqrt(a * (1 - a)) + math.sqrt(b * (1 - b))) / math.sqrt(n)
    assert (lo, hi) == pytest.approx((a - b - half, a - b + half), rel=1e-12)
    # no coupling of two Bernoulli outcomes with these marginals has a larger variance of the difference
    bound = (math.sqrt(a * (1 - a)) + math.sqrt(b * (1 - b))) ** 2
    for p11 in np.linspace(max(0.0, a + b - 1), min(a, b), 41):  # P(both correct): every admissible coupling
        var = a * (1 - a) + b * (1 - b) - 2 * (p11 - a * b)
        assert var <= bound + 1e-12
    assert gap_interval(a, b, None) is None
    with pytest.raises(ValueError, match="fraction"):
        gap_interval(1.2, 0.3, 10)


def test_smallest_deciding_n_is_where_the_interval_leaves_zero():
    for a, b in ((0.5227, 0.3755), (0.4075, 0.3492), (0.30, 0.31)):
        n = smallest_deciding_n(a, b)
        assert gap_interval(max(a, b), min(a, b), n)[0] > 0 >= gap_interval(max(a, b), min(a, b), n - 1)[0]
    assert smallest_deciding_n(0.4, 0.4) is None


def test_runs_verdict_and_a_sweep_that_flips_at_a_known_value():
    assert runs_verdict(["supports", "supports"]) == ("supported", 1.0, 0.0)
    assert runs_verdict(["supports", "undecided"], 0.8)[0] == "inconclusive"
    assert runs_verdict(["supports", "undecided"], 0.5)[0] == "supported"
    assert runs_verdict(["refutes"])[0] == "not supported" and runs_verdict([])[0] == "inconclusive"

    def rule(margin: float, level: float) -> Verdict:  # an effect of 0.2 whose interval is ±0.1 at every level
        return Verdict({"supports": "supported", "refutes": "not supported", "undecided": "inconclusive"}[
            run_outcome(0.2, (0.1, 0.3), null=0.0, margin=margin)], "effect")
    rob = robustness(rule, {"margin": 0.05, "level": 0.95}, {"margin": (0.0, 0.1, 0.25, 0.4), "level": (0.9, 0.99)})
    assert rob["margin"].values == (0.0, 0.05, 0.1, 0.25, 0.4)  # the row's own value joins the range
    assert rob["margin"].verdicts == ("supported", "supported", "supported", "inconclusive", "not supported")
    assert rob["margin"].status == "flips at 0.25, 0.4" and rob["level"].status == "robust"


# ---------------------------------------------------------------- C9
def _est(lo, hi, **ci_at):
    """An estimate with the same interval at every level of LEVELS unless ``ci_at`` says otherwise."""
    return {"value": (lo + hi) / 2, "ci": [lo, hi], "level": 0.95,
            "ci_at": {"0.9": [lo, hi], "0.95": [lo, hi], "0.99": [lo, hi], **ci_at}}


def _run(sel=(1.3, 1.6), coc=(1.0, 1.4), vs=(1.5, 2.5), controls=(0.5, 0.55, 0.6, 0.65, 0.7), init_vs=(1.2, 1.4)):
    rh = {"stored": {"draws": len(controls), "bn": "stored", "selectivity": list(controls), "compression": [0.2] * 5,
                     "vs_selectivity": _est(*vs)},
          "init": {"draws": len(controls), "bn": "init", "selectivity": [0.9] * 5, "compression": [1.0] * 5,
                   "vs_selectivity": _est(*init_vs)}}
    return {"selectivity": _est(*sel), "class_orbit_change": _est(*coc), "compression": _est(20, 30),
            "vs_random_directions_selectivity": _est(1.1, 1.2), "random_heads": rh}


def test_c9_outcome_needs_the_control_above_its_percentile_and_the_joint_interval_above_one():
    assert orbit_outcome(_run(), MAIN_RULE)[0] == "supports"
    assert orbit_outcome(_run(vs=(0.8, 1.2)), MAIN_RULE)[0] == "undecided"  # the interval covers the controls' median
    assert orbit_outcome(_run(vs=(0.6, 0.9)), MAIN_RULE)[0] == "refutes"  # less selective than a head that learned nothing
    # trained selectivity 1.45 inside the controls' spread (up to 1.5): not above their 95% quantile
    out, sides = orbit_outcome(_run(controls=(1.0, 1.1, 1.2, 1.4, 1.5)), MAIN_RULE)
    assert out == "undecided" and sides["selectivity above the controls' percentile"] == "not above"
    assert orbit_outcome(_run(sel=(0.7, 0.9)), MAIN_RULE)[0] == "refutes"
    assert orbit_outcome(_run(), MAIN_RULE, control_bn="init")[0] == "supports"
    assert orbit_outcome(_run(), SELECTIVE_RULE, not_formed=("vs_random_directions_selectivity",)) == (
        "undecided", {"selectivity": "above", "vs_random_directions_selectivity": NOT_FORMED})
    reason = orbit_judgement([_run()], "selective", [], not_formed=("vs_random_directions_selectivity",))[
        "verdict"].reason
    assert "what would decide it: the trained head's weights" in reason
    with pytest.raises(KeyError, match="older headgeom"):
        orbit_outcome({k: v for k, v in _run().items() if k != "random_heads"}, MAIN_RULE)


def test_c9_judgement_sweeps_its_conventions():
    # trained 1.45 lies between the controls' 95% quantile (1.4) and their largest (1.5): flips at percentile 1
    j = orbit_judgement([_run(controls=(0.5, 0.6, 0.7, 1.0, 1.5))] * 2, "main", ["compression"])
    assert j["verdict"].outcome == "supported" and j["conventions"] == ("level", "control_percentile", "control_bn",
                                                                        "majority")
    assert j["robustness"]["control_percentile"].status == "flips at 1"
    assert j["robustness"]["control_bn"].status == "robust" and j["robustness"]["level"].status == "robust"
    # a control BN setting under which the joint interval covers 1 flips the row
    j = orbit_judgement([_run(init_vs=(0.9, 1.2))], "main", ["compression"])
    assert j["robustness"]["control_bn"].status == "flips at init" and "majority" not in j["conventions"]
    # the 99% interval reaches below 1: the level flips the row
    j = orbit_judgement([_run() | {"selectivity": _est(1.05, 1.3, **{"0.99": [0.98, 1.4]})}], "main",
                        ["compression"])
    assert j["robustness"]["level"].status == "flips at 0.99"
    meas = j["measured"]
    assert meas["random_heads_selectivity"]["value"] == pytest.approx(0.6) and meas["compression"]["spread"] is None
    assert meas["vs_random_heads_selectivity"]["ci"] == [1.5, 2.5]


# ---------------------------------------------------------------- C11
def _increase(delta=(0.3, 0.6), excess=(1.0, 1.5, 2.0), trained=0.5, controls=(-0.2, 0.0, 0.1, 0.2, 0.3)):
    return {"delta": _est(*delta), "excess": dict(zip((1, 2, 3), excess)), "trained_delta": trained,
            "control_deltas": list(controls)}


def test_c11_compression_outcome():
    run = {"stored": _increase(), "init": _increase(delta=(-0.1, 0.2))}
    assert compression_outcome(run)[0] == "supports"
    assert compression_outcome(run, control_bn="init")[0] == "undecided"
    assert compression_outcome({"stored": _increase(delta=(-0.2, 0.05))})[0] == "refutes"  # below log(1.1) = 0.095
    assert compression_outcome({"stored": _increase(excess=(1.0, 2.5, 2.0))})[0] == "undecided"  # not increasing
    assert compression_outcome({"stored": _increase(excess=(1.0, 2.5, 2.0))}, monotone=False)[0] == "supports"
    assert compression_outcome({"stored": _increase(trained=0.25)})[:3:2] == ("undecided", ["control"])
    j = compression_judgement([{"stored": _increase(), "init": _increase()}], "h")
    assert j["verdict"].outcome == "supported"
    # log ratio 0.45 (interval [0.3, 0.6]): a margin of 1.5x (log 0.405) still holds, the row is robust
    assert j["robustness"]["compression_margin"].status == "robust"
    # log ratio 0.2 (interval [0.1, 0.3]): below log 1.25 = 0.223 (undecided), all of it below log 1.5 (refutes)
    j = compression_judgement([{"stored": _increase(delta=(0.1, 0.3)), "init": _increase()}], "h")
    assert j["robustness"]["compression_margin"].verdicts == ("supported", "supported", "inconclusive",
                                                              "not supported")
    with pytest.raises(KeyError, match="older headgeom"):
        compression_outcome({"init": _increase()})


def test_c11_accuracy_outcome_and_its_premise():
    acc = {1: 0.47, 2: 0.50, 3: 0.53}
    assert accuracy_outcome(acc, 10_000, 0.25)[0] == "supports"
    assert accuracy_outcome(acc, 100, 0.25)[0] == "undecided"  # 100 test examples cannot resolve 6 points
    assert accuracy_outcome({1: 0.50, 2: 0.50, 3: 0.502}, 100_000, 0.25)[0] == "refutes"
    assert accuracy_outcome({1: 0.47, 2: 0.53, 3: 0.52}, 10_000, 0.25)[0] == "undecided"  # not increasing
    out, why, causes = accuracy_outcome({1: 0.11, 2: 0.12, 3: 0.13}, 10**6, 0.1)
    assert out == "undecided" and "premise not met" in why and causes == ["budget"]
    assert accuracy_outcome({1: 0.47, 2: 0.53, 3: 0.52}, 10_000, 0.25)[2] == ["monotone"]
    assert accuracy_outcome(acc, 100, 0.25)[2] == ["interval"]
    j = accuracy_judgement([{"acc": {1: 0.47, 2: 0.53, 3: 0.52}, "n": 10_000}], "h", 0.25)
    assert j["robustness"]["monotone"].status == "flips at False"
    assert j["robustness"]["accuracy_margin"].status == "robust"
    assert "what would decide it: more runs per depth" in j["verdict"].reason  # an undecided row says what decides it


# ---------------------------------------------------------------- C12
def test_c12_gap_outcome_and_sweeps():
    assert gap_outcome(0.52, 0.38, 10_000, 0.25)[0] == "supports"
    assert gap_outcome(0.52, 0.38, 50, 0.25)[0] == "undecided"
    assert gap_outcome(0.500, 0.499, 10**6, 0.25)[0] == "refutes"  # a gap of 1 point is excluded
    assert gap_outcome(0.139, 0.132, 1024, 0.1)[0] == "undecided"  # and the backbone learned nothing anyway
    assert "premise not met" in gap_outcome(0.139, 0.132, 1024, 0.1)[1]
    assert "what would decide it: a training budget" in gap_verdict([{"z": 0.139, "h": 0.132, "n": 1024}], 0.1).reason
    # gap 0.03 on 10,000 examples (half-width ~0.02): supported at margin 0.01 and 0.02, not at 0.05
    j = gap_judgement([{"z": 0.53, "h": 0.50, "n": 10_000}], 0.25)
    assert j["verdict"].outcome == "supported" and j["robustness"]["margin"].status == "flips at 0.05"
    assert j["robustness"]["level"].status == "robust" and "majority" not in j["conventions"]
    runs = [{"z": 0.53, "h": 0.50, "n": 10_000}, {"z": 0.50, "h": 0.50, "n": 10_000}]
    j = gap_judgement(runs, 0.25)
    assert j["verdict"].outcome == "inconclusive" and j["robustness"]["majority"].status == "flips at 0.5"
    assert j["verdict"].reason.endswith("probe test examples); or more seeds (the runs disagree)")


@pytest.mark.parametrize("a, b", list(itertools.product((0.1, 0.5, 0.9), (0.2, 0.6))))
def test_gap_interval_covers_the_paired_bootstrap_of_any_coupling(a, b):
    """A paired bootstrap over n test examples with per-example outcomes (three couplings) gives an interval
    no wider than the bound's."""
    rng = np.random.default_rng(0)
    n = 4000
    for rho in ("independent", "together", "opposite"):
        u = rng.random(n)
        x = u < a
        y = (rng.random(n) < b) if rho == "independent" else (u < b) if rho == "together" else (u > 1 - b)
        idx = rng.integers(0, n, (2000, n))
        diffs = x[idx].mean(1) - y[idx].mean(1)
        lo, hi = gap_interval(x.mean(), y.mean(), n)
        q = np.quantile(diffs, [0.025, 0.975])
        assert hi - lo >= (q[1] - q[0]) * 0.95  # the bound is never narrower (5% for the bootstrap's own noise)

"""Collapse grid: the 14 runs, documented keys and robust facts on tiny cells (BN head through the
whole-operator path, M != 0 there; a linear head with M = 0; every run starting collapsed, by the induced collapse
where x0.1 is inert), and the two C5 verdict rules on fabricated metrics."""
import dataclasses
import json
import math

import pytest

from headgeom.experiments.collapse_grid import (
    TRAIN, GridConfig, cells, grid_runs, run_cell, run_name, summarize, train_config)
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = GridConfig(train=dataclasses.replace(TRAIN, data_options={"n": 24, "size": 16}, batch_size=8, max_steps=2,
                                            track_every=2, probe_size=8),
                  hidden=16, out_dim=16, pred_hidden=16, block_samples=2)
KEYS = {"steps", "final_loss", "loss", "spread_projector", "spread_z", "cov_condition_z", "cov_condition_projector",
        "rankme_projector", "view_gap_deg", "update_ratio", "lambda_min", "lambda_max", "floor", "operand_scale", "heff_source", "M_ratio", "M_ratio_norm",
        "spread_initial",
        "spread_final", "spread_ratio", "escaped", "grew", "collapsed_initially", "dead_head", "diverged",
        "train_budget", "spread_reference", "collapse_level", "lambda_min_G", "threshold_ratio", "collapse", "out_dim"}


def test_the_paper_grid_has_14_runs_and_documented_presets():
    runs = grid_runs()
    assert len(runs) == 14 == len(set(runs))
    assert ("linear", False, 0.05) in runs and ("gelu", False, 0.05) in runs
    assert {(a, bn) for a, bn, _ in runs if a in ("silu", "relu")} == {(a, b) for a in ("silu", "relu") for b in (True, False)}
    import headgeom.experiments.collapse_grid as mod

    exp = mod.EXPERIMENT
    assert exp.id == "GRID" and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        assert preset().preset == name and "headgeom reproduce --only GRID" in preset.__doc__
    paper = exp.config("paper")
    assert (paper.train.batch_size, paper.train.epochs, paper.seeds, paper.train.pseudo_collapse,
            paper.train.momentum) == (512, 50, 3, 0.1, 0.9)
    tc = train_config(paper, "silu", True, 0.5, 2)
    assert tc.head == "d-2048-2048:silu:nobias:bn:last=bn" and tc.predictor == "d-512-2048:silu:nobias:bn"
    assert (tc.lr, tc.weight_decay, tc.normalize, tc.method_options["recipe"]) == (0.5, 0.0, False, "paper_simsiam")
    # x0.1 where it collapses the spread (smooth heads without BN), the induced collapse where it cannot
    assert (tc.pseudo_collapse, tc.collapse) == (None, paper.collapse_depth)
    for act, bn in (("relu", False), ("linear", False), ("relu", True)):
        assert (train_config(paper, act, bn, 0.05, 0).pseudo_collapse, train_config(paper, act, bn, 0.05, 0).collapse) \
            == (None, 0.02)
    for act in ("silu", "gelu"):
        assert (train_config(paper, act, False, 0.05, 0).pseudo_collapse,
                train_config(paper, act, False, 0.05, 0).collapse) == (0.1, None)
    every_x01 = dataclasses.replace(paper, collapse_depth=None)  # the paper's protocol for every run
    assert {train_config(every_x01, a, bn, lr, 0).pseudo_collapse for a, bn, lr in every_x01.runs} == {0.1}
    assert len(cells(paper)) == 42
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)
    with pytest.raises(ValueError, match="triples"):
        cells(dataclasses.replace(TINY, runs=(("relu", False),)))
    with pytest.raises(ValueError, match=r"activations has unknown entries \['elu'\]"):
        cells(dataclasses.replace(TINY, runs=(("elu", False, 0.1),)))


@pytest.mark.parametrize("act,bn", [("relu", True), ("linear", False), ("silu", False)])
def test_tiny_cell_keys_and_robust_facts(act, bn):
    m = run_cell(TINY, {"activation": act, "bn": bn, "lr": 0.05, "seed": 0})
    json.dumps(m)
    x01 = act == "silu"  # the one run here that keeps the paper's x0.1
    inert_keys = {"pseudo_collapse_gap", "inert_pseudo_collapse"} if x01 else set()  # measured for x0.1 without BN
    assert set(m) == KEYS | inert_keys, set(m) ^ (KEYS | inert_keys)
    assert m["steps"] == [0, 2] and m["train_budget"] == {"steps": TINY.train.max_steps, "batch": TINY.train.batch_size}
    assert m["heff_source"] in ("blocks", "operator") and m["M_ratio_norm"] != "absent"
    assert all(lo <= hi for lo, hi in zip(m["lambda_min"], m["lambda_max"]))
    # the engine's floor (rel_floor · max(max|λ|, S), S the operand scale), kept for the figure's zero band
    assert all(s > 0 for s in m["operand_scale"])
    assert m["floor"] == pytest.approx([TINY.rel_floor * max(abs(lo), abs(hi), s) for lo, hi, s in
                                        zip(m["lambda_min"], m["lambda_max"], m["operand_scale"])])
    if bn:  # train-mode BatchNorm divides by the batch std, a curved map of z: M != 0 even with ReLU
        assert m["heff_source"] == "operator" and all(v is not None and v > 1e-6 for v in m["M_ratio"])
    elif act == "linear":  # linear head (with its fixed offset): M = 0 to round-off in every tracked block
        assert m["heff_source"] == "blocks" and all(v is not None and v <= 1e-12 for v in m["M_ratio"])
    assert m["spread_initial"] > 0 and m["spread_ratio"] == pytest.approx(m["spread_final"] / m["spread_initial"])
    # one level for every head: a fraction of 1/sqrt(k), the uniform spread on the sphere in R^k
    assert m["out_dim"] == TINY.out_dim and m["collapse_level"] == pytest.approx(TINY.collapse_fraction / math.sqrt(16))
    assert m["escaped"] == (m["spread_final"] >= m["collapse_level"]) and m["diverged"] is None
    assert m["grew"] == (m["spread_ratio"] >= TINY.growth)
    assert m["collapsed_initially"] == (m["spread_initial"] < m["collapse_level"])
    if x01:  # a smooth head's x0.1 lowers its spread below the same head's at normal init
        assert m["collapse"] == "x0.1 weights" and m["spread_initial"] < m["spread_reference"]
    else:  # the induced collapse: the stated spread at step 0 whatever the head, under the normal init's
        assert m["collapse"] == "offset to 0.02/sqrt(k)"
        assert m["spread_initial"] * math.sqrt(16) == pytest.approx(TINY.collapse_depth, rel=1e-4)
        assert m["spread_initial"] < m["spread_reference"] and m["collapsed_initially"]


def test_the_papers_x01_on_a_linear_head_is_inert():
    """With collapse_depth None every run takes the paper's x0.1: on a bias-free linear head it only scales the
    output, so its spread at step 0 is the normal init's and the cosine loss cannot see it."""
    m = run_cell(dataclasses.replace(TINY, collapse_depth=None), {"activation": "linear", "bn": False, "lr": 0.05,
                                                                  "seed": 0})
    assert m["collapse"] == "x0.1 weights" and m["inert_pseudo_collapse"]
    assert m["pseudo_collapse_gap"]["ambient"] <= 1e-9
    assert m["spread_initial"] == pytest.approx(m["spread_reference"], rel=1e-5)  # float32


def test_a_diverged_run_is_a_result_not_a_failed_cell():
    m = run_cell(TINY, {"activation": "linear", "bn": False, "lr": 1e38, "seed": 0})
    assert "non-finite" in m["diverged"] and m["escaped"] is None and m["final_loss"] is None
    assert m["train_budget"] == {"steps": TINY.train.max_steps, "batch": TINY.train.batch_size}  # the budget it was given
    assert m["steps"][0] == 0 and m["spread_initial"] > 0  # the records up to the stop are kept


def _fake(escaped, dead=False, collapsed=True):
    """A run of TINY (k = 16: uniform spread 0.25, level 0.125): starts under the level or not, ends past it (x6)
    or where it started."""
    start = 0.05 if collapsed else 0.15
    end = 0.3 if escaped else start
    return {"steps": [0, 1], "spread_projector": [start, end], "lambda_min": [-1.0, 0.0], "out_dim": 16,
            "lambda_max": [1.0, 1.0], "M_ratio": [0.0, 0.0], "cov_condition_z": [1.0, 2.0], "update_ratio": [None, 3.0],
            "spread_initial": start, "spread_final": end, "spread_ratio": end / start, "grew": escaped,
            "spread_reference": 0.2, "collapse_level": 0.125, "collapsed_initially": collapsed,
            "escaped": escaped, "dead_head": dead, "final_loss": -0.5, "diverged": None}


def _verdicts(escapes, never=()):
    """escapes: {(act, bn, lr): [escaped per seed]} for the whole grid (missing runs: never escape); never: the
    runs whose seeds are not collapsed at step 0."""
    cfg = dataclasses.replace(TINY, seeds=3)
    results = []
    for a, bn, lr in cfg.runs:
        for s, e in enumerate(escapes.get((a, bn, lr), [False] * 3)):
            results.append(({"activation": a, "bn": bn, "lr": lr, "seed": s},
                            _fake(e, collapsed=(a, bn, lr) not in never)))
    summary = summarize(cfg, results)
    for c in rows_json(summary):
        Row.from_json(c)
        assert c["id"] in ("C5", "C4") and c["verdict"] in VERDICTS and c["headline"] in c["measured"]
        if c["id"] == "C5":  # every escape row names its conventions and carries its verdict over each
            assert c["conventions"] == ["collapse_fraction", "growth", "majority"] == list(c["robustness"])
            assert c["robustness"]["collapse_fraction"]["verdicts"][c["robustness"]["collapse_fraction"]["values"].index(
                cfg.collapse_fraction)] == c["verdict"]
    json.dumps(rows_json(summary))
    assert tables_md(summary)[0][1].count("\n") == 1 + 14
    return [c["verdict"] for c in rows_json(summary) if c["id"] == "C5"]


def test_verdicts_follow_the_stated_criterion():
    yes = [True] * 3
    relu_routes = {("relu", True, lr): yes for lr in (0.05, 0.5, 0.005)} | {("relu", False, 0.5): yes}
    assert _verdicts({("silu", False, 0.005): yes, **relu_routes}) == ["supported", "supported"]
    # ReLU escapes at the smallest step size without BN: the gap is not there
    assert _verdicts({("silu", False, 0.005): yes, ("relu", False, 0.005): yes, **relu_routes}) == [
        "not supported", "not supported"]
    # the smooth head never escapes at the smallest step; ReLU with BN escapes in 2 of 3 seeds only
    assert _verdicts({**relu_routes, ("relu", True, 0.05): [True, True, False]}) == ["not supported", "inconclusive"]
    assert run_name("relu", True, 0.5) == "relu/bn/lr=0.5"
    # one inclusion rule for every activation and BN setting: runs never collapsed at step 0 are left out, ReLU
    # without BN as much as BN heads, so a row whose "not expected" group never collapsed cannot be judged
    relu_lo = ("relu", False, 0.005)
    assert _verdicts({("silu", False, 0.005): yes, **relu_routes}, never=(relu_lo,)) == ["inconclusive", "inconclusive"]
    bn_runs = tuple(k for k in relu_routes if k[1])
    assert _verdicts({("silu", False, 0.005): yes, **relu_routes}, never=bn_runs) == ["supported", "inconclusive"]
    # and a never-collapsed run is never counted as escaped, even when its spread ends high
    assert _verdicts({("silu", False, 0.005): yes, relu_lo: yes, **relu_routes}, never=(relu_lo,))[0] == "inconclusive"

"""C5 experiment wiring: registration, presets, run_cell keys on a tiny config, claims format.

No verdict of a real run and no paper number is asserted: only the documented structure and facts that hold
whatever the dynamics do (M = 0 for ReLU/linear heads without BN, escape-time definition), and the verdict
rule with its headline on built metrics.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from figure_checks import assert_legends_outside
from headgeom.experiments.registry import EXPERIMENTS, load_all
from headgeom.experiments import c5_relu_gap as c5
from headgeom.theory import dynamics as dyn
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

TINY = dataclasses.replace(
    c5.quick(), seeds=2, heads=("linear", "relu", "silu"), horizon=0.2, n_record=4, lrs=(0.05, 0.1),
    rtol=1e-6, atol=1e-8, max_nfev=3000,
    system=dyn.SystemSpec(n=5, d=3, width=8, k=4, pred_width=4, init_spread=0.1))

RUN_KEYS = {"t", "loss", "spread_backbone", "spread_projector", "escape_time", "final_over_initial", "nfev",
            "success", "message", "diverged"}
GEO_KEYS = {"t", "max_abs_M", "M_over_H", "max_abs_H", "lambda_min_H", "dead", "active_fraction",
            "min_abs_preactivation", "reading", "row_wise_head"}


@pytest.fixture(scope="module")
def results():
    return [(cell, c5.run_cell(TINY, cell)) for cell in c5.cells(TINY, TINY.seeds)]


def test_registered_as_theory_with_three_documented_presets():
    load_all()
    exp = EXPERIMENTS["C5"]
    assert exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, fn in exp.presets.items():
        cfg = fn()
        assert cfg.preset == name and cfg.seeds >= 3
        assert fn.__doc__ and f"--preset {name}" in fn.__doc__ and "min" in fn.__doc__  # command and runtime
        assert set(cfg.lrs) == {0.005, 0.05, 0.5} and set(cfg.bn) == {False, True}
        assert {"linear", "relu", "silu", "gelu"} <= set(cfg.heads)


def test_cells_cover_head_bn_seed():
    cells = c5.cells(TINY, 2)
    assert len(cells) == len(TINY.heads) * len(TINY.bn) * 2
    assert {(c["head"], c["bn"], c["seed"]) for c in cells} == {
        (h, b, s) for h in TINY.heads for b in TINY.bn for s in range(2)}


def test_run_cell_returns_the_documented_keys(results):
    for cell, m in results:
        assert {"head", "bn", "seed", "runs", "geometry", "escape_on", "escape_factor"} <= set(m)
        assert set(m["runs"]) == {"flow"} | {f"gd_lr={lr:g}" for lr in TINY.lrs}
        for name, run in m["runs"].items():
            assert RUN_KEYS <= set(run)
            assert len(run["t"]) == len(run["spread_backbone"]) == len(run["loss"])
            assert run["t"][0] == 0.0 and run["t"][-1] == pytest.approx(TINY.horizon)
            s = np.array(run[f"spread_{TINY.escape_on}"], dtype=float)
            expected = dyn.escape_time(np.array(run["t"]), s, TINY.escape_factor)
            assert run["escape_time"] == expected
        assert len(m["geometry"]) >= 1 and all(GEO_KEYS <= set(g) for g in m["geometry"])


def test_piecewise_linear_heads_without_bn_have_zero_M_and_smooth_ones_do_not(results):
    for cell, m in results:
        for g in m["geometry"]:
            if cell["head"] in ("linear", "relu") and not cell["bn"] and not g["dead"]:
                assert g["max_abs_M"] <= 1e-14 * max(g["max_abs_H"], 1e-300)
            if cell["head"] == "silu" and not cell["bn"]:
                assert g["M_over_H"] > 1e-8


def test_summarize_claims_tables_and_figure(results):
    summary = c5.summarize(TINY, results)
    assert len(rows_json(summary)) == 1
    claim = Row.from_json(rows_json(summary)[0]).to_json()
    assert claim["id"] == "C5" and claim["verdict"] in VERDICTS and claim["criterion"]
    assert claim["headline"] in claim["measured"]
    for name, value in claim["measured"].items():
        assert {"value", "n", "spread"} <= set(value), name
    titles = [t for t, _ in tables_md(summary)]
    assert len(titles) == 3 and all(tab.count("\n") >= 2 for _, tab in tables_md(summary))
    fig = summary.figures[0][1]()
    assert len(fig.axes) == len(TINY.heads) and assert_legends_outside(fig) == 1


def test_summarize_reads_metrics_back_from_json(results):
    import json

    from headgeom.experiments.runner import jsonable

    back = [(c, json.loads(json.dumps(jsonable(m)))) for c, m in results]
    Row.from_json(rows_json(c5.summarize(TINY, back))[0])


def test_bad_escape_target_is_rejected():
    with pytest.raises(ValueError, match="escape_on"):
        c5.run_cell(dataclasses.replace(TINY, escape_on="head"), {"head": "relu", "bn": False, "seed": 0})


def _built(head, bn, flow_escapes, gd_escapes=False, m_over_h=0.0):
    """Metrics of one built cell: escape (or not) under the flow and one GD lr, M/H along the flow."""
    run = lambda esc: {"escape_time": 1.0 if esc else None, "diverged": False, "success": True}  # noqa: E731
    return {"head": head, "bn": bn, "runs": {"flow": run(flow_escapes), "gd_lr=0.05": run(gd_escapes)},
            "geometry": [{"dead": False, "M_over_H": m_over_h}]}


def test_verdict_rule_names_the_measure_that_decided():
    def judge(cells):
        verdict, meas, _, headline = c5._verdict(TINY, [({}, m) for m in cells])
        assert headline in meas
        return verdict, headline

    relu_stuck = [_built("relu", False, False, gd_escapes=True) for _ in range(4)]
    silu_escapes = [_built("silu", False, True) for _ in range(4)]
    assert judge(relu_stuck + silu_escapes) == ("supported", "relu_flow_alive_and_not_escaped_fraction")
    relu_escapes = [_built("relu", False, True) for _ in range(4)]
    assert judge(relu_escapes + silu_escapes) == ("not supported", "relu_flow_escape_fraction")
    relu_m = [_built("relu", False, False, gd_escapes=True, m_over_h=1e-3) for _ in range(4)]
    assert judge(relu_m + silu_escapes) == ("not supported", "relu_max_M_over_H_along_flow")
    never = [_built("relu", False, False) for _ in range(4)]  # no other route escapes
    assert judge(never + silu_escapes) == ("inconclusive", "relu_other_route_escaped")
    silu_stuck = [_built("silu", False, False) for _ in range(4)]
    assert judge(relu_stuck + silu_stuck) == ("inconclusive", "silu_flow_escape_fraction")
    # no smooth head run: the smooth condition's measure is there, with n = 0
    verdict, meas, _, headline = c5._verdict(TINY, [({}, m) for m in relu_stuck])
    assert (verdict, headline) == ("inconclusive", "smooth_flow_escape_fraction") and meas[headline]["n"] == 0
    assert judge([]) == ("inconclusive", "relu_flow_escape_fraction")

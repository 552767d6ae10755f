"""C2 experiment: cells, run_cell keys and robust facts, summary claims, criterion logic, registry."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from figure_checks import assert_legends_outside
from headgeom.experiments import c2_curvature as c2
from headgeom.experiments.registry import load_all
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

TINY = dataclasses.replace(
    c2.quick(), head="4-8-3:silu", n_samples=2, settings=("negative_cosine:tangential", "mse:ambient"),
    slice_dims=(2,), seeds=1, radii=(0.0, 1e-2, 1e-1), n_directions=2)


@pytest.fixture(scope="module")
def results():
    return [(cell, c2.run_cell(TINY, cell)) for cell in c2.cells(TINY)]


def test_cells_enumerate_settings_dims_seeds():
    cfg = dataclasses.replace(TINY, slice_dims=(2, 3))
    cells = c2.cells(cfg, seeds=3)
    assert len(cells) == 2 * 2 * 3
    assert {c["setting"] for c in cells} == set(cfg.settings) and {c["seed"] for c in cells} == {0, 1, 2}
    with pytest.raises(ValueError, match="slice_mode"):
        c2.cells(dataclasses.replace(TINY, slice_mode="best"))
    with pytest.raises(ValueError, match="radii"):
        c2.cells(dataclasses.replace(TINY, radii=(1e-2, 1e-1)))
    with pytest.raises(ValueError, match="seed"):
        c2.cells(TINY, seeds=0)


def test_run_cell_keys_and_robust_facts(results):
    by = {cell["setting"]: m for cell, m in results}
    for m in by.values():
        assert tuple(m) == c2.METRIC_KEYS
        assert m["slice_found"] and m["k"] == 6 and len(m["iso_error_max"]) == len(TINY.radii)
        assert m["iso_error_max"][0] < 1e-12  # W = g(x0)^(-1/2) is exact at x0
    curved, flat = by["negative_cosine:tangential"], by["mse:ambient"]
    assert curved["route_rel_diff"] < 1e-4  # the two curvature routes agree
    assert curved["cancellation"] > 1e-6 and curved["iso_error_max"][-1] > 1e-3
    assert curved["iso_error_max"][-1] > curved["iso_error_max"][1]  # grows with distance
    assert curved["hess_n_zero"] == TINY.n_samples  # tangential reading: radial directions removed
    assert flat["max_abs_R_exact"] < 1e-12 and max(flat["iso_error_max"]) < 1e-12
    assert flat["hess_n_negative"] == 0 and flat["n_points_indefinite"] == 0


def test_same_head_outputs_for_every_setting_of_a_seed():
    a, b = c2.head_outputs(TINY, 0), c2.head_outputs(TINY, 0)
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)
    assert not torch.equal(a[0], c2.head_outputs(TINY, 1)[0])


def test_random_slice_mode_finds_positive_definite_slice():
    cfg = dataclasses.replace(TINY, slice_mode="random", settings=("negative_cosine:ambient",))
    m = c2.run_cell(cfg, {"setting": "negative_cosine:ambient", "m": 2, "seed": 0})
    # the ambient cosine Hessian has one negative eigenvalue per row: random 2-slices are often PD
    assert m["slice_found"] and 1 <= m["slice_draws"] <= cfg.max_slice_draws
    assert m["g0_lambda_min"] > 0 and m["ambient_n_negative"] >= 1
    # m = k: the slice is all of R^k, so Bᵀ H B is similar to the indefinite H and no draw can succeed
    none = c2.run_cell(dataclasses.replace(cfg, max_slice_draws=3), {"setting": "negative_cosine:ambient", "m": 6,
                                                                     "seed": 0})
    assert not none["slice_found"] and none["slice_draws"] == 3 and none["route_rel_diff"] is None


def test_summarize_claims_table_and_figure(results):
    import matplotlib

    matplotlib.use("Agg")
    summary = c2.summarize(TINY, results)
    assert [c["setting"]["objective"] for c in rows_json(summary)] == ["negative_cosine"]  # flat control is no claim
    for claim in rows_json(summary):
        Row.from_json(claim)
        assert claim["id"] == "C2" and claim["verdict"] in VERDICTS
        assert claim["headline"] == c2.iso_key(TINY) and claim["headline"] in claim["measured"]
        assert all({"value", "n", "spread"} <= set(v) for v in claim["measured"].values())
    title, table = tables_md(summary)[0]
    assert "negative_cosine:tangential" in table and "mse:ambient" in table
    name, build = summary.figures[0]
    fig = build()
    assert name == "isotropy_vs_distance" and assert_legends_outside(fig) == 1
    flat = [ln.get_label() for ln in fig.axes[0].get_lines() if ln.get_label().endswith("flat control")]
    assert len(flat) == 1 and flat[0].startswith("mse:")  # the summary marks the mse settings as the flat control


def test_criterion_reacts_to_flat_control_and_route_disagreement(results):
    assert rows_json(c2.summarize(TINY, results))[0]["verdict"] == "supported"
    broken = copy.deepcopy(results)
    for cell, m in broken:
        if m["objective"] == "mse":
            m["iso_error_max"] = [0.0, 1e-3, 1e-2]
    claim = rows_json(c2.summarize(TINY, broken))[0]
    assert claim["verdict"] == "inconclusive" and "flat control" in claim["reason"]
    assert claim["headline"] == "flat_control_iso_error"  # the gate that ended the judgement names its measure
    disagree = copy.deepcopy(results)
    for cell, m in disagree:
        if m["objective"] != "mse":
            m["route_rel_diff"] = 1e-2
    claim = rows_json(c2.summarize(TINY, disagree))[0]
    assert (claim["verdict"], claim["headline"]) == ("inconclusive", "route_rel_diff")
    stuck = copy.deepcopy(results)
    for cell, m in stuck:
        if m["objective"] != "mse":
            m["iso_error_max"] = [0.0, 1e-5, 1e-4]
    claim = rows_json(c2.summarize(TINY, stuck))[0]
    assert (claim["verdict"], claim["headline"]) == ("not supported", c2.iso_key(TINY))
    no_control = [(c, m) for c, m in results if m["objective"] != "mse"]
    assert rows_json(c2.summarize(TINY, no_control))[0]["verdict"] == "inconclusive"


def test_conventions_named_and_rejudged_over_each(results):
    # every row names the check's tolerances and is re-judged over each range, the config's value among them
    claim = rows_json(c2.summarize(TINY, results))[0]
    assert tuple(claim["conventions"]) == c2.CONVENTIONS and set(claim["robustness"]) == set(c2.CONVENTIONS)
    for name, r in claim["robustness"].items():
        assert r["at"] == getattr(TINY, name) and r["verdicts"][r["values"].index(r["at"])] == claim["verdict"]
        assert r["values"] == sorted({*getattr(TINY, f"{name}_sweep"), getattr(TINY, name)})
    assert "Re-judged: route_tol over" in claim["criterion"]
    # built cases with known flips: routes that differ by 1e-3 agree only at route_tol 1e-2; an isotropy error of
    # 5e-4 at the largest radius grows past growth_min 1e-4 only
    disagree = copy.deepcopy(results)
    for cell, m in disagree:
        if m["objective"] != "mse":
            m["route_rel_diff"] = 1e-3
    claim = rows_json(c2.summarize(TINY, disagree))[0]
    assert claim["verdict"] == "inconclusive"
    assert claim["robustness"]["route_tol"]["status"] == "flips at 0.01"
    assert claim["robustness"]["growth_min"]["status"] == "robust"  # the routes gate comes first
    stuck = copy.deepcopy(results)
    for cell, m in stuck:
        if m["objective"] != "mse":
            m["iso_error_max"] = [0.0, 1e-5, 5e-4]
    claim = rows_json(c2.summarize(TINY, stuck))[0]
    assert claim["verdict"] == "not supported"
    assert claim["robustness"]["growth_min"]["status"] == "flips at 0.0001"
    assert claim["robustness"]["route_tol"]["status"] == "robust"


def test_registered_as_theory_with_presets():
    exp = load_all()["C2"]
    assert exp.theory and exp is c2.EXPERIMENT
    for preset in ("quick", "small", "paper"):
        cfg = exp.config(preset)
        assert cfg.preset == preset and min(cfg.slice_dims) >= 2 and max(cfg.slice_dims) <= 6
        assert exp.presets[preset].__doc__ and "Command" in exp.presets[preset].__doc__

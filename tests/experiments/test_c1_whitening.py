"""C1 experiment (Thm 3.1): a tiny configuration of every loss/reading, the documented metric
keys, the robust facts (round-off isotropy, engine = formula, M = 0 for the linear head, the
signs forced by indefinite A, ε_S ≥ 1 for dim S > r), claim entries and the verdict logic."""
import copy
import dataclasses
import json

import pytest
import torch

from claim_rows import rows_json, tables_md
from figure_checks import assert_legends_outside
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS
from headgeom.experiments.c1_whitening import DEFAULT_SETTINGS, C1Config, cells, paper, quick, run_cell, small, summarize
from headgeom.experiments.registry import EXPERIMENTS

TINY = C1Config(preset="quick", head="6-10-4:silu", batch=4, samples=1, subspaces=1, fit_restarts=1, seeds=1)
ROW_KEYS = ("rank_positive", "n_negative", "n_zero", "rank", "lambda_min", "lambda_max", "cond_positive",
            "block_check", "oversize_fit_error", "oversize_bound", "literal_fit_error", "literal_best")
TRIAL_KEYS = ("iso_error", "iso_error_engine", "leakage", "leakage_engine", "engine_vs_direct", "engine_M_max",
              "oversize_iso_error", "abs_iso_error", "abs_minus_one", "abs_plus_one", "abs_signs_ok",
              "abs_restricted_min")


@pytest.fixture(scope="module")
def results():
    return [(c, run_cell(TINY, c)) for c in cells(TINY, 1)]


def _by(results, setting):
    return next(m for c, m in results if c["setting"] == setting)


def test_registered_with_presets():
    exp = EXPERIMENTS["C1"]  # registered at import (load_all would also import others' modules)
    assert exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, fn in (("quick", quick), ("small", small), ("paper", paper)):
        cfg = exp.config(name)
        assert cfg == fn() and cfg.preset == name and fn.__doc__ and "headgeom reproduce" in fn.__doc__
        assert cfg.seeds * cfg.samples * cfg.subspaces >= 5  # ≥ 5 (S, seed) trials per loss/reading
    assert quick().settings == DEFAULT_SETTINGS


def test_cells_and_bad_settings():
    cs = cells(TINY, 2)
    assert len(cs) == 2 * len(DEFAULT_SETTINGS) and cs[0] == {"setting": "mse:ambient", "seed": 0}
    json.dumps(cs)
    with pytest.raises(ValueError, match="objective:reading"):
        cells(dataclasses.replace(TINY, settings=("mse",)), 1)
    with pytest.raises(ValueError, match="unknown objective"):
        cells(dataclasses.replace(TINY, settings=("cosine:ambient",)), 1)
    with pytest.raises(ValueError, match="reading"):
        cells(dataclasses.replace(TINY, settings=("mse:radial",)), 1)
    with pytest.raises(ValueError, match="k <= d"):
        run_cell(dataclasses.replace(TINY, head="3-8-4:silu"), {"setting": "mse:ambient", "seed": 0})


def test_run_cell_keys_and_round_off(results):
    for cell, m in results:
        assert {"setting", "objective", "reading", "seed", "d", "k", "N", *ROW_KEYS, *TRIAL_KEYS} <= set(m)
        json.dumps(m)
        assert (m["d"], m["k"], m["N"]) == (6, 4, 4)
        assert len(m["rank_positive"]) == TINY.samples
        assert m["n_negative"][0] + m["n_zero"][0] + m["rank_positive"][0] == 4
        assert max(m["block_check"]) < 1e-10  # loss_hvp block vs torch.func.hessian
        if m["rank_positive"][0] > 0:
            assert len(m["iso_error"]) == TINY.subspaces
            assert max(m["iso_error"] + m["iso_error_engine"] + m["leakage"] + m["leakage_engine"]) < 1e-10
            assert max(m["engine_vs_direct"]) < 1e-10
            assert max(m["engine_M_max"]) < 1e-14  # linear head: M = 0
        # dim S = r₊ + 1: error is never below the inertia bound 1
        assert min(m["oversize_iso_error"] + m["oversize_fit_error"]) >= 1 - 1e-8


def test_readings_give_the_known_structure(results):
    m = _by(results, "mse:ambient")  # the MSE loss's own Hessian: ∇²L = I / N
    assert m["rank_positive"] == [4] and m["n_negative"] == [0]
    assert m["lambda_min"][0] == pytest.approx(0.25) and m["lambda_max"][0] == pytest.approx(0.25)
    assert _by(results, "negative_cosine:tangential")["n_zero"][0] >= 1  # radial direction removed
    # −cos and InfoNCE are 0-homogeneous in u_i, so their ambient blocks are indefinite
    for s in ("negative_cosine:ambient", "info_nce:ambient"):
        m = _by(results, s)
        assert m["n_negative"][0] >= 1 and m["rank_positive"][0] >= 1
        assert m["abs_signs_ok"] == [True] * TINY.subspaces
        assert m["abs_minus_one"] == [m["n_negative"][0]] * TINY.subspaces
        assert m["abs_iso_error"][0] == pytest.approx(2.0, abs=1e-10)
        assert m["literal_best"][0] >= 1 - 1e-8


def test_summarize_claims_tables_figure(results, tmp_path):
    summary = summarize(TINY, results)
    assert rows_json(summary)
    for claim in rows_json(summary):
        Row.from_json(claim)
        assert claim["id"] == "C1" and claim["verdict"] in VERDICTS and claim["criterion"]
        assert claim["headline"] in claim["measured"]
        for value in claim["measured"].values():
            assert {"value", "n", "spread"} <= set(value)
    json.dumps(rows_json(summary))
    main = {(c["setting"]["objective"], c["setting"]["reading"]): c for c in rows_json(summary)
            if "positive part" in c["statement"]}
    assert len(main) == len(DEFAULT_SETTINGS)
    assert main[("mse", "ambient")]["verdict"] == "supported"
    literal = {(c["setting"]["objective"], c["setting"]["reading"]): c for c in rows_json(summary)
               if "as stated, r = rank A" in c["statement"]}
    assert len(literal) == len(DEFAULT_SETTINGS) and all(c["evidence"] == "test" for c in literal.values())
    assert literal[("mse", "ambient")]["verdict"] == "supported"  # A = I/N ⪰ 0: rank A = rank A₊
    for key in (("negative_cosine", "ambient"), ("info_nce", "ambient")):  # A indefinite: counterexamples
        assert literal[key]["verdict"] == "not supported" and literal[key]["measured"]["n_negative"]["value"] > 0
        # the headline is what decided: the fraction of trials with n₋(A) > 0
        assert literal[key]["headline"] == "trials_with_negative_A"
        assert literal[key]["measured"]["trials_with_negative_A"]["value"] > 0
    assert literal[("mse", "ambient")]["measured"]["trials_with_negative_A"]["value"] == 0
    # the identity rows quote the worst ε_S over both routes (max decides), the dimension row every W's ε_S (min)
    pos = main[("mse", "ambient")]["measured"]["isotropy_error_both_routes"]
    assert main[("mse", "ambient")]["headline"] == "isotropy_error_both_routes" and pos["n"] == 2 * TINY.subspaces
    dim = [c for c in rows_json(summary) if "dimension condition" in c["statement"]]
    assert len(dim) == 1 and dim[0]["verdict"] == "supported"
    assert dim[0]["headline"] == "error_any_W" and dim[0]["measured"]["error_any_W"]["min"] >= 1 - 1e-6
    (title, table), = tables_md(summary)
    assert table.count("\n") == 1 + len(DEFAULT_SETTINGS)
    assert any("negative eigenvalues" in n for n in summary.notes)
    (name, build), = summary.figures
    fig = build()
    assert assert_legends_outside(fig) == 1
    fig.savefig(tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_verdict_logic_on_edited_metrics(results):
    bad = copy.deepcopy(results)
    _by(bad, "mse:ambient")["iso_error"][0] = 1e-6  # beyond round-off
    claims = rows_json(summarize(TINY, bad))
    mse = next(c for c in claims if c["setting"]["objective"] == "mse" and "positive part" in c["statement"])
    assert mse["verdict"] == "not supported"
    empty = copy.deepcopy(results[:1])
    m = empty[0][1]
    m["rank_positive"] = [0]
    for key in ("iso_error", "iso_error_engine"):
        m[key] = []
    only = rows_json(summarize(TINY, empty))[0]
    assert only["verdict"] == "inconclusive"
    fake = copy.deepcopy(results)
    _by(fake, "negative_cosine:ambient")["oversize_fit_error"][0] = 1e-12  # would contradict inertia
    dim = next(c for c in rows_json(summarize(TINY, fake)) if "dimension condition" in c["statement"])
    assert dim["verdict"] == "not supported"


def test_literal_row_is_decided_by_n_negative(results):
    def literal(res, setting):
        obj, reading = setting.split(":")
        return next(c for c in rows_json(summarize(TINY, res)) if "as stated, r = rank A" in c["statement"]
                    and (c["setting"]["objective"], c["setting"]["reading"]) == (obj, reading))

    assert literal(results, "mse:ambient")["verdict"] == "supported"
    edited = copy.deepcopy(results)
    m = _by(edited, "mse:ambient")
    m["n_negative"][0], m["literal_best"] = 1, [1.0]  # the same row, now with a negative eigenvalue
    assert literal(edited, "mse:ambient")["verdict"] == "not supported"
    m = _by(edited, "negative_cosine:ambient")
    m["n_negative"] = [0] * len(m["n_negative"])  # no negative eigenvalue left: the literal reading holds
    m["literal_best"] = []
    assert literal(edited, "negative_cosine:ambient")["verdict"] == "supported"


def test_seed_changes_the_point_and_is_reproducible():
    a = run_cell(TINY, {"setting": "barlow_twins:ambient", "seed": 3})
    b = run_cell(TINY, {"setting": "barlow_twins:ambient", "seed": 3})
    c = run_cell(TINY, {"setting": "barlow_twins:ambient", "seed": 4})
    assert a["lambda_max"] == b["lambda_max"] and a["lambda_max"] != c["lambda_max"]
    assert torch.get_default_dtype() == torch.float32  # the experiment does not change global state

"""C3 experiment: registration, cells, metric keys, robust facts on a tiny config, the verdict rule.

No test asserts the paper's numbers or a verdict on real fits; the verdict rule is tested on
fabricated metrics whose answer follows from the stated criterion.
"""
import dataclasses
import json
import math

import pytest

from figure_checks import assert_legends_outside
from headgeom.experiments.c3_depth import METRIC_KEYS, C3Config, cells, depth_pairs, eps_of, run_cell, summarize
from headgeom.experiments.registry import load_all
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

TINY = C3Config(preset="quick", d=2, k=4, n_points=5, depths=(1, 2), widths=(4,), seeds=1, adam_steps=10,
                lbfgs_iters=10)


@pytest.fixture(scope="module")
def tiny_results():
    return [(c, run_cell(TINY, c)) for c in cells(TINY, None)]


def test_registered_as_theory_experiment_with_documented_presets():
    exp = load_all()["C3"]
    assert exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = exp.config(name)
        assert isinstance(cfg, C3Config) and cfg.preset == name and cfg.k > cfg.d
        assert set(cfg.depths) == {1, 2, 3} and cfg.linear_baseline and cfg.seeds >= 2
        assert "headgeom reproduce --only C3" in preset.__doc__ and "CPU" in preset.__doc__


def test_cells_enumerate_every_setting_and_validate():
    cfg = dataclasses.replace(TINY, widths=(4, 8), seeds=3)
    cs = cells(cfg, None)
    assert len(cs) == 3 * (1 + len(cfg.depths) * len(cfg.widths))
    assert sum(c["depth"] == 0 for c in cs) == 3 and len({json.dumps(c, sort_keys=True) for c in cs}) == len(cs)
    assert len(cells(dataclasses.replace(cfg, linear_baseline=False), 1)) == len(cfg.depths) * len(cfg.widths)
    with pytest.raises(ValueError, match="huber"):
        cells(dataclasses.replace(TINY, loss="huber"), None)
    with pytest.raises(ValueError, match="depths must be >= 1"):
        cells(dataclasses.replace(TINY, depths=(0, 1)), None)
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)


def test_run_cell_returns_the_documented_keys_and_robust_facts(tiny_results):
    assert len(tiny_results) == 3
    for cell, m in tiny_results:
        assert set(m) == set(METRIC_KEYS), set(m) ^ set(METRIC_KEYS)
        json.dumps(m, allow_nan=False)
        assert m["engine_gap"] <= 1e-12  # closed-form H_eff = headgeom's engine on the fitted head
        assert m["objective_final"] <= m["objective_initial"]
        assert m["eps_iso"] >= 0 and 0 <= m["rel_fro"] <= 1 and isinstance(m["converged"], bool)
        assert m["T"] == TINY.n_points and m["adam_steps"] == TINY.adam_steps
        if cell["depth"] == 0:
            assert m["M_ratio_fro"] == 0.0 and m["activation"] == "linear" and m["n_params"] == TINY.d * TINY.k + TINY.k
        else:
            assert m["M_ratio_fro"] > 0
        if m["n_indefinite"] > 0:
            assert m["eps_kappa"] == "inf" and math.isinf(eps_of(m))


def test_bias_free_linear_baseline_is_indefinite_at_every_point():
    cfg = dataclasses.replace(TINY, bias=False)
    m = run_cell(cfg, {"depth": 0, "width": 0, "seed": 0})
    assert m["n_indefinite"] == cfg.n_points and m["eps_kappa"] == "inf" and m["eps_iso"] >= 1 - 1e-9


def test_flat_control_linear_baseline_reaches_zero():
    cfg = dataclasses.replace(TINY, loss="mse", adam_steps=0, lbfgs_iters=50)
    m = run_cell(cfg, {"depth": 0, "width": 0, "seed": 0})
    assert m["eps_kappa"] <= 1e-6 and m["converged"]



def test_summarize_claim_table_and_figure(tiny_results):
    s = summarize(TINY, tiny_results)
    (claim,) = rows_json(s)
    Row.from_json(claim)
    assert claim["id"] == "C3" and claim["verdict"] in VERDICTS and "ε" in claim["criterion"]
    assert claim["headline"] in claim["measured"]
    assert {"objective", "head", "reading", "preset"} <= set(claim["setting"])
    for value in claim["measured"].values():
        assert {"value", "n", "spread"} <= set(value)
    json.dumps(rows_json(s))
    (title, table), = tables_md(s)
    assert table.startswith("| depth | width |") and table.count("\n") == 2 + len(tiny_results) - 1
    (name, build), = s.figures
    fig = build()
    assert assert_legends_outside(fig) == 1
    import matplotlib.pyplot as plt

    plt.close(fig)


def _fake(eps, converged=True):
    return {"eps_kappa": None if math.isinf(eps) else eps, "eps_iso": min(eps, 9.0), "rel_fro": 0.1,
            "converged": converged,
            "stop_reason": "tolerance" if converged else "budget", "engine_gap": 0.0, "M_ratio_fro": 0.5,
            "init_eps_kappa": None, "lbfgs_iterations": 10, "objective_final": 1e-3}


def _verdict(eps_by_depth, converged=True, threshold=0.1):
    """eps_by_depth: {depth: [ε per seed]} at one width (4); depth 0 is the linear baseline."""
    n_seeds = len(next(iter(eps_by_depth.values())))
    depths = tuple(sorted(dp for dp in eps_by_depth if dp > 0))
    cfg = dataclasses.replace(TINY, depths=depths, widths=(4,), seeds=n_seeds, eps_threshold=threshold)
    results = [({"depth": dp, "width": 0 if dp == 0 else 4, "seed": s}, _fake(e, converged))
               for dp, es in eps_by_depth.items() for s, e in enumerate(es)]
    (claim,) = rows_json(summarize(cfg, results))
    return claim["verdict"], claim


def test_verdict_follows_the_stated_criterion():
    down = {0: [5.0] * 5, 1: [0.5] * 5, 2: [0.2] * 5, 3: [0.05] * 5}
    verdict, claim = _verdict(down)
    assert (verdict, claim["headline"]) == ("supported", "frac_seeds_deepest_below_threshold")
    # the deepest misses the threshold in 2 of 5 seeds (60% < 80%): that fraction is the headline
    verdict, claim = _verdict({**down, 3: [0.05, 0.05, 0.05, 0.15, math.inf]})
    assert (verdict, claim["headline"]) == ("not supported", "frac_seeds_deepest_below_threshold")
    assert claim["measured"]["frac_seeds_deepest_below_threshold"]["value"] == pytest.approx(0.6)
    assert claim["measured"]["frac_seeds_deepest_below_threshold"]["n"] == 5
    # depth does not lower ε: every pair ties or rises
    flat = {1: [0.05] * 5, 2: [0.05] * 5, 3: [0.05] * 5}
    verdict, claim = _verdict(flat)
    assert verdict == "not supported" and claim["measured"]["frac_depth_pairs_decreasing"]["value"] == 0
    assert claim["headline"] == "frac_depth_pairs_decreasing"
    # the same, but the fits did not converge: nothing is decided
    assert _verdict(flat, converged=False)[0] == "inconclusive"
    # non-converged fits measure the optimisation budget, not capacity: nothing is decided either way
    verdict, claim = _verdict(down, converged=False)
    assert verdict == "inconclusive" and "do reach the threshold" in claim["criterion"]
    assert claim["headline"] == "frac_fits_converged"
    # 4 of 5 seeds decrease at each step: 8/10 pairs = 80%
    mixed = {1: [0.5] * 5, 2: [0.2, 0.2, 0.2, 0.2, 0.9], 3: [0.05, 0.05, 0.05, 0.05, 0.95]}
    v, claim = _verdict(mixed)
    assert claim["measured"]["frac_depth_pairs_decreasing"]["value"] == pytest.approx(0.8) and v == "supported"


def test_depth_pairs_counts_only_consecutive_depths_with_both_seeds():
    groups = {(1, 4): {0: _fake(0.5), 1: _fake(0.5)}, (2, 4): {0: _fake(0.1)}, (3, 4): {0: _fake(math.inf)}}
    cfg = dataclasses.replace(TINY, depths=(1, 2, 3), widths=(4,))
    assert depth_pairs(cfg, groups) == (1, 2)  # 1→2 seed 0 wins; 2→3 seed 0 loses (∞); seed 1 has no depth 2

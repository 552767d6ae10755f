"""C6 experiment: registration, cells, the quotient wiring against dense references, the verdict rule.

The quotients of one tiny system are checked against independent float64 references: tangents by
central differences of f(T_ξ x), the head metric from torch.autograd.functional.jacobian, the loss
Hessian from torch.autograd.functional.hessian. Verdicts are tested on fabricated metrics only.
"""
import dataclasses
import json

import pytest
import torch
from torch.autograd.functional import hessian, jacobian

from figure_checks import assert_legends_outside
from headgeom.experiments.c6_invariance import (
    CONTROLS,
    METRICS,
    STAGES,
    C6Config,
    cells,
    measure,
    run_cell,
    summarize,
)
from headgeom.experiments.registry import load_all
from headgeom.objectives import analysis_loss
from headgeom.theory.invariance import InvarianceSpec, PatternManifold, build_models
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

D64 = torch.float64
SPEC = InvarianceSpec(size=8, n_content=3, hidden=8, d=6, head_hidden=8, k=5, n_train=64, steps=30, batch=32)
TINY = C6Config(preset="quick", system=SPEC, seeds=1, n_eval=4, n_control=3)


def test_registered_as_theory_experiment_with_documented_presets():
    exp = load_all()["C6"]
    assert exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = exp.config(name)
        assert isinstance(cfg, C6Config) and cfg.preset == name and cfg.system.dim_aug >= 1
        assert "headgeom reproduce --only C6" in preset.__doc__ and "CPU" in preset.__doc__
    # C7 analyses the same systems, so its presets must name the same specs
    c7 = load_all()["C7"]
    for name in exp.presets:
        assert c7.config(name).system == exp.config(name).system


def test_cells_enumerate_regimes_and_seeds_and_validate():
    cs = cells(TINY, 3)
    assert cs == [{"regime": r, "seed": s} for r in ("joint", "head_only") for s in range(3)]
    with pytest.raises(ValueError, match="unknown regime"):
        cells(dataclasses.replace(TINY, regimes=("frozen",)), None)
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)


def test_measure_matches_dense_float64_references():
    manifold = PatternManifold(SPEC, 0, D64)
    backbone, head = (m.double().eval() for m in build_models(SPEC, 0))
    g = torch.Generator().manual_seed(1)
    theta = manifold.sample(3, g)
    xi_other = torch.rand(3, 2, generator=g, dtype=D64)
    q = measure(backbone, head, manifold, theta, xi_other, "vicreg", 2, torch.Generator().manual_seed(2))
    x = manifold.render(theta)
    with torch.no_grad():
        z = backbone(x)
        u_other = head(backbone(manifold.act(x, xi_other)))
    loss = analysis_loss("vicreg", u_other)
    n, k = z.shape[0], SPEC.k
    with torch.no_grad():
        u = head(z)
    h_loss = hessian(lambda w: loss(w.reshape(n, k)), u.reshape(-1))  # (N·k, N·k), dense
    eps = 1e-6
    for a, axis in enumerate(("x", "y")):
        shift = (lambda s: manifold.act(x, torch.tensor([[s, 0.0]] * n, dtype=D64))) if axis == "x" else \
            (lambda s: manifold.act(x, torch.tensor([[0.0, s]] * n, dtype=D64)))
        with torch.no_grad():
            v = (backbone(shift(eps)) - backbone(shift(-eps))) / (2 * eps)  # (N, d) tangents by central differences
            t = (shift(eps) - shift(-eps)).flatten(1) / (2 * eps)  # pixel tangents
        for i in range(n):
            jh = jacobian(lambda r: head(r.unsqueeze(0)).squeeze(0), z[i])  # (k, d)
            vi = v[i]
            ref_g = (jh @ vi).square().sum() / vi.dot(vi)
            torch.testing.assert_close(q["head_G"]["tangent"][i, a], ref_g, rtol=1e-6, atol=0)
            block = jh.T @ h_loss[i * k:(i + 1) * k, i * k:(i + 1) * k] @ jh
            torch.testing.assert_close(q["head_GL"]["tangent"][i, a], vi @ block @ vi / vi.dot(vi), rtol=1e-6, atol=1e-12)
            jf = jacobian(lambda im: backbone(im.reshape(1, 1, 8, 8)).squeeze(0), x[i].reshape(-1))  # (d, 64)
            ref_b = (jf @ t[i]).square().sum() / t[i].dot(t[i])
            torch.testing.assert_close(q["backbone_G"]["tangent"][i, a], ref_b, rtol=1e-6, atol=0)
    for name in METRICS:
        assert q[name]["random"].shape == (3, 2) and q[name]["content"].shape == (3, 2)
    assert (q["head_G"]["random"] >= 0).all() and (q["backbone_G"]["content"] >= 0).all()


@pytest.fixture(scope="module")
def tiny_results():
    return [(c, run_cell(TINY, c)) for c in cells(TINY, None)]


def test_run_cell_keys_and_robust_facts(tiny_results):
    for cell, m in tiny_results:
        json.dumps(m)
        for stage in STAGES:
            for name in METRICS:
                for ctrl in CONTROLS:
                    assert m[f"{stage}.{name}.ratio_{ctrl}"] > 0 and 0 <= m[f"{stage}.{name}.p_below_{ctrl}"] <= 1
                assert len(m["quotients"][f"{stage}.{name}"]["tangent"]) == TINY.n_eval * SPEC.dim_aug
            assert m[f"{stage}.gap_end_to_end"] >= 0 and m[f"{stage}.gap_backbone"] >= 0
    by = {c["regime"]: m for c, m in tiny_results}
    # both regimes start from the same initialisation and points: identical "before" measurements
    for key, value in by["joint"].items():
        if key.startswith("before."):
            assert by["head_only"][key] == value, key
    # a frozen backbone keeps its metric
    assert by["head_only"]["after.backbone_G.ratio_random"] == by["head_only"]["before.backbone_G.ratio_random"]


def test_summarize_claims_tables_and_figures(tiny_results):
    s = summarize(TINY, tiny_results)
    assert len(rows_json(s)) == 3 * len(TINY.regimes)
    for claim in rows_json(s):
        Row.from_json(claim)
        assert claim["id"] == "C6" and claim["verdict"] in VERDICTS
        assert claim["headline"] in claim["measured"]
        assert {"objective", "head", "reading", "preset", "regime", "metric"} <= set(claim["setting"])
        for value in claim["measured"].values():
            assert {"value", "n", "spread"} <= set(value)
    json.dumps(rows_json(s))
    (title, table), = tables_md(s)
    assert table.startswith("| regime | stage | metric |")
    import matplotlib.pyplot as plt

    for _, build in s.figures:
        fig = build()
        assert assert_legends_outside(fig) == 1
        plt.close(fig)


def _fake(gap, ratio_head, ratio_back=1.0, gap_back=1.0):
    m = {"loss_first": 1.0, "loss_last": 0.5, "quotients": {}}
    for stage in STAGES:
        m[f"{stage}.gap_end_to_end"] = gap if stage == "after" else 1.0
        m[f"{stage}.gap_backbone"] = gap_back if stage == "after" else 1.0
        m[f"{stage}.z_tangent_norm_median"] = 1.0
        for name in METRICS:
            r = 1.0 if stage == "before" else (ratio_back if name == "backbone_G" else ratio_head)
            for ctrl in CONTROLS:
                m[f"{stage}.{name}.ratio_{ctrl}"] = r
                m[f"{stage}.{name}.p_below_{ctrl}"] = 0.5
            m[f"{stage}.{name}.median_tangent"] = r
            m["quotients"][f"{stage}.{name}"] = {"tangent": [r], "random": [1.0], "content": [1.0]}
    return m


def _verdicts(per_seed):
    cfg = dataclasses.replace(TINY, regimes=("head_only",), seeds=len(per_seed))
    res = [({"regime": "head_only", "seed": i}, _fake(*args)) for i, args in enumerate(per_seed)]
    g, gl, low = rows_json(summarize(cfg, res))
    assert g["setting"]["metric"] == "head_G" and gl["setting"]["metric"] == "head_GL"
    return g["verdict"], low["verdict"]


def _headlines(per_seed):
    cfg = dataclasses.replace(TINY, regimes=("head_only",), seeds=len(per_seed))
    res = [({"regime": "head_only", "seed": i}, _fake(*args)) for i, args in enumerate(per_seed)]
    g, _, low = rows_json(summarize(cfg, res))
    return g["headline"], g["measured"][g["headline"]]["value"], low["headline"]


def test_verdict_follows_the_stated_criterion():
    assert _verdicts([(0.01, 0.01)] * 5) == ("supported", "supported")
    assert _verdicts([(0.01, 0.01)] * 4 + [(0.5, 0.01)]) == ("supported", "supported")  # 4/5 = 80 %
    assert _verdicts([(0.01, 0.01)] * 3 + [(0.5, 0.01)] * 2)[0] == "inconclusive"  # premise in 3/5 only
    assert _verdicts([(0.01, 0.5)] * 5) == ("not supported", "not supported")  # invariant yet at most 2x suppressed
    assert _verdicts([(0.01, 0.2)] * 5) == ("inconclusive", "inconclusive")  # partial suppression
    assert _verdicts([(0.5, 0.5)] * 5)[0] == "inconclusive"  # premise unmet: Prop 5.2 says nothing
    assert _verdicts([(0.01, 0.01, 0.01)] * 5) == ("supported", "not supported")  # backbone degenerate too
    # the backbone itself became invariant: V_aug is ~0 in z-space, Prop 5.2 says nothing about the head
    assert _verdicts([(0.01, 0.5, 0.01, 0.01)] * 5) == ("inconclusive", "not supported")


def test_headline_is_the_fraction_of_seeds_that_decided():
    # Prop 5.2 row: premise and degenerate in 4 of 5 seeds; low-pass row: head degenerate, backbone not
    assert _headlines([(0.01, 0.01)] * 4 + [(0.5, 0.01)]) == (
        "seeds_premise_and_degenerate", pytest.approx(0.8), "seeds_head_degenerate_backbone_not")
    assert _headlines([(0.01, 0.01)] * 3 + [(0.5, 0.01)] * 2)[:2] == ("seeds_premise_met", pytest.approx(0.6))
    assert _headlines([(0.01, 0.5)] * 5) == ("seeds_premise_and_not_degenerate", 1.0, "seeds_head_not_degenerate")
    assert _headlines([(0.01, 0.01, 0.01)] * 5)[2] == "seeds_backbone_degenerate"

"""C7 experiment: the rank bookkeeping on constructed Jacobians, the Jacobians against autograd,
run_cell structure, and the verdict rule on fabricated metrics (never the paper's numbers)."""
import dataclasses
import json

import pytest
import torch
from torch.autograd.functional import jacobian

from figure_checks import assert_legends_outside
from headgeom.experiments.c7_fisher import (
    STAGES,
    C7Config,
    cells,
    jacobians,
    manifold_coordinates,
    rank_metrics,
    run_cell,
    summarize,
)
from headgeom.experiments.registry import load_all
from headgeom.theory.invariance import InvarianceSpec, PatternManifold, build_models
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

D64 = torch.float64
SPEC = InvarianceSpec(size=8, n_content=3, hidden=8, d=6, head_hidden=8, k=5, n_train=64, steps=30, batch=32)
TINY = C7Config(preset="quick", system=SPEC, seeds=1, n_eval=3, tol_sweep=(1e-2, 1e-8))


def test_registered_with_documented_presets():
    exp = load_all()["C7"]
    assert exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        assert exp.config(name).preset == name and 0 < exp.config(name).rel_tol < 1
        assert "headgeom reproduce --only C6,C7" in preset.__doc__ and "CPU" in preset.__doc__
    with pytest.raises(ValueError, match="tolerances"):
        cells(dataclasses.replace(TINY, rel_tol=1.0), None)


def _constructed(n=4, pixels=20, p=3, g_dim=2, d=7, k=6, invariant=True, seed=0):
    """Jacobians with known ranks: J_x, J_z full rank m = p + G; J_u = A J_z with A killing J_z e_ξ."""
    gen = torch.Generator().manual_seed(seed)
    m = p + g_dim
    jx = torch.randn(n, pixels, m, generator=gen, dtype=D64)
    jz = torch.randn(n, d, m, generator=gen, dtype=D64)
    jh = torch.randn(n, k, d, generator=gen, dtype=D64)
    if invariant:
        tang = jz[..., p:]  # (n, d, G): the tangents in z-space
        q, _ = torch.linalg.qr(tang)
        jh = jh - jh @ q @ q.transpose(-1, -2)  # the head kills the tangent directions exactly
    jf = torch.randn(n, d, pixels, generator=gen, dtype=D64)  # w.r.t. the input: full rank d
    return {"x": jx, "z": jz, "u": jh @ jz, "h": jh, "f": jf}, g_dim


def test_rank_metrics_on_constructed_jacobians():
    jac, g_dim = _constructed(invariant=True)
    out = rank_metrics(jac, g_dim, 1e-6, (1e-3, 1e-9), 1.0)
    m = jac["z"].shape[-1]
    assert out["rank_Ix"] == m and out["rank_Iz"] == m and out["manifold_ok_frac"] == 1.0
    assert out["rank_Ih"] == m - g_dim and out["holds_frac"] == 1.0 and out["holds_frac@1e-09"] == 1.0
    assert out["rank_Iu_given_z"] == jac["h"].shape[-1] - g_dim
    assert out["null_frac_Ih"] == pytest.approx(1.0, abs=1e-10) and out["null_frac_Iz"] == pytest.approx(0.0, abs=1e-10)
    assert out["null_frac_Iu_given_z"] == pytest.approx(1.0, abs=1e-10) and out["aug_info_rel_Ih"] < 1e-20
    d, k = jac["h"].shape[-1], jac["h"].shape[-2]
    assert out["rank_Iz_input"] == d and out["rank_Ih_input"] == min(k, d - g_dim) and out["holds_frac_input"] == 1.0
    generic, _ = _constructed(invariant=False)
    out = rank_metrics(generic, g_dim, 1e-6, (1e-3,), 1.0)
    assert out["rank_Ih"] == m and out["holds_frac"] == 0.0 and out["null_frac_Ih"] == pytest.approx(0.0, abs=1e-10)
    assert out["rank_Ih_input"] == 6 and out["holds_frac_input"] == 0.0  # rank J_h J_f = k = 6 > d - G = 5


def test_manifold_coordinates_are_orthonormal_and_keep_v_aug():
    jac, g_dim = _constructed()
    ortho, w = manifold_coordinates(jac, g_dim)
    _, r = torch.linalg.qr(jac["x"])
    q = jac["x"] @ torch.linalg.inv(r)
    eye = torch.eye(q.shape[-1], dtype=D64)
    torch.testing.assert_close(q.transpose(-1, -2) @ q, eye.expand_as(r), rtol=0, atol=1e-12)
    torch.testing.assert_close(ortho["z"] @ r, jac["z"], rtol=1e-12, atol=1e-12)  # J_z' R = J_z
    # w spans R e_ξ: J_u' w = J_u e_ξ (up to the normalisation), zero for the invariant head
    assert (ortho["u"] @ w.transpose(-1, -2)).abs().max() < 1e-12
    torch.testing.assert_close(w.norm(dim=-1), torch.ones(w.shape[:-1], dtype=D64), rtol=1e-14, atol=0)


def test_jacobians_match_autograd_functional():
    manifold = PatternManifold(SPEC, 0, D64)
    backbone, head = (m.double().eval() for m in build_models(SPEC, 0))
    theta = manifold.sample(2, torch.Generator().manual_seed(3))
    jac = jacobians(backbone, head, manifold, theta)
    for i in range(2):
        ref_u = jacobian(lambda th: head(backbone(manifold.render(th.unsqueeze(0)))).squeeze(0), theta[i])
        torch.testing.assert_close(jac["u"][i], ref_u, rtol=1e-10, atol=1e-12)
        ref_x = jacobian(lambda th: manifold.render(th.unsqueeze(0)).flatten(), theta[i])
        torch.testing.assert_close(jac["x"][i], ref_x, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(jac["u"][i], jac["h"][i] @ jac["z"][i], rtol=1e-10, atol=1e-12)  # chain rule
        x = manifold.render(theta[i:i + 1]).flatten()
        ref_f = jacobian(lambda v: backbone(v.reshape(1, 1, 8, 8)).squeeze(0), x)
        torch.testing.assert_close(jac["f"][i], ref_f, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def tiny_results():
    return [(c, run_cell(TINY, c)) for c in cells(TINY, None)]


def test_run_cell_structure_and_rank_bounds(tiny_results):
    m_lat = SPEC.n_content + SPEC.dim_aug
    for cell, m in tiny_results:
        json.dumps(m)
        assert m["dim_aug"] == SPEC.dim_aug and m["n_latent"] == m_lat and "N(0" in m["observation_model"]
        for stage in STAGES:
            for tol in ("", "@0.01", "@1e-08"):
                assert 0 <= m[f"{stage}.rank_Ih{tol}"] <= min(SPEC.k, SPEC.d, m_lat)
                assert 0 <= m[f"{stage}.rank_Iz{tol}"] <= min(SPEC.d, m_lat)
                assert 0 <= m[f"{stage}.holds_frac{tol}"] <= 1
            # ranks can only grow as the tolerance shrinks
            assert m[f"{stage}.rank_Ih@0.01"] <= m[f"{stage}.rank_Ih"] <= m[f"{stage}.rank_Ih@1e-08"]


def test_summarize_claims_tables_and_figure(tiny_results):
    s = summarize(TINY, tiny_results)
    assert len(rows_json(s)) == len(TINY.regimes)
    for claim in rows_json(s):
        Row.from_json(claim)
        assert claim["id"] == "C7" and claim["verdict"] in VERDICTS
        assert claim["headline"] in claim["measured"]
        assert {"objective", "head", "reading", "preset", "observation_model", "rel_tol"} <= set(claim["setting"])
    assert len(tables_md(s)) == 3
    import matplotlib.pyplot as plt

    fig = s.figures[0][1]()
    assert assert_legends_outside(fig) == 1
    plt.close(fig)


def _fake(gap, holds, manifold_ok=1.0, gap_back=1.0):
    m = {}
    for stage in STAGES:
        for k in ("rank_Ix", "rank_Iz", "rank_Ih", "rank_Iu_given_z", "null_frac_Ih", "null_frac_Iz", "aug_info_rel_Ih"):
            m[f"{stage}.{k}"] = 1.0
        m[f"{stage}.holds_frac"] = holds if stage == "after" else 0.0
        m[f"{stage}.gap_end_to_end"] = gap if stage == "after" else 1.0
        m[f"{stage}.gap_backbone"] = gap_back if stage == "after" else 1.0
        m[f"{stage}.manifold_ok_frac"] = manifold_ok
        for tol in TINY.tol_sweep:
            for k in ("rank_Iz", "rank_Ih", "holds_frac"):
                m[f"{stage}.{k}@{tol:g}"] = 1.0
    return m


def _verdict(per_seed):
    cfg = dataclasses.replace(TINY, regimes=("head_only",), seeds=len(per_seed))
    res = [({"regime": "head_only", "seed": i}, _fake(*a)) for i, a in enumerate(per_seed)]
    (claim,) = rows_json(summarize(cfg, res))
    return claim["verdict"]


def _headline(per_seed):
    cfg = dataclasses.replace(TINY, regimes=("head_only",), seeds=len(per_seed))
    res = [({"regime": "head_only", "seed": i}, _fake(*a)) for i, a in enumerate(per_seed)]
    (claim,) = rows_json(summarize(cfg, res))
    return claim["headline"], claim["measured"][claim["headline"]]["value"]


def test_verdict_follows_the_stated_criterion():
    assert _verdict([(0.01, 1.0)] * 5) == "supported"
    assert _verdict([(0.01, 1.0)] * 4 + [(0.01, 0.5)]) == "supported"  # 4/5 seeds hold
    assert _verdict([(0.01, 0.5)] * 5) == "not supported"
    assert _verdict([(0.5, 1.0)] * 5) == "inconclusive"  # premise (invariance) unmet
    assert _verdict([(0.01, 1.0, 0.5)] * 5) == "inconclusive"  # manifold Jacobian rank-deficient
    assert _verdict([(0.01, 0.5, 1.0, 0.01)] * 5) == "inconclusive"  # backbone invariant: hypothesis unmet
    assert _verdict([(0.01, 1.0)] * 3 + [(0.01, 0.5)] * 2) == "inconclusive"


def test_headline_is_the_fraction_of_seeds_that_decided():
    assert _headline([(0.01, 1.0)] * 4 + [(0.01, 0.5)]) == ("seeds_premise_and_holding", pytest.approx(0.8))
    assert _headline([(0.01, 0.5)] * 5) == ("seeds_premise_and_holding", 0.0)
    assert _headline([(0.5, 1.0)] * 5) == ("seeds_premise_met", 0.0)

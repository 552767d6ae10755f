"""C11 experiment: presets and cells, the depth heads, a tiny training + measurement cell (finite metrics,
documented keys, the random-head control), and the two claims' single-run rules on hand-made cells (supported,
not supported, inconclusive; the rules themselves: tests/claims/test_claims_single_run.py)."""
import dataclasses
import json
import math

import pytest
import torch

from figure_checks import assert_legends_outside
from headgeom.experiments.c11_depth import (TRAIN, C11Config, cells, depth_head, paper, run_cell, summarize,
                                            train_config)
from headgeom.orbits.run_measures import RATIOS
from headgeom.train.recipes import paper_head
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = C11Config(train=dataclasses.replace(TRAIN, data_options={"n": 40, "size": 16}, batch_size=8, max_steps=2),
                 hidden=16, out_dim=16, knn_k=5,
                 eval_train=None, eval_test=None, probe_max_iter=30, orbit_classes=2, orbit_per_class=2,
                 orbit_steps=4, n_boot=50, seeds=1)


@pytest.fixture(scope="module")
def tiny():
    return run_cell(TINY, {"depth": 2, "seed": 0})


def test_registered_presets_and_cells():
    import headgeom.experiments.c11_depth as mod
    from headgeom.experiments.registry import EXPERIMENTS, experiment_modules

    exp = EXPERIMENTS["C11"]  # registered on import (load_all imports every module; others may be mid-edit)
    assert exp is mod.EXPERIMENT and "c11_depth" in experiment_modules()
    assert set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = preset()
        assert cfg.preset == name and "headgeom reproduce --only C11" in preset.__doc__
        assert cfg.depths == (1, 2, 3) and cfg.seeds >= 2 and cfg.head_inputs[0] == "raw"
        assert len(cells(cfg)) == 3 * cfg.seeds
    assert cells(TINY, 2) == [{"depth": d, "seed": s} for s in (0, 1) for d in (1, 2, 3)]
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)
    for bad, match in ((dict(depths=(2, 2)), "two distinct"), (dict(depths=(0, 1)), "ints >= 1"),
                       (dict(head_inputs=("l2",)), "start with 'raw'")):
        with pytest.raises(ValueError, match=match):
            cells(dataclasses.replace(TINY, **bad))


def test_paper_preset_trains_the_papers_simclr_with_depth_heads():
    tc = train_config(paper(), 3, 2)
    assert (tc.method, tc.optimizer, tc.lr, tc.batch_size, tc.epochs, tc.method_options["temperature"], tc.seed) == (
        "simclr_oneway", "adam", 1e-3, 256, 50, 0.1, 2)
    assert tc.head == "d-2048-2048-2048-2048:relu:nobias:bn:last=bn"
    # depth 1 is exactly the paper's projector (the C12 head)
    assert depth_head(1, 2048, 2048) == paper_head("relu", 2048, 2048, bn=True)
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        depth_head(0, 8, 8)


def test_depth_heads_have_depth_hidden_layers():
    from headgeom.methods import build_method

    for depth in (1, 2, 3):
        m = build_method("simclr_oneway", backbone="resnet18", backbone_options={"width": 0.125},
                         head=depth_head(depth, 16, 8))
        kinds = [type(layer).__name__ for layer in m.projector.layers]
        assert kinds == ["Linear", "BatchNorm1d", "ReLU"] * depth + ["Linear", "BatchNorm1d"]
        assert all(layer.bias is None for layer in m.projector.layers if isinstance(layer, torch.nn.Linear))


def test_tiny_cell_gives_finite_documented_metrics(tiny):
    json.dumps(tiny)
    assert (tiny["depth"], tiny["seed"], tiny["n_head_layers"], tiny["head_output_point"]) == (2, 0, 8, "head.7")
    for key in ("knn[z]", "linear[z]", "knn[h]", "linear[h]"):
        assert 0.0 <= tiny[key] <= 1.0
    for v in TINY.head_inputs:
        for r in RATIOS:
            for key in (f"{r}[{v}]", f"fresh_{r}[{v}]"):
                e = tiny[key]
                assert math.isfinite(e["value"]) and e["value"] > 0 and all(math.isfinite(c) for c in e["ci"])
        assert math.isfinite(tiny[f"random_dir_trace_ratio[{v}]"]["value"])
        assert -1.0 <= tiny[f"mean_pairwise_cosine_h[{v}]"]["value"] <= 1.0
        # selectivity is the compression over the global ratio
        assert tiny[f"selectivity[{v}]"]["value"] == pytest.approx(
            tiny[f"compression[{v}]"]["value"] / tiny[f"global_ratio[{v}]"]["value"], rel=1e-9)
        # the trace ratio of L2-normalised features is the paper's spread compression (K/(K-1) cancels)
        assert tiny[f"trace_ratio[{v}]"]["value"] == pytest.approx(tiny[f"compression[{v}]"]["value"], rel=1e-9)
        # the per-dimension ratio differs from it by exactly the dimension factor D_h / D_z (pitfall 4)
        assert tiny[f"per_dim_ratio[{v}]"]["value"] == pytest.approx(
            tiny[f"trace_ratio[{v}]"]["value"] * tiny["dims"]["h"] / tiny["dims"]["z"], rel=1e-9)
        assert tiny[f"class_orbit_change[{v}]"]["value"] == pytest.approx(
            tiny[f"class_orbit_ratio[{v}]"]["value"] / tiny["class_orbit_ratio[z]"]["value"], rel=1e-9)
    assert tiny["dims"] == {"z": 64, "h": 16} and tiny["orbit_n_images"] == 4 and tiny["num_classes"] == 10
    # the random-head control: TINY.control_draws heads, the trained selectivity the cell's, rows kept for pairing
    for v in TINY.head_inputs:
        rh = tiny[f"random_heads[{v}]"]
        assert rh["trained_selectivity"] == pytest.approx(tiny[f"selectivity[{v}]"]["value"], rel=1e-9)
        assert len(rh["rows"]["trained"]) == len(rh["rows"]["stored"]) == TINY.n_boot + 4
        assert len(rh["stored"]["selectivity"]) == len(rh["init"]["selectivity"]) == TINY.control_draws
    assert tiny["orbit_labels"] == [0, 0, 1, 1] and tiny["orbit_n_boot"] == TINY.n_boot


def _control(selectivity: float, median: float, seed: int, n_rows: int = 59) -> dict:
    """A cell's random-head control: rows of the trained selectivity and the controls' median scattered by a
    shared small noise (n_boot = 50 bootstrap rows + 9 leave-one-out rows, the images of ``_fake``)."""
    g = torch.Generator().manual_seed(seed)
    noise = 0.02 * torch.randn(n_rows, generator=g, dtype=torch.float64)
    draws = [median * f for f in (0.9, 0.95, 1.0, 1.05, 1.1)]
    one = {"draws": 5, "bn": "b", "selectivity": draws, "compression": [1.0] * 5, "median_selectivity": median,
           "vs_selectivity": {"value": selectivity / median, "ci": [0.9 * selectivity / median,
                                                                    1.1 * selectivity / median], "level": 0.95}}
    return {"head_input": "raw", "trained_selectivity": selectivity, "stored": one, "init": one,
            "rows": {"trained": (selectivity * noise.exp()).tolist(), "stored": (median * (noise / 2).exp()).tolist(),
                     "init": (median * (noise / 2).exp()).tolist()}}


def _fake(depth, seed, compression, knn, linear, selectivity=None, control=1.0, n_test=10_000):
    """A cell's metrics: every ratio = ``compression`` except selectivity (= ``selectivity`` when given, else
    ``compression``); random heads of median selectivity ``control``; probes on ``n_test`` test images."""
    est = lambda v: {"value": v, "ci": [0.9 * v, 1.1 * v]}  # noqa: E731
    m = {"depth": depth, "seed": seed, "final_loss": 1.0, "num_classes": 10, "knn[z]": knn, "n_test": n_test,
         "linear[z]": linear, "orbit_labels": [0, 1, 0, 1, 0, 1, 0, 1, 0], "orbit_n_boot": 50,
         "knn[h]": knn - 0.1, "linear[h]": linear - 0.1, "class_orbit_ratio[z]": est(2.0)}
    for v in ("raw", "l2"):
        for r in RATIOS:
            m[f"{r}[{v}]"] = m[f"fresh_{r}[{v}]"] = est(compression)
        sel = compression if selectivity is None else selectivity
        m[f"selectivity[{v}]"] = est(sel)
        m[f"random_heads[{v}]"] = _control(sel, control, seed)
        m[f"random_dir_trace_ratio[{v}]"] = est(compression)
        m[f"class_orbit_ratio[{v}]"] = est(2.5)
        m[f"mean_pairwise_cosine_h[{v}]"] = est(0.99 if v == "l2" else 0.05)
    return m


def test_summarize_verdicts_follow_the_rule():
    cfg = dataclasses.replace(TINY, seeds=3)
    # selectivity rises 10 -> 20 -> 40 in every seed (random heads flat); kNN falls clearly; linear: seed 1 falls
    knn = {1: 0.6, 2: 0.5, 3: 0.4}
    linear = {(1, 0): 0.5, (2, 0): 0.52, (3, 0): 0.6, (1, 1): 0.5, (2, 1): 0.49, (3, 1): 0.45, (1, 2): 0.5,
              (2, 2): 0.55, (3, 2): 0.62}
    results = [({"depth": d, "seed": s}, _fake(d, s, 10.0 * 2 ** (d - 1) * (1 + 0.05 * s), knn[d] + 0.01 * s,
                                               linear[d, s]))
               for s in range(3) for d in (1, 2, 3)]
    summary = summarize(cfg, results)
    for c in rows_json(summary):
        Row.from_json(c)
        assert c["id"] == "C11" and c["verdict"] in VERDICTS and c["headline_text"] and c["robustness"]
    by = {(c["setting"].get("head_input") or c["setting"]["probe"]): c["verdict"] for c in rows_json(summary)}
    # linear: two seeds support (+0.10, +0.12), one refutes (-0.05): 67% < 80%
    assert by == {"raw": "supported", "l2": "supported", "knn": "not supported", "linear": "inconclusive"}
    raw = rows_json(summary)[0]
    assert raw["headline"] == "learned_selectivity depth 3 / depth 1" and raw["statement"].endswith("compress "
                                                                                                   "augmentation orbits more")
    assert raw["measured"]["learned_selectivity depth 3 / depth 1"]["value"] == pytest.approx(4.0)
    assert raw["measured"]["selectivity[depth 2]"]["n"] == 3 and raw["measured"]["compression[depth 2]"]["n"] == 3
    assert raw["measured"]["compression[depth 2]"]["per_seed_ci"][0] == pytest.approx([18.0, 22.0])  # cells' CIs
    assert "decided by selectivity" in raw["criterion"] and set(raw["conventions"]) == {
        "level", "compression_margin", "control_percentile", "control_bn", "monotone", "majority"}
    assert raw["robustness"]["compression_margin"]["status"] == "robust"
    json.dumps(rows_json(summary))
    assert [t for t, _ in tables_md(summary)] and tables_md(summary)[0][1].count("\n") == 1 + 3
    assert tables_md(summary)[1][1].count("\n") == 1 + 3 and tables_md(summary)[3][1].count("\n") == 1 + 9
    assert tables_md(summary)[2][1].count("\n") == 1 + 3 * 2 * 2  # depth x head input x control BN
    import matplotlib

    matplotlib.use("Agg")
    fig = summary.figures[0][1]()
    assert len(fig.axes) == 3 and assert_legends_outside(fig) == 3
    # a clear accuracy increase, but every depth within learned_floor of chance (0.1): nothing to protect
    near_chance = [({"depth": d, "seed": s}, _fake(d, s, 10.0, 0.1 + 0.01 * d, 0.1 + 0.01 * d + 0.001 * s,
                                                   n_test=10**6))
                   for s in range(3) for d in (1, 2, 3)]
    verdicts = {c["setting"].get("probe"): c["verdict"] for c in rows_json(summarize(cfg, near_chance))}
    assert verdicts["knn"] == verdicts["linear"] == "inconclusive"
    lifted = [(c, {**m, "knn[z]": m["knn[z]"] + 0.2}) for c, m in near_chance]
    assert {c["setting"].get("probe"): c["verdict"] for c in rows_json(summarize(cfg, lifted))}["knn"] == "supported"
    # the same increase on 100 test examples is within noise
    few_tests = [(c, {**m, "n_test": 100}) for c, m in lifted]
    assert {c["setting"].get("probe"): c["verdict"] for c in rows_json(summarize(cfg, few_tests))}["knn"] == \
        "inconclusive"
    # a failed cell (depth 3 of seeds 1 and 2 missing): seed 0 alone decides (one run)
    few = [r for r in results if r[0]["seed"] == 0 or r[0]["depth"] != 3]
    by = {(c["setting"].get("head_input") or c["setting"]["probe"]): c["verdict"] for c in rows_json(summarize(cfg, few))}
    assert by["raw"] == "supported" and by["knn"] == "not supported"


def test_the_compression_verdict_follows_learned_selectivity():
    cfg = dataclasses.replace(TINY, seeds=3)

    def verdicts(comp, sel, control=lambda d, s: 1.0):
        results = [({"depth": d, "seed": s}, _fake(d, s, comp(d, s), 0.5, 0.5, selectivity=sel(d, s),
                                                   control=control(d, s)))
                   for s in range(3) for d in (1, 2, 3)]
        claims = rows_json(summarize(cfg, results))
        for c in claims:
            Row.from_json(c)
        return {c["setting"]["head_input"]: c for c in claims if "head_input" in c["setting"]}

    rises = lambda d, s: 10.0 * 2 ** (d - 1) * (1 + 0.05 * s)  # noqa: E731
    falls = lambda d, s: 2.0 / d * (1 + 0.05 * s)  # noqa: E731
    # the paper's compression rises 4x with depth, selectivity falls: global shrinkage grew, not selectivity
    got = verdicts(rises, falls)
    assert {v: c["verdict"] for v, c in got.items()} == {"raw": "not supported", "l2": "not supported"}
    assert got["raw"]["measured"]["compression[depth 3]"]["value"] > got["raw"]["measured"]["compression[depth 1]"][
        "value"]
    # and the converse: compression falls (centring read as expansion), selectivity rises
    got = verdicts(falls, rises)
    assert {v: c["verdict"] for v, c in got.items()} == {"raw": "supported", "l2": "supported"}
    # selectivity rises 4x, but so do random heads of the same depths: the architecture, not training
    got = verdicts(falls, rises, control=lambda d, s: 2.0 ** (d - 1))
    assert {v: c["verdict"] for v, c in got.items()} == {"raw": "not supported", "l2": "not supported"}
    assert got["raw"]["measured"]["selectivity depth 3 / depth 1"]["value"] == pytest.approx(4.0)
    # the l2 row (a head trained on raw z fed z/|z|) is flagged with the measured cosine; the raw row is not
    assert "out_of_distribution" not in got["raw"]
    cos = got["l2"]["out_of_distribution"]["mean_pairwise_cosine_h"]
    assert cos["value"] == pytest.approx(0.99) and cos["n"] == 9

"""Activation ablation: presets, cells, documented keys and robust facts on tiny runs (M = 0 for a
linear head, M != 0 for tanh, kNN accuracies in [0, 1] at z and every head layer), the verdict rule."""
import dataclasses
import json

import pytest

from headgeom.data.shapes import SHAPE_CLASSES
from headgeom.experiments.activation_ablation import (
    ACTIVATIONS, TRAIN, AblationConfig, cells, run_cell, summarize, train_config)
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = AblationConfig(train=dataclasses.replace(TRAIN, data_options={"n": 24, "size": 16}, batch_size=8, max_steps=2,
                                                track_every=2, probe_size=8),
                      hidden=16, out_dim=16, pred_hidden=16, block_samples=3, knn_k=5, eval_train=None, eval_test=None)


@pytest.fixture(scope="module")
def tiny():
    return {a: run_cell(TINY, {"activation": a, "seed": 0}) for a in ("linear", "tanh")}


def test_presets_and_cells():
    import headgeom.experiments.activation_ablation as mod

    exp = mod.EXPERIMENT
    assert exp.id == "ABLATION" and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = preset()
        assert cfg.preset == name and cfg.activations == ACTIVATIONS
        assert "headgeom reproduce --only ABLATION" in preset.__doc__ and "Runtime" in preset.__doc__
        # equal budget: only the activation differs between the runs' training configs
        diffs = train_config(cfg, "relu", 0).differences(train_config(cfg, "tanh", 0))
        assert set(diffs) == {"head", "predictor"}
    assert cells(TINY, 2) == [{"activation": a, "seed": s} for a in ACTIVATIONS for s in range(2)]
    with pytest.raises(ValueError, match="unknown entries"):
        cells(dataclasses.replace(TINY, activations=("elu",)))


def test_tiny_runs_keys_and_robust_facts(tiny):
    from headgeom.methods import build_method

    for act, m in tiny.items():
        json.dumps(m)
        assert m["steps"] == [0, 2] and m["activation"] == act
        for key in ("knn", "knn_z", "knn_head", "spread_initial", "spread_final", "dead_head", "final_loss",
                    "frac_points_negative[ambient]", "frac_points_negative[tangential]", "lambda_min[ambient]"):
            assert key in m, key
        tc = train_config(TINY, act, 0)
        method = build_method("simsiam", backbone="resnet18", backbone_options=tc.backbone_options, head=tc.head,
                              predictor=tc.predictor)
        assert len(m["knn"]) == len(method.projector.layers) + 1  # z and every projector layer
        assert list(m["knn"])[0] == "z" and m["knn_z"] == m["knn"]["z"]
        assert all(0.0 <= v <= 1.0 for v in m["knn"].values())
        assert m["eval_n_train"] == 24 and m["eval_n_test"] == 24 and m["num_classes"] == len(SHAPE_CLASSES)
    for r in TINY.readings:
        assert all(v is not None and v <= 1e-12 for v in tiny["linear"][f"M_ratio[{r}]"])
        assert all(v is not None and v > 1e-6 for v in tiny["tanh"][f"M_ratio[{r}]"])
        # the Frobenius ratio the ReLU/linear identity checks is recorded (exact blocks: the same series)
        assert tiny["linear"][f"M_ratio_fro[{r}]"] == tiny["linear"][f"M_ratio[{r}]"]
        assert tiny["linear"][f"M_ratio_norm[{r}]"] == "fro (blocks)"
    # so the identity is checked on data, not passed without it
    rows = rows_json(summarize(TINY, [({"activation": a, "seed": 0}, m) for a, m in tiny.items()]))
    (ident,) = [c for c in rows if c["evidence"] == "identity"]
    assert ident["verdict"] == "supported" and ident["measured"]["max_M_ratio_fro[linear]"]["value"] <= 1e-12
    # (a linear head's H_eff = G is PSD under the MSE loss, and under the tangential reading of the cosine
    # where cos > 0: tests/geometry/test_readings_loss.py, against formulas; a trained SimSiam predictor need not point
    # at its target, so the run itself cannot assert it)


def _fake(frac):
    m = {"steps": [0, 1], "spread_projector": [0.1, 0.1], "spread_initial": 0.1, "spread_final": 0.1,
         "escaped": False, "dead_head": False, "final_loss": -0.5, "knn": {"z": 0.5, "head.0": 0.4},
         "knn_z": 0.5, "knn_head": 0.4}
    for r in ("ambient", "tangential"):
        m.update({f"frac_points_negative[{r}]": frac, f"lambda_min_min[{r}]": -1.0, f"lambda_min[{r}]": [-1.0, 0.5],
                  f"M_ratio[{r}]": [0.1, 0.1], f"M_ratio_fro[{r}]": [0.0, 0.0]})
    return m


def _verdict(fracs, readings=("ambient",)):
    cfg = dataclasses.replace(TINY, readings=readings, seeds=2)
    results = [({"activation": a, "seed": s}, _fake(f)) for a, f in fracs.items() for s in range(2)]
    summary = summarize(cfg, results)
    # the row of the last reading (under the tangential reading a test, with the ReLU/linear half an identity row;
    # under the ambient reading a diagnostic)
    claim = [c for c in rows_json(summary) if c["evidence"] in ("test", "diagnostic")][-1]
    assert claim["evidence"] == ("test" if readings[-1] == "tangential" else "diagnostic")
    for c in rows_json(summary):
        Row.from_json(c)
    assert claim["id"] == "C8" and claim["verdict"] in VERDICTS
    assert tables_md(summary)[0][1].count("\n") == 1 + len(fracs)
    return claim["verdict"]


def test_verdict_follows_the_stated_criterion():
    smooth = {"gelu": 0.9, "silu": 0.7, "softplus": 0.5, "tanh": 1.0}
    assert _verdict({**smooth, "relu": 0.0, "linear": 0.2}) == "supported"
    assert _verdict({**smooth, "relu": 0.6, "linear": 0.0}) == "not supported"  # ReLU negative at >= half the points
    assert _verdict({**smooth, "tanh": 0.0, "relu": 0.0, "linear": 0.0}) == "not supported"
    assert _verdict({"gelu": 0.9, "relu": 0.0}) == "supported"
    # with both readings tracked each has its row; under the tangential one the ReLU/linear half is an identity,
    # so a ReLU head negative at most points fails the ambient contrast but not the tangential smooth test
    assert _verdict({**smooth, "relu": 0.0, "linear": 0.2}, readings=("ambient", "tangential")) == "supported"
    assert _verdict({**smooth, "relu": 0.6, "linear": 0.0}, readings=("ambient", "tangential")) == "supported"
    assert _verdict({**smooth, "tanh": 0.0}, readings=("ambient", "tangential")) == "not supported"


def test_the_summary_hands_its_runs_and_settings_to_the_figures():
    # the drawing itself is tested in tests/report/plots/test_plots_activation_ablation.py
    cfg = dataclasses.replace(TINY, readings=("ambient", "tangential"), seeds=1, activations=("relu", "tanh"))
    figures = dict(summarize(cfg, [({"activation": a, "seed": 0}, _fake(0.5)) for a in ("tanh", "relu")]).figures)
    assert list(figures) == ["lambda_min", "spread", "knn"]
    assert [ax.get_ylabel() for ax in figures["lambda_min"]().axes] == [
        "λ_min(H_eff), ambient reading", "λ_min(H_eff), tangential reading"]
    knn = figures["knn"]().axes[0]
    assert [c.get_label() for c in knn.containers] == ["relu", "tanh"]  # the config's order
    assert f"k={TINY.knn_k}" in knn.get_ylabel()

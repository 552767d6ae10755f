"""C4 experiment: registration, cells, metric keys, robust facts on tiny configs, the rows' kinds and rules.

No test asserts the paper's numbers or a verdict on real smooth-head measurements; the verdict rules are tested on
fabricated metrics whose answer follows from the stated criterion. The measured init runs here on random "images"
(the CIFAR-10 loader replaced), so the suite needs no data; tests/experiments/test_c4_collapse_real.py reads real
CIFAR-10 where it is available.
"""
import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from claim_rows import rows_json, tables_md
from figure_checks import assert_legends_outside
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS
from headgeom.data import ImageDataset
from headgeom.experiments.c4_collapse import (
    CIFAR_KEYS,
    EQUILIBRIUM_STATES,
    MEASURED,
    METRIC_KEYS,
    READINGS,
    STATES,
    SWEEP_KEYS,
    SYNTHETIC,
    C4Config,
    cells,
    run_cell,
    summarize,
)
from headgeom.experiments.c4_collapse import measure
from headgeom.experiments.registry import load_all

TINY = C4Config(preset="quick", d=3, hidden=6, k=5, n_samples=2, activations=("linear", "relu", "silu"), seeds=2,
                sweep_points=5, threshold_rel_tol=0.1, view_noises=(0.03, 0.3, 3.0), backbone_width=0.0625,
                cifar_hidden=48, cifar_k=48, cifar_per_class=2, cifar_samples=3)


def _images(per_class, data_dir=None):
    """20 random 32-px "test images" in place of CIFAR-10 (the loader's contract: uint8, class-interleaved)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (10 * per_class, 3, 32, 32), generator=g, dtype=torch.uint8)
    return ImageDataset(x, torch.arange(10).repeat(per_class), [str(c) for c in range(10)], "cifar10", "test"), "fake"


def _fake_data(mp):
    mp.setattr(measure, "cifar10_test_images", _images)
    mp.setattr(measure, "locate_cifar10", lambda data_dir=None: ("jpeg", Path("fake.tar.gz")))
    measure._features.cache_clear()


@pytest.fixture(autouse=True)
def fake_cifar(monkeypatch):
    _fake_data(monkeypatch)
    yield
    measure._features.cache_clear()


@pytest.fixture(scope="module")
def tiny_results():
    with pytest.MonkeyPatch.context() as mp:
        _fake_data(mp)
        out = [(c, run_cell(TINY, c)) for c in cells(TINY, None)]
        measure._features.cache_clear()
    return out


def test_registered_as_theory_experiment_with_documented_presets():
    exp = load_all()["C4"]
    assert exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = exp.config(name)
        assert isinstance(cfg, C4Config) and cfg.preset == name and cfg.k > cfg.d and cfg.seeds >= 5
        assert "headgeom reproduce --only C4" in preset.__doc__ and "CPU" in preset.__doc__
        assert 1.0 in cfg.gap_multipliers and cfg.backbone_mode == "train" and cfg.recipe == "paper_simsiam"
    paper = exp.config("paper")
    assert (paper.d, paper.hidden, paper.k, paper.bias) == (512, 2048, 2048, False)
    assert (paper.backbone_width, paper.cifar_hidden, paper.cifar_k) == (1.0, 2048, 2048)


def test_cells_enumerate_every_setting_and_validate(monkeypatch):
    cs = cells(TINY, None)
    assert len(cs) == len(TINY.activations) * len(STATES) * len(READINGS) * TINY.seeds
    assert len({json.dumps(c, sort_keys=True) for c in cs}) == len(cs)
    # the measured state's cells say where the data is, so a rerun after it appears gets new cells
    assert {c.get("data") for c in cs if c["state"] == MEASURED} == {"jpeg fake.tar.gz"}
    assert all("data" not in c for c in cs if c["state"] != MEASURED)
    monkeypatch.setattr(measure, "locate_cifar10", lambda data_dir=None: None)
    assert {c["data"] for c in cells(TINY, None) if c["state"] == MEASURED} == {"absent"}
    assert {c["seed"] for c in cells(TINY, 4)} == {0, 1, 2, 3}
    for bad, match in (({"states": ("collapsed",)}, "unknown entries"), ({"k": 3}, "expander head"),
                       ({"sweep_states": (SYNTHETIC,)}, "unknown entries"), ({"angle_range": (1e-3, 3.5)}, "below pi"),
                       ({"gap_multipliers": (0.5, 2.0)}, "include 1"), ({"view_noises": ()}, "view_noises"),
                       ({"backbone_mode": "frozen"}, "backbone_mode"), ({"cifar_samples": 99}, "cifar_samples")):
        with pytest.raises(ValueError, match=match):
            cells(dataclasses.replace(TINY, **bad), None)
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)


def test_run_cell_returns_the_documented_keys(tiny_results):
    for cell, m in tiny_results:
        json.dumps(m)
        if cell["state"] in EQUILIBRIUM_STATES:
            assert set(m) == set(METRIC_KEYS), set(m) ^ set(METRIC_KEYS)
        elif cell["state"] == SYNTHETIC:
            assert set(m) == set(SWEEP_KEYS) and len(m["points"]) == len(TINY.view_noises)
            assert all(set(p) == {*METRIC_KEYS, "view_noise", "gap"} for p in m["points"])
        else:
            assert set(m) == set(CIFAR_KEYS) and m["status"] == "measured" and set(m["point"]) == set(METRIC_KEYS)
            assert [e["multiplier"] for e in m["gap_sweep"]] == list(TINY.gap_multipliers)
        point = m.get("point") or (m["points"][0] if "points" in m else m)
        assert point["objective"] == ("mse" if cell["reading"] == "mse" else "negative_cosine")


def test_an_absent_data_set_gives_a_cell_that_says_how_to_get_it():
    m = run_cell(TINY, {"activation": "silu", "state": MEASURED, "reading": "mse", "seed": 0, "data": "absent"})
    assert m["status"] == "absent" and "HEADGEOM_CIFAR10_JPEG" in m["message"] and "docs/setup.md" in m["message"]


def test_tiny_run_robust_facts(tiny_results):
    for cell, m in tiny_results:
        if cell["state"] == MEASURED:
            point = m["point"]
            assert not point["equilibrium"] and m["n_images"] == 10 * TINY.cifar_per_class
            assert len(m["view_gap_deg"]) == m["n_images"] and all(0 <= a <= 180 for a in m["view_gap_deg"])
            assert m["sweep_vs_point"] <= 1e-8  # the two-term sweep at x1 is the state itself
            continue
        points = m["points"] if cell["state"] == SYNTHETIC else [m]
        for point in points:
            if cell["state"] in EQUILIBRIUM_STATES:
                assert point["equilibrium"] and point["grad_z_rel"] <= 1e-10 and point["rho_norm"] > 0
            else:
                assert not point["equilibrium"]
            if cell["activation"] in ("linear", "relu"):
                assert point["M_fro"] <= 1e-14 * max(abs(point["lambda_max_H"]), 1e-300)
            else:
                assert point["M_fro"] > 0
            if cell["activation"] == "linear" and cell["reading"] == "mse":
                assert point["n_negative_H"] == 0 and point["lambda_min_H"] >= -point["floor"]
            if point["threshold_ratio"] is not None and point["n_negative_G"] == 0:
                assert (point["threshold_ratio"] > 1) == (point["n_negative_H"] > 0) or abs(point["threshold_ratio"] - 1) < 1e-6
        if cell["state"] in TINY.sweep_states:
            assert len(m["sweep_grid"]) == len(m["sweep_lambda_min"]) == TINY.sweep_points
            negative = [lam < -fl for lam, fl in zip(m["sweep_lambda_min"], m["sweep_floor"])]
            if m["threshold_sweep"] is None:
                assert not any(negative)
            else:
                i = negative.index(True)
                assert (m["sweep_grid"][i - 1] if i else 0.0) < m["threshold_sweep"] <= m["sweep_grid"][i]
            if m["threshold_status"] == "closed form":
                assert m["crossing_ok"] is True  # PSD below the threshold, indefinite above: Thm 4.1's sign change
                if m["threshold_sweep_status"] == "bracketed":
                    assert m["threshold"] <= m["threshold_sweep"] * (1 + 1e-9)
            if cell["activation"] == "linear" and cell["reading"] == "mse":
                assert m["threshold"] is None and m["threshold_status"] == "no crossing"
        if cell["state"] == EQUILIBRIUM_STATES[0]:  # dense cross-check: a block-diagonal H_eff
            assert m["dense"] and m["dense_offblock_max"] <= 1e-13 * abs(m["lambda_max_H"]) + 1e-300
            assert m["dense_block_gap"] <= 1e-10


def test_summarize_rows_kinds_tables_and_figures(tiny_results):
    s = summarize(TINY, tiny_results)
    rows = rows_json(s)
    json.dumps(rows)
    for claim in rows:
        Row.from_json(claim)
        assert claim["id"] == "C4" and claim["verdict"] in VERDICTS and claim["criterion"] and claim["headline_text"]
        assert {"objective", "head", "reading", "preset", "state"} <= set(claim["setting"])
    kinds = {(c["setting"]["state"], c["setting"]["reading"].split(" (")[0]): c["evidence"] for c in rows
             if not c["statement"].startswith("Thm 4.1, linear branch")}
    # identities where the theorem speaks, tests where training starts (the measured init), diagnostics where a
    # reading (ambient) or a setting (the synthetic view noise) fixes the outcome
    assert kinds == {**{(st, r): "identity" for st in EQUILIBRIUM_STATES for r in ("ambient = tangential", "mse")},
                     (MEASURED, "ambient"): "diagnostic", (MEASURED, "tangential"): "test", (MEASURED, "mse"): "test",
                     **{(SYNTHETIC, r): "diagnostic" for r in READINGS}}
    for c in rows:
        if c["evidence"] == "test":
            assert c["conventions"] == ["view_gap", "rel_floor", "majority", "state_samples"]
            assert set(c["robustness"]) == set(c["conventions"])
            assert c["view_gap"]["unit"] == "degrees" and c["view_gap"]["n"] == 10 * TINY.cifar_per_class * TINY.seeds
            assert c["robustness"]["view_gap"]["values"] == list(TINY.gap_multipliers)
        if c["evidence"] == "identity":
            assert c["verdict"] == "supported" and "construction" in c["setting"]
    lemma = [c for c in rows if c["statement"].startswith("Thm 4.1 at constructed")]
    assert all("lambda_min_G[silu]" in c["measured"] and "frac_seeds_sign_change[silu]" in c["measured"] for c in lemma)
    cosine = [c for c in lemma if c["setting"]["reading"].startswith("ambient")]
    assert all(c["measured"]["readings_gap"]["value"] <= 1e-8 for c in cosine)
    titles = [t for t, _ in tables_md(s)]
    assert len(titles) == len(STATES) + 1 and "against the gap" in titles[-1]
    assert [name for name, _ in s.figures] == ["lambda_min", "lambda_min_sweep", "gap_sweep"]
    import matplotlib.pyplot as plt

    for _, build in s.figures:
        fig = build()
        assert assert_legends_outside(fig) == 1
        plt.close(fig)


# ------------------------------------------------------------------ the rules on fabricated cells
def _entry(s: float, past: bool | None, n_blocks: int = 2) -> dict:
    """A gap-sweep entry at multiplier s: past (True), not past (False) or G indefinite (None)."""
    lam_h = -1.0 if past else 1.0
    lam_g = -1.0 if past is None else 0.5
    return {"multiplier": s, "gap": 0.1 * s, "lambda_min_H": lam_h, "lambda_max_H": 2.0, "floor": 2e-10,
            "n_negative_H": int(bool(past) or past is None), "lambda_min_G": lam_g, "floor_G": 2e-10,
            "n_negative_G": int(past is None), "ratio": None if past is None else (2.0 if past else 0.5),
            "past": bool(past), "operand_scale": 0.0,
            "per_block": {"H_lambda_min": [lam_h] + [1.0] * (n_blocks - 1), "H_lambda_max": [2.0] * n_blocks,
                          "G_lambda_min": [lam_g] + [0.5] * (n_blocks - 1), "G_lambda_max": [2.0] * n_blocks}}


def _measured_cell(flags_by_multiplier: dict[float, bool | None]) -> dict:
    m = {"status": "measured", "data_source": "fake", "backbone": "resnet18", "backbone_mode": "train",
         "recipe": "paper_simsiam", "n_images": 4, "view_gap_deg": [5.0, 6.0, 7.0, 8.0],
         "view_gap_z_deg": [4.0] * 4, "view_gap_other_mode_deg": [1.0] * 4, "state_gap_deg": 6.0,
         "gap_sweep": [_entry(s, f) for s, f in flags_by_multiplier.items()], "sweep_vs_point": 0.0}
    m["point"] = {k: 0.0 for k in METRIC_KEYS}
    return m


def _measured_rows(per_seed: list[dict[float, bool | None]], reading: str = "tangential", **changes):
    cfg = dataclasses.replace(TINY, activations=("linear", "silu"), states=(MEASURED,), readings=(reading,),
                              seeds=len(per_seed), gap_multipliers=tuple(per_seed[0]), **changes)
    results = []
    for seed, flags in enumerate(per_seed):
        for act, f in (("linear", {s: None for s in flags}), ("silu", flags)):  # linear: never judged
            results.append(({"activation": act, "state": MEASURED, "reading": reading, "seed": seed}, _measured_cell(f)))
    (row,) = rows_json(summarize(cfg, results))
    return row


def test_the_measured_init_test_follows_the_stated_criterion():
    past, not_past = {0.5: True, 1.0: True, 2.0: True}, {0.5: False, 1.0: False, 2.0: False}
    assert _measured_rows([past] * 4 + [not_past])["verdict"] == "supported"  # 4/5 = 80 %
    assert _measured_rows([past] * 3 + [not_past] * 2)["verdict"] == "inconclusive"  # 3/5
    row = _measured_rows([not_past] * 5, reading="mse")
    assert row["verdict"] == "not supported"
    # the criterion names each smooth head's own gap beside the pooled one (a head can carry far less of it)
    silu_gap = row["measured"]["view_gap_deg[silu]"]["value"]
    assert f"per head: silu {silu_gap:.3g}" in row["criterion"]
    # seeds whose G is indefinite cannot attribute negative curvature to M: left out and counted
    indefinite = {0.5: None, 1.0: None, 2.0: None}
    row = _measured_rows([indefinite] * 3 + [past] * 2)
    assert row["verdict"] == "supported" and row["measured"]["frac_seeds_past_threshold[silu]"]["seeds_G_indefinite"] == 3
    assert _measured_rows([indefinite] * 5)["verdict"] == "inconclusive"
    # under the ambient reading the row is a diagnostic, whatever it reads
    row = _measured_rows([indefinite] * 5, reading="ambient")
    assert row["evidence"] == "diagnostic" and "G indefinite in 5 of 5 seeds of the linear/ReLU heads, 5 of 5" in row["criterion"]


def test_the_view_gap_robustness_flips_where_the_built_rule_does():
    # past from twice the measured gap on, not below: supported only at multipliers >= 2
    flags = {0.25: False, 0.5: False, 1.0: False, 2.0: True, 4.0: True}
    row = _measured_rows([flags] * 5)
    assert row["verdict"] == "not supported"
    assert row["robustness"]["view_gap"] == {"at": 1.0, "values": [0.25, 0.5, 1.0, 2.0, 4.0],
                                             "verdicts": ["not supported"] * 3 + ["supported"] * 2,
                                             "status": "flips at 2, 4"}
    assert row["robustness"]["majority"]["status"] == "robust"
    # the state's size: only the first block is past, so a state of one block keeps it and so do larger ones
    assert row["robustness"]["state_samples"]["status"] == "robust"
    row = _measured_rows([{0.5: True, 1.0: True, 2.0: True}] * 5)
    assert row["verdict"] == "supported" and row["robustness"]["view_gap"]["status"] == "robust"
    # the sign floor: the negative eigenvalue is -1 against max|lambda| 2, so only a floor >= 0.5 would hide it
    assert row["robustness"]["rel_floor"]["status"] == "robust"


def test_without_data_the_measured_rows_say_how_to_get_it():
    cfg = dataclasses.replace(TINY, states=(MEASURED,), readings=("mse",), seeds=1)
    absent = {"status": "absent", "data_source": "absent", "message": measure.missing_message()}
    rows = rows_json(summarize(cfg, [({"activation": a, "state": MEASURED, "reading": "mse", "seed": 0}, absent)
                                     for a in cfg.activations]))
    (row,) = rows
    assert row["evidence"] == "test" and row["verdict"] == "inconclusive"
    assert "HEADGEOM_CIFAR10_JPEG" in row["reason"] and "view_gap" not in row
    assert row["measured"]["view_gap_deg[silu]"]["n"] == 0  # no image was read: no angle counted


def test_the_synthetic_state_is_a_diagnostic_judged_at_the_measured_gap(tiny_results):
    rows = rows_json(summarize(TINY, tiny_results))
    gap = [c for c in rows if c["setting"]["state"] == MEASURED][0]["view_gap"]["value"]
    for c in (c for c in rows if c["setting"]["state"] == SYNTHETIC):
        rob = c["robustness"]["view_noise"]
        assert c["evidence"] == "diagnostic" and rob["values"] == list(TINY.view_noises)
        # judged at the noise whose gap (median over the reading's cells, degrees) is nearest the measured one
        ms = [m for cell, m in tiny_results if cell["state"] == SYNTHETIC and cell["reading"] == c["setting"]["reading"]]
        gaps = [sorted(math.degrees(m["points"][i]["gap"]) for m in ms) for i in range(len(TINY.view_noises))]
        med = [(g[(len(g) - 1) // 2] + g[len(g) // 2]) / 2 for g in gaps]
        nearest = min(range(len(med)), key=lambda i: abs(math.log(med[i] / gap)))
        assert rob["at"] == TINY.view_noises[nearest] and f"view_noise {rob['at']:g}" in c["criterion"]


def _fake(n_negative_h, n_negative_g=0, n_negative_m=1, threshold=0.5, crossing_ok=True):
    m = {k: 0.0 for k in METRIC_KEYS}
    m.update(threshold=threshold, threshold_status="closed form" if threshold else "no crossing",
             point_magnitude=0.01, sweep_grid=None, threshold_ratio=2.0 if n_negative_h else 0.5,
             crossing_ok=crossing_ok if threshold else None, crossing_margin=0.05, crossing_negative_below=False,
             crossing_negative_above=crossing_ok)
    m.update(n_negative_H=n_negative_h, n_negative_G=n_negative_g, n_negative_M=n_negative_m, equilibrium=True,
             lambda_min_H=-1.0 if n_negative_h else 1.0, lambda_max_H=2.0, lambda_min_G=-1.0 if n_negative_g else 1.0,
             M_ratio_fro=0.5, M_fro=1.0, kink_distance=1.0, grad_z_rel=0.0)
    return m


def test_the_lemma_is_an_identity_that_fails_only_on_a_contradiction():
    cfg = dataclasses.replace(TINY, activations=("silu",), states=("equilibrium",), readings=("mse",), seeds=3)

    def lemma(*cells):
        results = [({"activation": "silu", "state": "equilibrium", "reading": "mse", "seed": s}, m)
                   for s, m in enumerate(cells)]
        (row,) = [c for c in rows_json(summarize(cfg, results)) if c["statement"].startswith("Thm 4.1 at constructed")]
        assert row["evidence"] == "identity"
        return row["verdict"]

    assert lemma(_fake(0), _fake(0), _fake(0)) == "supported"
    assert lemma(_fake(0, n_negative_m=0, threshold=None), _fake(0), _fake(0)) == "supported"  # M ⪰ 0: none needed
    # M with a negative direction and no finite threshold contradicts the lemma: a bug
    assert lemma(_fake(0, threshold=None), _fake(0), _fake(0)) == "not supported"
    # no sign change across the closed-form threshold: a bug
    assert lemma(_fake(0, crossing_ok=False), _fake(0), _fake(0)) == "not supported"

"""C9 experiment: presets and cells, a tiny training + orbit cell (finite, consistent with
analyze_orbit_features), and the verdict rule on hand-made metrics (supported, not supported, inconclusive)."""
import dataclasses
import json

import pytest
import torch

from figure_checks import assert_legends_outside
from headgeom.experiments.c9_orbit_compression import (TRAIN, C9Config, cells, orbit_images, run_cell, summarize,
                                                       train_config)
from headgeom.claims.orbit_verdicts import MAIN_RULE, SELECTIVE_RULE, orbit_outcome
from headgeom.orbits.bootstrap import bootstrap_counts, bootstrap_indices
from headgeom.orbits.compression import compression_measures, interval_side
from claim_rows import rows_json
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = C9Config(train=dataclasses.replace(TRAIN, data_options={"n": 40, "size": 16}, backbone_options={"width": 0.0625},
                                          batch_size=8, max_steps=2),
                vit_options=(("embed_dim", 12), ("depth", 1), ("img_size", 16)), hidden=16, out_dim=8,
                families=("rotation", "hue"), steps=3, orbit_classes=2, orbit_per_class=3, n_boot=40, seeds=1)


def test_presets_cells_and_training_settings():
    import headgeom.experiments.c9_orbit_compression as mod
    from headgeom.experiments.registry import load_all

    exp = mod.EXPERIMENT
    assert load_all()["C9"] is exp and exp.id == "C9" and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = preset()
        assert cfg.preset == name and "headgeom reproduce --only C9" in preset.__doc__
        assert cells(cfg) == [{"backbone": b, "seed": s} for b in ("resnet18", "vit_tiny") for s in range(cfg.seeds)]
    paper = exp.config("paper")
    tc = train_config(paper, "vit_tiny", 2)
    assert (tc.method, tc.optimizer, tc.lr, tc.batch_size, tc.epochs, tc.method_options["temperature"]) == (
        "simclr_oneway", "adam", 1e-3, 256, 50, 0.1)
    assert tc.backbone == "vit_tiny" and tc.backbone_options == {} and tc.seed == 2  # the paper's 192-wide ViT
    assert train_config(paper, "resnet18", 0).backbone_options == {"width": 1.0}
    assert tc.head == "d-2048-2048:relu:nobias:bn:last=bn"
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)
    with pytest.raises(ValueError, match="backbones must be among"):
        cells(dataclasses.replace(TINY, backbones=("resnet50",)))
    with pytest.raises(ValueError, match="judge_family"):
        cells(dataclasses.replace(TINY, judge_family="blur"))


def test_orbit_images_pick_per_class_and_say_when_too_few():
    from headgeom.data import load_dataset

    test = load_dataset("shapes", "test", n=40, size=16)
    images, labels = orbit_images(test, 3, 2)
    assert images.shape == (6, 3, 16, 16) and labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert torch.equal(orbit_images(test, 3, 2)[0], images)  # the same images for every cell
    with pytest.raises(ValueError, match="fewer than orbit_per_class"):
        orbit_images(test, 2, 30)
    with pytest.raises(ValueError, match="orbit_classes"):
        orbit_images(test, 1, 2)


def test_a_cell_without_cifar_fails_with_the_loaders_message(tmp_path):
    cfg = dataclasses.replace(TINY, train=dataclasses.replace(TINY.train, data="cifar10", data_options={},
                                                              data_dir=str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="CIFAR-10 not found.*HEADGEOM_DATA"):
        run_cell(cfg, {"backbone": "resnet18", "seed": 0})


def _e(lo, hi):
    return {"value": (lo + hi) / 2, "ci": [lo, hi], "level": 0.95}


def _random_heads(vs=(1.5, 2.0), controls=(0.5, 0.6, 0.7)):
    """A random-head control whose joint ratio has interval ``vs`` and whose draws have selectivities ``controls``."""
    one = {"draws": len(controls), "bn": "b", "selectivity": list(controls), "compression": [1.0] * len(controls),
           "vs_selectivity": _e(*vs)}
    return {"stored": one, "init": one}


def test_run_outcome():
    good = {"selectivity": _e(3, 5), "class_orbit_change": _e(0.9, 1.3), "random_heads": _random_heads()}
    assert orbit_outcome(good, MAIN_RULE)[0] == "supports"  # class/orbit straddling 1 does not fall
    assert orbit_outcome({**good, "class_orbit_change": _e(0.5, 0.8)}, MAIN_RULE)[0] == "refutes"
    assert orbit_outcome({**good, "random_heads": _random_heads(vs=(0.8, 1.2))}, MAIN_RULE)[0] == "undecided"
    assert orbit_outcome({**good, "selectivity": _e(0.1, 0.5)}, MAIN_RULE)[0] == "refutes"
    # a bias-dominated bootstrap gives no interval (headgeom.orbits.bootstrap): that measure decides nothing
    none = {"value": 1.2, "ci": [float("nan")] * 2, "level": 0.95, "ci_undefined": "bias-dominated: ..."}
    assert orbit_outcome({**good, "class_orbit_change": none}, MAIN_RULE) == (
        "undecided", {"selectivity": "above", "class_orbit_change": "undefined", "vs_random_heads_selectivity": "above",
                      "selectivity above the controls' percentile": "above"})
    # the paper's compression does not enter the rule: far above 1 or far below, the outcome is selectivity's
    assert orbit_outcome({**good, "compression": _e(0.1, 0.5)}, MAIN_RULE)[0] == "supports"
    with pytest.raises(KeyError, match="older headgeom.*fresh --out"):  # cells measured before the rule changed
        orbit_outcome({"compression": _e(3, 5)}, SELECTIVE_RULE)
    with pytest.raises(KeyError, match="older headgeom.*fresh --out"):  # ... or before the random-head control
        orbit_outcome({k: v for k, v in good.items() if k != "random_heads"}, MAIN_RULE)


# ---------------------------------------------------------------- a tiny cell end to end
@pytest.fixture(scope="module")
def tiny():
    return {b: run_cell(TINY, {"backbone": b, "seed": 0}) for b in ("resnet18", "vit_tiny")}


def test_tiny_cells_are_finite_and_consistent_with_the_full_analysis(tiny):
    import math

    for b, m in tiny.items():
        json.dumps(m)
        assert m["backbone"] == b and m["head_output_point"] == "head.4" and m["n_images"] == 6
        assert m["dims"] == {"z": 32 if b == "resnet18" else 12, "h": 8}
        for fam in TINY.families:
            f = m["families"][fam]
            for v, point in (("raw", "head.4"), ("l2", "l2z/head.4")):
                rh = f[v].get("random_heads")  # the judged family only: the rule's random-head control
                assert (rh is not None) == (fam == TINY.judge_family)
                if rh is not None:
                    assert rh["trained_selectivity"] == pytest.approx(f[v]["selectivity"]["value"], rel=1e-9)
                    for bn in ("stored", "init"):
                        assert len(rh[bn]["selectivity"]) == TINY.control_draws
                        assert rh[bn]["vs_selectivity"]["value"] == pytest.approx(
                            rh["trained_selectivity"] / rh[bn]["median_selectivity"])
                        assert set(rh[bn]["vs_selectivity"]["ci_at"]) == {"0.9", "0.95", "0.99"}
                for k, est in f[v].items():
                    assert k == "random_heads" or math.isfinite(est["value"]), (b, fam, v, k)
                # the same ratio through headgeom.orbits.analyze (an independent code path)
                assert f[v]["compression"]["value"] == pytest.approx(f["layers"][point]["value"], rel=1e-10)
                factor = 8 / m["dims"]["z"]  # D_h / D_z
                assert f[v]["per_dim_ratio"]["value"] == pytest.approx(f[v]["compression"]["value"] * factor, rel=1e-12)


def test_summary_of_the_tiny_cells_builds_claims_tables_and_figure(tiny):
    results = [({"backbone": b, "seed": 0}, m) for b, m in tiny.items()]
    summary = summarize(TINY, results)
    assert len(rows_json(summary)) == 8
    for c in rows_json(summary):
        Row.from_json(c)
        assert c["verdict"] in VERDICTS
    fig = summary.figures[0][1]()
    assert len(fig.axes) == 4  # compression and selectivity rows, one column per backbone
    assert assert_legends_outside(fig) == 2  # one beside each row
    assert fig.axes[0].get_title() == "resnet18 (1 seed)"  # the noun agrees with the count
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---------------------------------------------------------------- verdicts on hand-made metrics
def _fake(ests: dict[str, tuple[float, float]]):
    names = (set(MAIN_RULE) - {"vs_random_heads_selectivity"}) | set(SELECTIVE_RULE) | {"per_dim_ratio", "class_orbit_z", "class_orbit_h",
                                                    "global_ratio", "d_inter_ratio", "d_intra_ratio",
                                                    "fresh_head_compression", "random_directions_compression",
                                                    "compression", "compression_centred", "vs_fresh_head",
                                                    "vs_random_directions", "mean_pairwise_cosine_h"}
    full = {k: _e(*ests.get(k, (2.0, 3.0))) for k in names}
    full["random_heads"] = _random_heads(vs=ests.get("vs_random_heads_selectivity", (1.5, 2.0)))
    return {"families": {"rotation": {"raw": full, "l2": full}}}


def _verdicts(per_seed):
    cfg = dataclasses.replace(TINY, families=("rotation",), seeds=len(per_seed))
    results = [({"backbone": b, "seed": s}, _fake(e)) for b in ("resnet18", "vit_tiny") for s, e in enumerate(per_seed)]
    summary = summarize(cfg, results)
    for c in rows_json(summary):
        Row.from_json(c)
    json.dumps(rows_json(summary))
    return {(c["setting"]["backbone"], c["statement"].startswith("Tables")): c["verdict"] for c in rows_json(summary)
            if c["setting"]["head_input"].startswith("corrected")}


def test_verdict_follows_the_stated_criterion():
    # every CI above 1 in both seeds: both claims supported
    assert set(_verdicts([{}, {}]).values()) == {"supported"}
    # classes merge (class/orbit CI below 1) in both seeds: main refuted; selective claim unaffected
    v = _verdicts([{"class_orbit_change": (0.5, 0.8)}] * 2)
    assert v[("resnet18", True)] == "not supported" and v[("resnet18", False)] == "supported"
    # global collapse: selectivity below 1 refutes both claims (both decide on selectivity) even with the
    # paper's compression far above 1
    v = _verdicts([{"selectivity": (0.6, 0.9), "compression": (20.0, 35.0)}] * 2)
    assert v[("vit_tiny", True)] == "not supported" and v[("vit_tiny", False)] == "not supported"
    # random directions shrink as much (relative to the cloud): the selective claim only
    v = _verdicts([{"vs_random_directions_selectivity": (0.6, 0.9)}] * 2)
    assert v[("vit_tiny", True)] == "supported" and v[("vit_tiny", False)] == "not supported"
    # one seed undecided (the joint ratio to the random heads straddles 1): 50% < 80% support -> inconclusive
    v = _verdicts([{}, {"vs_random_heads_selectivity": (0.9, 1.4)}])
    assert v[("resnet18", True)] == "inconclusive"
    # one seed supports, one refutes -> inconclusive
    v = _verdicts([{}, {"selectivity": (0.2, 0.5)}])
    assert v[("resnet18", True)] == "inconclusive" and v[("resnet18", False)] == "inconclusive"
    # the paper's compression below 1 (centring read as expansion) does not refute what selectivity supports
    assert set(_verdicts([{"compression": (0.1, 0.2)}] * 2).values()) == {"supported"}


# ---------------------------------------------------------------- compression and selectivity disagree
def _orbits_through(kind, seed, n=12, k=6, d=8):
    """z orbits (post-ReLU-like: a non-centred cone) and a 'head output' built so that the paper's
    compression and selectivity disagree:

    - "global": h = c + 0.02·(orbit means) + 0.06·(within-orbit deviations), c far from the origin: every
      point sits near the direction of c (a BN head fed inputs at another scale), so every spread
      shrinks (compression >> 1), but the orbits are 3x larger relative to the cloud than in z
      (selectivity < 1);
    - "centred": h = (z − its mean) with the within-orbit deviations halved: centring the cone
      spreads the directions (compression < 1) while the orbits shrink relative to the cloud
      (selectivity > 1).
    """
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    means = 4.0 + torch.randn(n, d, generator=g, dtype=torch.float64)  # a cone far from the origin
    dev = 0.3 * torch.randn(n, k, d, generator=g, dtype=torch.float64)
    z = means[:, None] + dev
    if kind == "global":
        c = torch.zeros(d, dtype=torch.float64)
        c[0] = 50.0
        h = c + 0.02 * (means - means.mean(dim=0))[:, None] + 0.06 * dev
    else:
        h = (means - means.mean(dim=0))[:, None] + 0.5 * dev
    return {"z": z, "head.1": h}, labels


@pytest.mark.parametrize("kind, want", [("global", "not supported"), ("centred", "supported")])
def test_the_verdict_follows_selectivity_where_the_papers_compression_disagrees(kind, want):
    cfg = dataclasses.replace(TINY, families=("rotation",), seeds=2, backbones=("resnet18",))
    results = []
    for seed in range(2):
        feats, labels = _orbits_through(kind, seed)
        z = feats["z"]
        controls = {"fresh_head": {"z": z, "head.1": z},  # an identity head: selectivity exactly 1
                    "random_directions": {"z": z, "head.1": z}}
        counts = bootstrap_counts(bootstrap_indices(len(labels), 200, seed, strata=labels), len(labels))
        ms = compression_measures(feats, labels, counts, "head.1", controls)
        # random "heads" that are the identity (selectivity 1): the joint ratio is the trained selectivity
        ms["random_heads"] = _random_heads(vs=tuple(ms["selectivity"]["ci"]), controls=(1.0, 1.0, 1.0))
        comp, sel = interval_side(ms["compression"]), interval_side(ms["selectivity"])
        assert (comp, sel) == (("above", "below") if kind == "global" else ("below", "above")), (kind, seed)
        results.append(({"backbone": "resnet18", "seed": seed},
                        {"families": {"rotation": {"raw": ms, "l2": ms}}}))
    claims = rows_json(summarize(cfg, results))
    raw = [c for c in claims if c["setting"]["head_input"].startswith("corrected")]
    assert [c["verdict"] for c in raw] == [want, want]  # the paper's compression alone would say the opposite
    for c in raw:
        Row.from_json(c)
        assert c["headline"] == "selectivity" and "decided by selectivity" in c["criterion"]
        assert c["measured"]["compression"]["per_seed_ci"]  # the paper's ratio stays, with its CIs
        assert "out_of_distribution" not in c
    for c in claims:
        if c["setting"]["head_input"].startswith("paper"):  # h(z/|z|) of a head trained on raw z: flagged
            cos = c["out_of_distribution"]["mean_pairwise_cosine_h"]
            assert cos["value"] == pytest.approx(c["measured"]["mean_pairwise_cosine_h"]["value"]) and cos["n"] == 2

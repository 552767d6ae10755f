"""C12 experiment: presets, a tiny training + probe cell (documented keys, accuracies in [0, 1],
one feature point per head layer + z for each probe), and the verdict rule on fabricated metrics."""
import dataclasses
import json

import pytest

from headgeom.data.shapes import SHAPE_CLASSES
from headgeom.experiments.c12_guillotine import (
    CONTEXT_PROBES, PROBES, TRAIN, C12Config, cell_train_config, cells, gap_statistics, n_eval, run_cell, summarize,
    train_config)
from headgeom.report.style import CHANCE_GID
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = C12Config(train=dataclasses.replace(TRAIN, data_options={"n": 24, "size": 16}, batch_size=8, max_steps=2),
                 hidden=16, out_dim=16, knn_k=5,
                 eval_train=None, eval_test=None, rotation_train=None, rotation_test=None, seeds=1, probe_max_iter=30,
                 mlp_hidden=16, mlp_epochs=3)


@pytest.fixture(scope="module")
def tiny():
    return run_cell(TINY, {"seed": 0})


def test_presets_cells_and_training_settings():
    import headgeom.experiments.c12_guillotine as mod

    exp = mod.EXPERIMENT
    assert exp.id == "C12" and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        assert preset().preset == name and "headgeom reproduce --only C12" in preset.__doc__
    tc = train_config(exp.config("paper"), 1)
    assert (tc.method, tc.optimizer, tc.lr, tc.batch_size, tc.epochs, tc.method_options["temperature"]) == (
        "simclr_oneway", "adam", 1e-3, 256, 50, 0.1)
    assert tc.head == "d-2048-2048:relu:nobias:bn:last=bn" and tc.seed == 1
    assert cells(TINY, 3) == [{"seed": 0}, {"seed": 1}, {"seed": 2}]
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)


def test_tiny_cell_keys_and_robust_facts(tiny):
    from headgeom.methods import build_method

    json.dumps(tiny)
    tc = train_config(TINY, 0)
    method = build_method(tc.method, backbone="resnet18", backbone_options=tc.backbone_options, head=tc.head)
    n_layers = len(method.projector.layers)  # Linear, BN, ReLU, Linear, BN
    raw = [p for p in tiny["points"] if not p.startswith("l2z/")]
    l2 = [p for p in tiny["points"] if p.startswith("l2z/")]
    assert raw == ["z"] + [f"head.{i}" for i in range(n_layers)] and len(l2) == n_layers
    assert tiny["head_output_point"] == f"head.{n_layers - 1}"
    assert set(tiny["accuracy"]) == set(PROBES) | set(CONTEXT_PROBES) == {"knn", "linear", "rotation", "mlp"}
    for probe in tiny["accuracy"]:
        acc = tiny["accuracy"][probe]
        assert set(acc) == set(tiny["points"]) and all(0.0 <= a <= 1.0 for a in acc.values())
        assert tiny[f"gap[{probe}]"] == pytest.approx(acc["z"] - acc[tiny["head_output_point"]])
        assert tiny[f"gap_best_layer[{probe}]"] <= tiny[f"gap[{probe}]"] + 1e-12
    assert n_eval(tiny, "rotation") == 4 * 24 and n_eval(tiny, "knn") == 24  # 4 rotations of each test image
    assert (tiny["n_train"], tiny["n_test"], tiny["rotation_n_train"], tiny["rotation_n_test"]) == (24, 24, 24, 24)
    assert tiny["num_classes"] == len(SHAPE_CLASSES)  # the chance level 1/C of the probe figure


def _fake(gaps, n_test=250_000):
    """A cell: z at 0.5 on every probe, the head ``gaps`` below it, on ``n_test`` test images (the rotation probe:
    4 x n_test / 4); 250,000 examples put the interval at about ±0.004."""
    acc = {probe: {"z": 0.5, "head.0": 0.5 - g, "head.1": 0.5 - g} for probe, g in gaps.items()}
    return {"points": ["z", "head.0", "head.1"], "head_points": ["head.0", "head.1"], "head_output_point": "head.1",
            "accuracy": acc, **{f"gap[{p}]": g for p, g in gaps.items()},
            **{f"gap_best_layer[{p}]": g for p, g in gaps.items()},
            "n_test": n_test, "rotation_n_test": n_test // 4, "num_classes": 10}


def test_verdict_follows_the_stated_criterion():
    cfg = dataclasses.replace(TINY, seeds=5)
    per_seed = [{"knn": 0.05, "linear": -0.1, "rotation": 0.05}] * 4 + [{"knn": 0.05, "linear": -0.1, "rotation": 0.0}]
    summary = summarize(cfg, [({"seed": s}, _fake(g)) for s, g in enumerate(per_seed)])
    verdicts = {c["setting"]["probe"]: c["verdict"] for c in rows_json(summary)}
    for c in rows_json(summary):
        Row.from_json(c)
        assert c["id"] == "C12" and c["verdict"] in VERDICTS and c["headline"] in c["measured"]
        assert c["headline_text"] and set(c["conventions"]) == {"level", "margin", "learned_floor", "majority"}
    # knn: z ahead in 5/5 seeds; linear: behind in 5/5; rotation: ahead in 4/5 = 80% (the tie refutes in the fifth)
    assert verdicts == {"knn": "supported", "linear": "not supported", "rotation": "supported"}
    rot = next(c for c in rows_json(summary) if c["setting"]["probe"] == "rotation")
    assert rot["robustness"]["majority"]["status"] == "flips at 1" and rot["robustness"]["margin"]["status"] == \
        "flips at 0.05"  # a gap of 0.05 is not beyond a margin of 0.05
    assert len(rot["measured"]["gap_z_minus_head_output"]["per_seed_ci"]) == 5
    # a gap of 0.005 on 250,000 examples: a gap of the margin (0.01) is excluded, so the seed refutes;
    # the same gaps on 1,000 examples decide nothing
    per_seed = [{"knn": 0.05, "linear": 0.005, "rotation": -0.05}] * 3 + [{"knn": -0.05, "linear": 0.0,
                                                                            "rotation": 0.05}] * 2
    summary = summarize(cfg, [({"seed": s}, _fake(g)) for s, g in enumerate(per_seed)])
    assert {c["setting"]["probe"]: c["verdict"] for c in rows_json(summary)} == {
        "knn": "inconclusive", "linear": "not supported", "rotation": "inconclusive"}
    summary = summarize(cfg, [({"seed": s}, _fake(g, 1_000)) for s, g in enumerate(per_seed)])
    assert {c["setting"]["probe"]: c["verdict"] for c in rows_json(summary)}["linear"] == "inconclusive"
    assert tables_md(summary)[0][1].count("\n") == 1 + 3
    json.dumps(rows_json(summary))
    # a backbone at chance (0.1 for 10 classes) has nothing to beat the head with: undecided whatever the gap
    at_chance = _fake({p: 0.05 for p in PROBES})
    at_chance["accuracy"] = {p: {k: v - 0.38 for k, v in a.items()} for p, a in at_chance["accuracy"].items()}
    verdicts = {c["setting"]["probe"]: c["verdict"] for c in rows_json(summarize(cfg, [({"seed": 0}, at_chance)]))}
    assert verdicts == {"knn": "inconclusive", "linear": "inconclusive", "rotation": "inconclusive"}


PAPER_RUNS = (("cifar10", "resnet18"), ("cifar10", "vit_tiny"), ("cifar100", "resnet18"))


def test_mlp_probe_is_reported_beside_the_linear_probe_as_context_without_a_verdict():
    cfg = dataclasses.replace(TINY, seeds=4)
    per_seed = [{"knn": 0.05, "linear": 0.05, "rotation": 0.05, "mlp": g} for g in (-0.2, -0.1, 0.0, 0.02)]
    results = [({"seed": s}, _fake(g)) for s, g in enumerate(per_seed)]
    summary = summarize(cfg, results)
    # the verdicts are those of the judged probes alone
    assert sorted(c["setting"]["probe"] for c in rows_json(summary)) == sorted(PROBES)
    table = tables_md(summary)[0][1].splitlines()
    assert table[0] == "| point | kNN | linear | MLP (context) | rotation |" and len(table) == 2 + 3
    title, context = tables_md(summary)[1]
    assert "context, no verdict" in title
    mlp_row = next(line for line in context.splitlines() if "| MLP (context) |" in line)
    meas, j = gap_statistics(cfg, results, "mlp")
    # the gaps -0.2, -0.1, 0, 0.02 against the 0.01 margin (intervals ±0.004): 1 of 4 seeds supports, 3 refute
    assert j["verdict"].outcome == "inconclusive" and j["verdict"].reason.startswith("25% of 4 run(s) support, 75% refute")
    assert meas["gap_z_minus_head_output"]["value"] == pytest.approx(-0.07)
    assert f"{meas['gap_z_minus_head_output']['value']:.3f} ± {meas['gap_z_minus_head_output']['spread']:.3f}" in mlp_row
    assert mlp_row.endswith("| 25% of 4 run(s) support, 75% refute (n = 4) |")
    fig = summary.figures[0][1]()
    chance = {ax.get_title(): [float(ln.get_ydata()[0]) for ln in ax.get_lines() if ln.get_gid() == CHANCE_GID]
              for ax in fig.axes}
    assert chance == {"knn": [0.1], "linear": [0.1], "MLP (context)": [0.1], "rotation": [0.25]}
    # cells measured without the MLP probe (older runs, or mlp=False): no MLP column, no context table
    plain = summarize(cfg, [({"seed": 0}, _fake({p: 0.05 for p in PROBES}))])
    assert "MLP" not in tables_md(plain)[0][1] and len(tables_md(plain)) == 1


def test_settings_give_a_cell_per_dataset_backbone_and_seed():
    cfg = C12Config(settings=PAPER_RUNS)
    cs = cells(cfg, 2)
    assert len(cs) == 6 and cs[2] == {"data": "cifar10", "backbone": "vit_tiny", "seed": 0}
    vit, c100 = cell_train_config(cfg, cs[2]), cell_train_config(cfg, cs[5])
    assert (vit.data, vit.backbone, vit.backbone_options) == ("cifar10", "vit_tiny", {})
    assert (c100.data, c100.backbone, c100.backbone_options, c100.seed) == ("cifar100", "resnet18", {"width": 0.125}, 1)
    assert cell_train_config(TINY, {"seed": 0}) == train_config(TINY, 0)  # one setting: the cells of before
    with pytest.raises(ValueError, match="backbone among"):
        cells(C12Config(settings=(("cifar10", "resnet50"),)), 1)


def test_each_setting_is_judged_on_its_own():
    cfg = dataclasses.replace(TINY, seeds=5, settings=(("cifar10", "resnet18"), ("cifar100", "resnet18")))
    ahead, behind = {p: 0.05 for p in PROBES}, {p: -0.05 for p in PROBES}
    results = ([({"data": "cifar10", "backbone": "resnet18", "seed": s}, _fake(ahead)) for s in range(5)]
               + [({"data": "cifar100", "backbone": "resnet18", "seed": s}, _fake(behind)) for s in range(5)])
    summary = summarize(cfg, results)
    verdicts = {(c["setting"]["data"], c["setting"]["probe"]): c["verdict"] for c in rows_json(summary)}
    assert verdicts == {**{("cifar10", p): "supported" for p in PROBES},
                        **{("cifar100", p): "not supported" for p in PROBES}}
    assert [name for name, _ in summary.figures] == ["probes_cifar10_resnet18", "probes_cifar100_resnet18"]
    assert len(tables_md(summary)) == 2 and "cifar100" in tables_md(summary)[1][0]


def test_a_tiny_vit_cell_trains_and_probes():
    cfg = dataclasses.replace(TINY, vit_options=(("embed_dim", 24),))
    res = run_cell(cfg, {"data": "shapes", "backbone": "vit_tiny", "seed": 0})
    assert res["points"][0] == "z" and all(0.0 <= a <= 1.0 for a in res["accuracy"]["knn"].values())

"""analyze_orbits end to end on a tiny model (headgeom.orbits.analyze)."""

from __future__ import annotations

import json

import pytest
import torch

from headgeom.backbones import resnet18
from headgeom.heads import head_from
from headgeom.io import atomic_write_json
from headgeom.orbits import analyze_orbit_features, analyze_orbits, extract_orbits
from headgeom.orbits import metrics as M


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    backbone = resnet18(width=0.0625)  # 32-d
    head = head_from("32-24-8:relu:bn:last=bn")
    images = torch.randint(0, 256, (9, 3, 16, 16), generator=torch.Generator().manual_seed(1),
                           dtype=torch.uint8)
    labels = torch.arange(9) % 3
    return backbone, head, images, labels


@pytest.fixture(scope="module")
def result(setup):
    backbone, head, images, labels = setup
    return analyze_orbits(backbone, head, images, labels, ["rotation", "hue"], 4, n_boot=80,
                          head_input=("raw", "l2"), value_ranges={"rotation": (0.0, 90.0)})


def test_result_is_json_and_complete(result, tmp_path):
    path = atomic_write_json(tmp_path / "orbits.json", result)
    back = json.loads(path.read_text())
    assert back["protocol"]["n_boot"] == 80 and back["protocol"]["families"] == ["rotation", "hue"]
    assert back["protocol"]["bootstrap"] == "BCa, over images, stratified by class"
    fam = back["families"]["rotation"]
    assert fam["xi"] == [0.0, 30.0, 60.0, 90.0] and fam["anchor"] == "orbit step 0"
    points = ["z"] + [f"head.{i}" for i in range(5)] + [f"l2z/head.{i}" for i in range(5)]
    assert list(fam["points"]) == points and list(fam["ratios"]) == points[1:]
    for p in points:
        for m in ("spread", "trace_l2", "per_dim_var_raw", "d_intra", "d_inter", "class_orbit_ratio",
                  "orbit_effective_rank", "curvature_raw", "curvature_arc", "alignment"):
            est = fam["points"][p][m]
            if est.get("ci_undefined"):  # a bias-dominated bootstrap (BCa): no interval, a reason
                assert est["ci"] == [None, None] and est["ci_undefined"].startswith("bias-dominated")
            else:  # every reported interval holds its estimate (headgeom.orbits.bootstrap)
                assert est["ci"][0] <= est["value"] <= est["ci"][1]
            assert est["n_boot"] == 80 and est["method"] == "BCa"
    assert fam["alignment_profile"]["head.4"][0] == pytest.approx(1.0, abs=1e-6)  # anchor = step 0
    assert back["families"]["hue"]["anchor"].startswith("clean image")
    for ctrl in ("fresh_head", "random_directions"):
        assert list(back["families"]["hue"]["controls"][ctrl]["ratios"]) == points[1:]


def test_ratio_relations_hold_exactly_value_and_interval(result):
    fam = result["families"]["hue"]
    for p, r in fam["ratios"].items():
        factor = fam["dims"][p] / fam["dims"]["z"]
        assert r["per_dim_ratio"]["value"] == pytest.approx(r["trace_ratio"]["value"] * factor, rel=1e-12)
        for a, b in zip(r["per_dim_ratio"]["ci"], r["trace_ratio"]["ci"]):
            assert a == pytest.approx(b * factor, rel=1e-10)
        assert r["per_dim_ratio_raw"]["value"] == pytest.approx(r["trace_ratio_raw"]["value"] * factor,
                                                                rel=1e-12)
        assert r["compression"]["value"] == pytest.approx(r["trace_ratio"]["value"], rel=1e-12)
    pts = fam["points"]["head.4"]
    assert pts["class_orbit_ratio"]["value"] == pytest.approx(
        pts["d_inter"]["value"] / pts["d_intra"]["value"], rel=1e-12)


def test_values_match_the_metrics_on_the_extracted_features(setup):
    backbone, head, images, labels = setup
    of = extract_orbits(backbone, images, "saturation", 5, head)
    res = analyze_orbit_features(of, labels, heads=head, n_boot=50, seed=1)
    for p in ("z", "head.2", "head.4"):
        f = of.features[p]
        assert res["points"][p]["spread"]["value"] == pytest.approx(float(M.orbit_spread(f).mean()), rel=1e-10)
        assert res["points"][p]["d_inter"]["value"] == pytest.approx(
            float(M.class_centroid_distance(f, labels)), rel=1e-10)
    comp = float(M.orbit_spread(of.features["z"]).mean() / M.orbit_spread(of.features["head.4"]).mean())
    assert res["ratios"]["head.4"]["compression"]["value"] == pytest.approx(comp, rel=1e-10)
    # the random-direction control keeps each z orbit's raw size
    rnd = res["controls"]["random_directions"]["points"]["z"]["trace_raw"]["value"]
    assert rnd == pytest.approx(res["points"]["z"]["trace_raw"]["value"], rel=1e-5)
    assert res == analyze_orbit_features(of, labels, heads=head, n_boot=50, seed=1)  # seeded
    no_labels = analyze_orbit_features(of, None, heads=None, n_boot=20)
    assert "d_inter" not in no_labels["points"]["z"] and "controls" not in no_labels


def test_errors_come_before_any_forward_pass(setup):
    _, head, images, labels = setup

    def backbone(x):
        raise AssertionError("no forward pass expected")

    with pytest.raises(ValueError, match="unknown augmentation family 'swirl'"):
        analyze_orbits(backbone, head, images, labels, ["hue", "swirl"], 4)
    with pytest.raises(ValueError, match="not analysed"):
        analyze_orbits(backbone, head, images, labels, ["hue"], 4, value_ranges={"blur": (0.1, 1.0)})
    with pytest.raises(ValueError, match="at least one augmentation family"):
        analyze_orbits(backbone, head, images, labels, [], 4)

"""C10 experiment: file discovery and the placement message, run_cell on synthetic official-layout
checkpoint files at tiny widths (checked against a direct computation), and the verdict rule on
hand-made metrics.

The synthetic files are written by tests/official_models.py (re-writings of the official modules
and the dicts their training scripts save), so their keys are the official ones. No test asserts
a verdict on measured tiny random models.
"""
import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from figure_checks import assert_legends_outside
from headgeom.augment.families import orbit
from headgeom.backbones import VisionTransformer, resnet50
from headgeom.checkpoints.pretrained_files import CHECKPOINTS_ENV, EXPECTED_FILES
from headgeom.data import DATASET_STATS, load_dataset
from headgeom.experiments.c10_pretrained import FAMILIES, C10Config, cells, run_cell, summarize
from headgeom.experiments.c10_pretrained.summary import PAPER_METRIC, PRIMARY
from headgeom.experiments.registry import load_all
from headgeom.experiments.runner import cell_key, jsonable, run_experiments
from official_models import BarlowTwins, VICReg, dino_full_checkpoint, method_full_checkpoint, randomise_
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = C10Config(preset="quick", data="shapes", data_options=(("n", 60),), n_classes=2, per_class=2, image_size=40,
                 families=("rotation_45", "hue"), steps=3, n_boot=50, batch_size=32, device="cpu", num_threads=1)


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    """The four official file names in one folder, at tiny widths; returns (folder, reference models)."""
    d = tmp_path_factory.mktemp("checkpoints")
    refs = {}
    torch.manual_seed(0)
    obj, refs["dino_vit"] = dino_full_checkpoint(
        lambda: VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=1, num_heads=1),
        in_dim=64, out_dim=48, nlayers=3, hidden_dim=32, bottleneck_dim=8)
    torch.save(obj, d / EXPECTED_FILES["dino_vit"].filename)
    torch.manual_seed(0)
    obj, refs["dino_resnet50"] = dino_full_checkpoint(lambda: resnet50(width=0.0625), in_dim=128, out_dim=40,
                                                      use_bn=True, nlayers=2, hidden_dim=64, bottleneck_dim=12,
                                                      plain_last=True)
    torch.save(obj, d / EXPECTED_FILES["dino_resnet50"].filename)
    torch.manual_seed(3)
    refs["vicreg"] = randomise_(VICReg(resnet50(width=0.0625), 128, "96-96-80"), seed=5)
    torch.save(method_full_checkpoint(refs["vicreg"]), d / EXPECTED_FILES["vicreg"].filename)
    torch.manual_seed(4)
    refs["barlow_twins"] = randomise_(BarlowTwins(resnet50(width=0.0625), 128, "64-64-48"), seed=6)
    torch.save(method_full_checkpoint(refs["barlow_twins"]), d / EXPECTED_FILES["barlow_twins"].filename)
    return d, refs


@pytest.fixture(scope="module")
def measured(ckpt_dir):
    config = dataclasses.replace(TINY, checkpoints_dir=str(ckpt_dir[0]))
    return config, [(c, run_cell(config, c)) for c in cells(config)]


def test_registered_with_documented_presets():
    exp = load_all()["C10"]
    assert set(exp.presets) == {"quick", "small", "paper"} and not exp.theory
    for name, preset in exp.presets.items():
        cfg = exp.config(name)
        assert isinstance(cfg, C10Config) and cfg.preset == name and cfg.image_size == 224
        assert "headgeom reproduce --only C10" in preset.__doc__ and "CPU" in preset.__doc__
    paper = exp.config("paper")
    assert paper.n_classes * paper.per_class == 50 and paper.steps == 12 and paper.families == FAMILIES
    assert (paper.data, paper.split) == ("cifar10", "test")


def test_no_files_every_claim_inconclusive_with_placement_message(tmp_path, monkeypatch):
    folder = tmp_path / "ckpts"
    folder.mkdir()
    monkeypatch.setenv(CHECKPOINTS_ENV, str(folder))
    config = C10Config()
    cs = cells(config)
    assert [c["release"] for c in cs] == list(EXPECTED_FILES) and not any(c["present"] for c in cs)
    results = [(c, run_cell(config, c)) for c in cs]
    for c, m in results:
        assert m["status"] == "absent" and str(folder / c["file"]) in m["message"]
    s = summarize(config, results)
    assert len(rows_json(s)) == 5 and all(Row.from_json(c).verdict == "inconclusive" for c in rows_json(s))
    for claim in rows_json(s)[:3]:  # no file measured decided the method rows
        assert claim["headline"] == "checkpoints_measured" and claim["measured"]["checkpoints_measured"]["value"] == 0
    for claim in rows_json(s):
        assert claim["headline"] in claim["measured"]
    for claim in rows_json(s)[:3]:  # one per method: names that method's files and where they go
        method = {"DINO": "dino", "VICReg": "vicreg", "Barlow Twins": "barlow_twins"}[claim["setting"]["method"]]
        msg = claim["setting"]["missing_files"]
        for r, e in EXPECTED_FILES.items():
            assert (f"`{folder / e.filename}`" in msg) == (e.method == method), (r, msg)
    for claim in rows_json(s)[3:]:  # the dichotomy: all four files
        assert all(f"`{folder / e.filename}`" in claim["setting"]["missing_files"] for e in EXPECTED_FILES.values())
    text = "\n".join(md for _, md in tables_md(s)) + "\n".join(s.notes)
    for e in EXPECTED_FILES.values():
        assert e.filename in text and e.url in text and str(folder / e.filename) in text
    assert s.figures == []


def test_no_directory_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv(CHECKPOINTS_ENV, raising=False)
    config = C10Config()
    cs = cells(config)
    assert all(c["dir"] is None and not c["present"] for c in cs)
    claim = rows_json(summarize(config, [(c, run_cell(config, c)) for c in cs]))[3]
    msg = claim["setting"]["missing_files"]
    assert "--checkpoints DIR" in msg and CHECKPOINTS_ENV in msg and "DIR/checkpoint.pth" in msg


def test_cells_change_when_a_file_appears_and_config_dir_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECKPOINTS_ENV, str(tmp_path / "elsewhere"))
    config = C10Config(checkpoints_dir=str(tmp_path))
    before = cells(config)
    assert all(c["dir"] == str(tmp_path.resolve()) for c in before)
    (tmp_path / "checkpoint.pth").write_bytes(b"x" * 10)
    after = cells(config)
    assert after[3]["present"] and after[3]["size"] == 10 and after[3]["mtime_ns"] > 0
    assert cell_key(after[3], config) != cell_key(before[3], config)
    assert [cell_key(c, config) for c in after[:3]] == [cell_key(c, config) for c in before[:3]]
    with pytest.raises(ValueError, match="releases"):
        cells(dataclasses.replace(config, releases=("simsiam",)))


def test_run_cell_on_synthetic_official_files(measured):
    config, results = measured
    assert [m["release"] for _, m in results] == list(EXPECTED_FILES)
    for cell, m in results:
        assert m["status"] == "measured" and m["missing_keys"] == [] and m["unexpected_keys"] == []
        json.dumps(jsonable(m), allow_nan=False)
        assert m["n_images"] == 4 and m["images"]["resize"].startswith("bilinear")
        assert m["which"] == ("teacher" if cell["release"].startswith("dino") else None)
        for fam in config.families:
            fr = m["families"][fam]
            for v in config.head_inputs:
                r = fr["ratios"][v]
                for key in ("per_dim_ratio_raw", "trace_ratio_raw", "per_dim_ratio", "trace_ratio"):
                    assert math.isfinite(r[key]["value"]) and r[key]["value"] > 0, (cell["release"], fam, v, key)
                assert r["per_dim_ratio_raw"]["value"] == pytest.approx(
                    r["trace_ratio_raw"]["value"] * fr["dim_head"] / fr["dim_z"], rel=1e-9)
            assert set(fr["controls"]) == {"fresh_head", "random_directions"}
    dims = {m["release"]: (m["families"]["hue"]["dim_z"], m["families"]["hue"]["dim_head"]) for _, m in results}
    assert dims == {"dino_vit": (64, 48), "dino_resnet50": (128, 40), "vicreg": (128, 80), "barlow_twins": (128, 48)}
    s = summarize(config, [(c, jsonable(m)) for c, m in results])
    assert len(rows_json(s)) == 5 and all(Row.from_json(c).verdict in VERDICTS for c in rows_json(s))
    assert not any("missing_files" in c["setting"] for c in rows_json(s))
    assert any("dimension factor flips" in n for n in s.notes) and len(tables_md(s)) == 4
    profile = tables_md(s)[3][1]
    assert "head.0 Linear(64->32) (D=32)" in profile and "l2z/" not in profile
    fig = s.figures[0][1]()
    assert_legends_outside(fig)
    import matplotlib.pyplot as plt

    plt.close(fig)


@pytest.mark.parametrize("family", ["rotation_45", "hue"])
def test_trace_ratio_matches_a_direct_computation(ckpt_dir, measured, family):
    """Barlow Twins: resize, orbit on [0, 1] pixels, ImageNet mean/std, the saved model's backbone
    and projector, within-orbit covariance traces written out here."""
    config, results = measured
    ref = ckpt_dir[1]["barlow_twins"].eval()
    ds = load_dataset("shapes", split="test", n=60)
    idx = torch.cat([torch.nonzero(ds.labels == c).flatten()[:2] for c in range(2)])
    x = F.interpolate(ds.images[idx].double() / 255, size=(40, 40), mode="bilinear", align_corners=False).float()
    orb = orbit(x.clamp(0, 1), family, 3)  # (N, K, 3, H, W), on [0, 1] pixels
    st = DATASET_STATS["imagenet"]
    mean, std = torch.tensor(st.mean).view(1, 3, 1, 1), torch.tensor(st.std).view(1, 3, 1, 1)
    with torch.no_grad():
        z = ref.backbone((orb.flatten(0, 1) - mean) / std)
        h = ref.projector(z)
    z, h = z.double().view(4, 3, -1), h.double().view(4, 3, -1)
    trace = [((f - f.mean(1, keepdim=True)) ** 2).sum((1, 2)).div(2).mean() for f in (z, h)]
    m = next(mm for _, mm in results if mm["release"] == "barlow_twins")
    r = m["families"][family]["ratios"]["raw"]
    assert r["trace_ratio_raw"]["value"] == pytest.approx(float(trace[0] / trace[1]), rel=1e-3)
    assert r["per_dim_ratio_raw"]["value"] == pytest.approx(float((trace[0] / 128) / (trace[1] / 48)), rel=1e-3)


def test_a_file_of_another_release_is_refused(ckpt_dir, tmp_path):
    (tmp_path / "checkpoint.pth").write_bytes((ckpt_dir[0] / "resnet50_fullckpt.pth").read_bytes())
    config = dataclasses.replace(TINY, checkpoints_dir=str(tmp_path), releases=("barlow_twins",))
    with pytest.raises(ValueError, match="'vicreg' checkpoint.*Barlow Twins"):
        run_cell(config, cells(config)[0])


# ------------------------------------------------------------------ the verdict rule on hand-made metrics
DIMS = {"dino_vit": (384, 65536), "dino_resnet50": (2048, 60000), "vicreg": (2048, 8192), "barlow_twins": (2048, 8192)}


def _est(v, lo, hi):
    return {"value": v, "ci": [lo, hi], "level": 0.95, "n_boot": 100, "n_boot_undefined": 0}


def _fake(trace: dict[str, dict[str, tuple[float, float, float]]], selectivity=None):
    """Metrics as run_cell writes them, from trace_ratio_raw (value, lo, hi) per release and family;
    the per-dimension ratio is the trace ratio times D_h / D_z, as its definition says. Selectivity
    (what the claims decide on) is the same triple unless ``selectivity`` gives its own."""
    results = []
    for r, fams in trace.items():
        dz, dh = DIMS[r]
        out = {}
        for fam, (v, lo, hi) in fams.items():
            f = dh / dz
            sel = (selectivity or {}).get(r, {}).get(fam, (v, lo, hi))
            raw = {"trace_ratio_raw": _est(v, lo, hi), "per_dim_ratio_raw": _est(v * f, lo * f, hi * f),
                   "trace_ratio": _est(v, lo, hi), "per_dim_ratio": _est(v * f, lo * f, hi * f),
                   "selectivity": _est(*sel), "global_ratio": _est(1, 1, 1), "compression_centred": _est(v, lo, hi)}
            out[fam] = {"dim_z": dz, "dim_head": dh, "ratios": {"raw": raw, "l2": raw},
                        "class_orbit_ratio": {"z": _est(2, 1, 3), "raw": _est(2.5, 1, 3), "l2": _est(2.5, 1, 3)},
                        "mean_pairwise_cosine_h": {"raw": _est(0.03, 0.02, 0.04), "l2": _est(0.994, 0.99, 0.997)}}
        results.append(({"release": r, "dir": "/x"}, {"status": "measured", "release": r, "n_images": 50,
                                                      "families": out, "sha256": "0" * 64}))
    return results


def _verdicts(trace, selectivity=None):
    config = C10Config(families=("rotation_45", "hue"))
    s = summarize(config, _fake(trace, selectivity))
    return [c["verdict"] for c in rows_json(s)], s


GOOD = {"dino_vit": {"rotation_45": (7.7, 5, 9), "hue": (3, 2, 4)},
        "dino_resnet50": {"rotation_45": (3.8, 2, 5), "hue": (2, 1.5, 3)},
        "vicreg": {"rotation_45": (0.5, 0.4, 0.6), "hue": (0.3, 0.2, 0.45)},
        "barlow_twins": {"rotation_45": (0.45, 0.3, 0.6), "hue": (0.8, 0.7, 0.9)}}


def test_verdicts_follow_the_stated_rule():
    verdicts, s = _verdicts(GOOD)
    assert verdicts[:4] == ["supported"] * 4
    # the paper's per-dimension ratio multiplies by D_h / D_z = 4: VICReg's 0.3-0.6 become 1.2-2.4 (compress)
    assert verdicts[4] == "not supported"
    assert any("VICReg: not supported under the paper's per-dimension ratio, supported under the trace ratio" in n
               for n in s.notes)
    assert [c["headline"] for c in rows_json(s)] == [
        "selectivity[dino_vit/rotation_45]", "selectivity[vicreg/rotation_45]",
        "selectivity[barlow_twins/rotation_45]", "methods_supported", "methods_not_supported"]
    assert rows_json(s)[3]["measured"]["methods_supported"]["value"] == 1.0
    assert rows_json(s)[4]["measured"]["methods_not_supported"]["value"] == pytest.approx(2 / 3)  # VICReg, Barlow Twins
    straddle = {**GOOD, "vicreg": {**GOOD["vicreg"], "hue": (0.9, 0.7, 1.1)}}
    verdicts, s = _verdicts(straddle)
    assert verdicts[:4] == ["supported", "inconclusive", "supported", "inconclusive"]
    assert rows_json(s)[1]["headline"] == "selectivity[vicreg/hue]"  # the pair whose CI holds 1 decided
    wrong = {**GOOD, "barlow_twins": {**GOOD["barlow_twins"], "rotation_45": (1.5, 1.2, 1.9)}}
    verdicts, s = _verdicts(wrong)
    assert verdicts[:4] == ["supported", "supported", "not supported", "not supported"]
    assert rows_json(s)[2]["headline"] == "selectivity[barlow_twins/rotation_45]"
    assert rows_json(s)[3]["headline"] == "methods_not_supported"
    dino_expands = {**GOOD, "dino_resnet50": {**GOOD["dino_resnet50"], "hue": (1e-5, 1e-6, 5e-5)}}
    assert _verdicts(dino_expands)[0][0] == "not supported"
    partial = {k: v for k, v in GOOD.items() if k != "dino_vit"}
    verdicts, s = _verdicts(partial)
    assert verdicts == ["inconclusive", "supported", "supported", "inconclusive", "inconclusive"]
    assert EXPECTED_FILES["dino_vit"].filename in rows_json(s)[0]["setting"]["missing_files"]
    assert PRIMARY == ("selectivity", "raw") and PAPER_METRIC[0] == "per_dim_ratio_raw"


def test_the_claims_follow_selectivity_where_the_trace_ratios_disagree():
    # every trace ratio as the paper reads it (DINO compresses, VICReg and Barlow Twins expand), but
    # relative to the cloud DINO's orbits grow and VICReg's shrink: the method claims follow selectivity
    sel = {"dino_vit": {"rotation_45": (0.5, 0.4, 0.6), "hue": (0.6, 0.5, 0.7)},
           "dino_resnet50": {"rotation_45": (0.7, 0.6, 0.8), "hue": (0.8, 0.7, 0.9)},
           "vicreg": {"rotation_45": (3, 2, 4), "hue": (2, 1.5, 2.5)}}
    verdicts, s = _verdicts(GOOD, sel)
    assert verdicts[:4] == ["not supported", "not supported", "supported", "not supported"]
    dino = rows_json(s)[0]
    for c in rows_json(s):
        Row.from_json(c)
        assert "decided by selectivity" in c["criterion"] or c["setting"]["metric"] == PAPER_METRIC[0]
    assert dino["headline"] == "selectivity[dino_vit/rotation_45]"
    assert dino["measured"]["selectivity[dino_vit/rotation_45]"]["value"] == 0.5
    # the raw trace ratio and the paper's per-dimension ratio stay in the row, each with its CI
    assert dino["measured"]["trace_ratio_raw[dino_vit/rotation_45]"]["ci"] == [5, 9]
    assert "per_dim_ratio_raw[dino_vit/rotation_45] (paper's)" in dino["measured"]
    assert any("DINO: not supported under selectivity (the claims), supported under the raw trace ratio" in n
               for n in s.notes)
    # the ratio table shows the cosine at the head for both inputs, the l2 one marked out of distribution
    ratio_table = next(t for title, t in tables_md(s) if title.startswith("C10 orbit variance ratios"))
    assert "mean pairwise cosine h (l2 in, out of distribution)" in ratio_table and "0.994 [0.99, 0.997]" in ratio_table
    assert any(n.startswith("Out of distribution") for n in s.notes)


def test_a_present_file_without_measurement_is_not_called_missing(tmp_path):
    """A file that is there but whose cell failed is reported as not measured, not as to be placed."""
    (tmp_path / EXPECTED_FILES["dino_vit"].filename).write_bytes(b"x")
    results = [({**c, "dir": str(tmp_path)}, m) for c, m in _fake({k: v for k, v in GOOD.items() if k != "dino_vit"})]
    s = summarize(C10Config(families=("rotation_45", "hue")), results)
    dino = rows_json(s)[0]
    assert dino["verdict"] == "inconclusive" and "missing_files" not in dino["setting"]
    assert EXPECTED_FILES["dino_vit"].filename in dino["setting"]["not_measured"]
    assert "Failed cells" in dino["setting"]["not_measured"]


def test_reproduce_reports_placement_and_reruns_a_cell_once_its_file_appears(tmp_path, monkeypatch):
    folder = tmp_path / "ckpts"
    folder.mkdir()
    monkeypatch.setenv(CHECKPOINTS_ENV, str(folder))
    out = run_experiments(["C10"], "quick", out=tmp_path / "out", progress=False)
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert all(c["verdict"] == "inconclusive" for c in out["claims"]) and len(out["claims"]) == 5
    for e in EXPECTED_FILES.values():
        assert str(folder / e.filename) in report and e.url in report
    (folder / "checkpoint.pth").write_bytes(b"not a checkpoint")  # appears: its cell runs (and fails to load)
    again = run_experiments(["C10"], "quick", out=tmp_path / "out", progress=False)
    exp = again["experiments"]["C10"]
    assert exp["n_reused"] == 3 and exp["n_failed"] == 1 and "checkpoint.pth" in json.dumps(exp["failed_cells"])
    barlow = next(c for c in again["claims"] if c["setting"].get("method") == "Barlow Twins")
    assert barlow["verdict"] == "inconclusive" and "checkpoint.pth" in barlow["setting"]["not_measured"]

"""``headgeom analyze`` (headgeom.orbits.cli): outputs for a run directory and checkpoint files, the
report's numbers against analysis.json, the ImageNet input path (224 px, normalisation after the
colour operation), the tangent-metric tables, and argument errors (exit status 2)."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from headgeom.augment import functional as AF
from headgeom.augment.families import get_family, orbit
from headgeom.backbones import VisionTransformer, resnet18
from headgeom.checkpoints import file_sha256
from headgeom.data import load_dataset
from headgeom.cli import main
from headgeom.orbits import cli, model_input
from headgeom.train import TrainConfig, build_method_from_config, save_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
FAST = ["--boot", "40", "--steps", "3", "--quiet", "--batch-size", "64"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A headgeom SimSiam run (ResNet-18 width 1/8, shapes n=64) with moved-off-init weights."""
    root = tmp_path_factory.mktemp("analyze")
    config = TrainConfig(method="simsiam", backbone="resnet18", backbone_options={"width": 0.125},
                         head="d-32-16:relu:bn", predictor="16-8-16:relu:bn", data="shapes",
                         data_options={"n": 64}, device="cpu", epochs=1)
    torch.manual_seed(0)
    model = build_method_from_config(config)
    with torch.no_grad():
        for key, t in model.state_dict().items():
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                t.mul_(1 + torch.rand_like(t)) if key.endswith("running_var") else \
                    t.add_(0.05 * torch.randn_like(t))
    state = {"step": 3, "epoch": 1, "method": model.state_dict(),
             "optimizer": {"state": {}, "param_groups": []}, "config": config.to_dict(),
             "data_generator": torch.zeros(8, dtype=torch.uint8),
             "aug_generator": torch.zeros(8, dtype=torch.uint8), "torch_rng": torch.get_rng_state()}
    save_checkpoint(root / "run" / "checkpoints" / "last.pt", state)
    return root / "run"


def _analyze(argv, capsys=None):
    code = main(["analyze", *map(str, argv)])
    return code, (capsys.readouterr() if capsys is not None else None)


def _cell(text: str) -> tuple[float, float, float]:
    """'v [lo, hi]' -> floats (nan for 'nan')."""
    m = re.fullmatch(r"(\S+) \[(\S+), (\S+)\]", text.strip())
    assert m, text
    return tuple(float(g) for g in m.groups())


def _table_after(md: str, heading: str) -> list[list[str]]:
    """Rows (cells) of the first markdown table after ``heading``."""
    rest = md[md.index(heading):]
    rows = [ln for ln in rest.splitlines() if ln.startswith("|")]
    block, started = [], False
    for ln in rest.splitlines()[1:]:
        if ln.startswith("|"):
            started = True
            block.append([c.strip() for c in ln.strip("|").split("|")])
        elif started:
            break
    assert rows and block, heading
    return block[2:]  # header and --- removed


def _close(text: str, est: dict) -> None:
    if est.get("ci_undefined"):  # a bias-dominated bootstrap: the value and why there is no CI
        v, why = re.fullmatch(r"(\S+) \[no CI: (.+)\]", text.strip()).groups()
        assert float(v) == pytest.approx(est["value"], rel=6e-4, abs=1e-12) and est["ci_undefined"].startswith(why)
        return
    v, lo, hi = _cell(text)
    for got, want in zip((v, lo, hi), (est["value"], *est["ci"])):
        if want is None:
            assert math.isnan(got)
        else:
            assert got == pytest.approx(want, rel=6e-4, abs=1e-12), (text, est)


def _spread(f: torch.Tensor) -> float:
    """The paper's spread, written here: mean_i (1/K) Σ_k ‖u_ik − ū_i‖², u = f/‖f‖."""
    u = f.double() / f.double().norm(dim=-1, keepdim=True)
    return float((u - u.mean(dim=1, keepdim=True)).pow(2).sum(-1).mean())


def test_run_directory_outputs_and_report_matches_json(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code, cap = _analyze([run_dir, "--images", 12, "--families", "rotation,hue", "--no-tangents",
                          "--out", out, *FAST], capsys)
    assert code == 0, cap.err
    res = json.loads((out / "analysis.json").read_text())
    md = (out / "report.md").read_text()
    for fam in ("rotation", "hue"):
        assert (out / "figures" / f"orbits_{fam}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{fam} orbits](figures/orbits_{fam}.png)" in md
    assert res["model"]["sha256"] == file_sha256(run_dir / "checkpoints" / "last.pt")
    assert res["model"]["release"] == "headgeom_simsiam"
    assert res["tangent_metric"] == {"skipped": "--no-tangents"}
    # the run's own preprocessing: native size, its training set's mean/std (measured here)
    train = load_dataset("shapes", "train", n=64)
    mean, std = train.channel_stats()
    pre = res["preprocessing"]
    assert pre["kind"] == "run" and pre["size"] is None
    assert pre["mean"] == pytest.approx(mean, rel=1e-12) and pre["std"] == pytest.approx(std, rel=1e-12)
    # 12 test images balanced over the 10 classes, seeded and recorded
    data = res["data"]
    assert data["n_images"] == 12 and len(set(data["indices"])) == 12
    assert sorted(data["per_class"].values()) == [1] * 8 + [2] * 2
    # every number of the report is the JSON's
    fam = res["orbits"]["families"]["rotation"]
    rows = {r[0]: r for r in _table_after(md, "## rotation")}
    assert set(rows) == set(fam["points"])
    for p, r in rows.items():
        assert r[1] == str(fam["dims"][p])
        for text, key in zip(r[2:], ("spread", "global_spread", "spread_centred",
                                     "mean_pairwise_cosine", "d_intra", "d_inter",
                                     "class_orbit_ratio", "orbit_effective_rank", "curvature_raw",
                                     "curvature_arc", "alignment"), strict=True):
            _close(text, fam["points"][p][key])
    ratio_rows = {r[0]: r for r in _table_after(md[md.index("## rotation"):], "### Ratios z / point")}
    for p, r in ratio_rows.items():
        for text, key in zip(r[1:], ("compression", "global_ratio", "selectivity",
                                     "compression_centred", "trace_ratio", "per_dim_ratio",
                                     "trace_ratio_raw", "per_dim_ratio_raw", "d_intra_ratio",
                                     "class_orbit_change"), strict=True):
            _close(text, fam["ratios"][p][key])
    summary = _table_after(md, "## Summary")
    assert [(r[0], r[1]) for r in summary] == [("rotation", "head.3"), ("hue", "head.3")]
    for r in summary:
        f = res["orbits"]["families"][r[0]]
        for text, key in zip(r[2:7], ("compression", "global_ratio", "selectivity",
                                      "compression_centred", "class_orbit_change")):
            _close(text, f["ratios"]["head.3"][key])
        _close(r[7], f["controls"]["fresh_head"]["ratios"]["head.3"]["compression"])
        _close(r[8], f["controls"]["random_directions"]["ratios"]["head.3"]["compression"])
    # terminal: a row per family and the paths written
    assert re.search(r"^rotation\s+head\.3\s", cap.out, re.M) and f"wrote {out / 'report.md'}" in cap.out
    # the JSON's compression, recomputed independently for the recorded images
    from headgeom.checkpoints import load_checkpoint
    m = load_checkpoint(run_dir)
    test = load_dataset("shapes", "test", n=64)
    x = test.images[data["indices"]].float() / 255
    with torch.no_grad():
        orb = orbit(x, get_family("rotation"), 3).reshape(-1, 3, 32, 32)
        z = m.backbone((orb - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1))
        h = m.head(z)
    want = _spread(z.reshape(12, 3, -1)) / _spread(h.reshape(12, 3, -1))
    assert fam["ratios"]["head.3"]["compression"]["value"] == pytest.approx(want, rel=1e-4)


class Recorder(nn.Module):
    """A backbone that keeps a copy of every batch it sees."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner, self.seen = inner, []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        return self.inner(x)


def _imagenet_file(tmp_path):
    torch.manual_seed(3)
    net = resnet18(width=0.125, cifar_stem=False)  # torchvision layout, ImageNet 7x7 stem
    path = tmp_path / "resnet18-imagenet.pth"
    torch.save(net.state_dict(), path)
    return path


def test_imagenet_model_resizes_to_224_and_normalises_after_colour_ops(tmp_path, monkeypatch):
    path = _imagenet_file(tmp_path)
    mi = model_input.resolve_model(path, data="shapes")
    assert mi.kind == "imagenet" and mi.size == 224 and "7x7 stem" in mi.reason
    assert mi.mean == IMAGENET_MEAN and mi.std == IMAGENET_STD
    assert mi.default_families == ("rotation_45", "hue", "saturation", "blur")
    assert mi.default_images == 50
    seen = {}
    original = model_input.resolve_model

    def recording(*args, **kw):
        got = original(*args, **kw)
        got.backbone = seen["backbone"] = Recorder(got.backbone)
        return got

    monkeypatch.setattr(cli, "resolve_model", recording)  # the name the command calls
    out = tmp_path / "out"
    code, _ = _analyze([path, "--data", "shapes", "--images", 3, "--families", "hue", "--out", out,
                        *FAST])
    assert code == 0
    res = json.loads((out / "analysis.json").read_text())
    assert res["preprocessing"]["size"] == 224 and res["preprocessing"]["mean"] == list(IMAGENET_MEAN)
    batches = seen["backbone"].seen
    assert batches and all(tuple(b.shape[1:]) == (3, 224, 224) for b in batches)
    # the expected first batch, written out: resize [0, 1] pixels, hue at each ξ, then normalise
    test = load_dataset("shapes", "test")
    x = test.images[res["data"]["indices"]].float() / 255
    x = F.interpolate(x, size=(224, 224), mode="bilinear", align_corners=False, antialias=True).clamp(0, 1)
    xi = torch.tensor(res["orbits"]["families"]["hue"]["xi"])
    m, s = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    want = torch.stack([(AF.adjust_hue(x, torch.full((3,), float(v))) - m) / s for v in xi], 1)
    got = torch.cat(batches)[:9].reshape(3, 3, 3, 224, 224)
    assert (got - want).abs().max() < 1e-4
    # and not the wrong order (normalise, then the colour operation)
    wrong = torch.stack([AF.adjust_hue((x - m) / s, torch.full((3,), float(v))) for v in xi], 1)
    assert (got - wrong).abs().max() > 0.1
    assert res["tangent_metric"]["skipped"].startswith("the checkpoint holds no projection head")


def test_cifar_stem_checkpoint_file_native_size(tmp_path):
    torch.manual_seed(4)
    path = tmp_path / "cifar_resnet18.pth"
    torch.save(resnet18(width=0.125).state_dict(), path)
    mi = model_input.resolve_model(path, normalization="none", data="shapes")
    assert mi.kind == "native" and mi.size is None and mi.mean is None and mi.default_images == 200
    assert "overridden: none" in mi.reason
    mi = model_input.resolve_model(path, input_size=40, normalization="imagenet")
    assert mi.size == 40 and mi.mean == IMAGENET_MEAN and mi.data == "cifar10"


def test_checkpoint_file_of_a_run_with_both_head_inputs_and_predictor(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code, cap = _analyze([run_dir / "checkpoints" / "last.pt", "--families", "blur",
                          "--head-input", "both", "--predictor", "--no-tangents", "--out", out,
                          *FAST], capsys)
    assert code == 0, cap.err
    res = json.loads((out / "analysis.json").read_text())
    assert res["data"]["n_images"] == 64  # the default 200, capped by the run's 64 test images
    fam = res["orbits"]["families"]["blur"]
    last = ["head.3", "pred.3", "l2z/head.3", "l2z/pred.3"]
    assert all(p in fam["ratios"] for p in last) and "pred.4" not in fam["ratios"]
    md = (out / "report.md").read_text()
    summary = _table_after(md, "## Summary")
    assert [r[1] for r in summary] == last
    for r in summary:
        _close(r[2], fam["ratios"][r[1]]["compression"])
    # heads trained on raw z and fed z/||z|| are flagged, with their pairwise cosine from the JSON
    ood = fam["out_of_distribution"]
    assert [p for p in ood["points"] if p.startswith("l2z/")] == list(ood["points"])
    assert {"l2z/head.3", "l2z/pred.3"} <= set(ood["points"]) and "head.3" not in ood["points"]
    section = md[md.index("## blur"):]
    for p in ("l2z/head.3", "l2z/pred.3"):
        line = next(ln for ln in section.splitlines() if ln.startswith(f"- `{p}`: mean pairwise cosine"))
        e = ood["points"][p]
        _close(re.search(r"cosine (\S+ \[\S+, \S+\])", line).group(1), e["mean_pairwise_cosine"])
        _close(line.rsplit(": ", 1)[1], e["raw_input_mean_pairwise_cosine"])
    assert "out of distribution" in cap.out


def test_tangent_metric_tables_match_json(run_dir, tmp_path):
    out = tmp_path / "out"
    code, _ = _analyze([run_dir, "--images", 4, "--families", "hue", "--no-controls", "--out", out,
                        "--tangent-images", 2, "--tangent-random", 2, *FAST])
    assert code == 0
    res = json.loads((out / "analysis.json").read_text())
    tm = res["tangent_metric"]["families"]["hue"]
    proto = res["tangent_metric"]["protocol"]
    assert proto["n_images"] == 2 and res["data"]["tangent_indices"] == res["data"]["indices"][:2]
    assert proto["normalisation"]["mean"] == pytest.approx(res["preprocessing"]["mean"])
    assert proto["head"] == ["head"] and proto["families"] == ["hue"]
    md = (out / "report.md").read_text()
    png = out / "figures" / "tangent_spectra.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and "figures/tangent_spectra.png" in md
    rows = _table_after(md[md.index("## Tangent metric"):], "### hue")
    assert rows[0][0].startswith("G = J_h")
    q = tm["head_G"]
    assert float(rows[0][1]) == pytest.approx(q["tangent"]["median_log10"], rel=6e-4)
    assert float(rows[0][2]) == pytest.approx(q["random"]["median_log10"], rel=6e-4)
    _close(rows[0][3], q["ratio_ci"])


@pytest.mark.parametrize("argv, message", [
    (["--families", "rotation,warp"], "unknown augmentation family ['warp']"),
    (["--images", "1"], "--images: must be >= 2"),
    (["--range", "hue=0.4:-0.4"], "need LO < HI"),
    (["--head-input", "sphere"], "invalid choice: 'sphere'"),
])
def test_bad_arguments_exit_2(run_dir, argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        _analyze([run_dir, *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--images", "65"], "--images 65 exceeds the 64 images of shapes/test"),
    (["--families", "hue", "--range", "blur=0.5:1"], "--range names ['blur']"),
    (["--data", "cifar10", "--data-dir", "{empty}"], "CIFAR-10 not found under"),
    (["--level", "1.5"], "--level must lie in (0, 1)"),
])
def test_bad_values_exit_2_with_message(run_dir, tmp_path, extra, message, capsys):
    extra = [a.replace("{empty}", str(tmp_path)) for a in extra]
    code, cap = _analyze([run_dir, *extra, "--out", tmp_path / "o", *FAST], capsys)
    assert code == 2 and message in cap.err, cap.err
    assert not (tmp_path / "o" / "analysis.json").exists()


def test_missing_path_exit_2(tmp_path, capsys):
    code, cap = _analyze([tmp_path / "nope.pth"], capsys)
    assert code == 2 and "does not exist" in cap.err


def test_default_out_names():
    assert str(cli.default_out("x/dino_deitsmall16_pretrain_full_checkpoint.pth")) == \
        "analyze-out/dino_deitsmall16_pretrain_full_checkpoint"
    assert str(cli.default_out("checkpoint_0099.pth.tar")) == "analyze-out/checkpoint_0099"


def test_progress_counts_every_backbone_image(run_dir):
    from headgeom.orbits.pipeline import AnalysisOptions, run_analysis, select_images

    class Bar:
        def __init__(self, total):
            self.total, self.n, self.closed = total, 0, False

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    bars = []
    mi = model_input.resolve_model(run_dir)
    data = load_dataset("shapes", "test", n=64)
    idx = select_images(data, 4, 0)
    opts = AnalysisOptions(families=("hue", "blur"), steps=3, n_boot=20, controls=False,
                           tangents=False)
    res, figs = run_analysis(mi, data, idx, opts, progress=lambda t: bars.append(Bar(t)) or bars[-1])
    # hue's identity (0) is on the 3-step grid; blur's (σ = 0) is not: 4 clean anchors more
    assert bars[0].total == bars[0].n == 4 * 3 + 4 * (3 + 1) and bars[0].closed
    assert res["families"]["blur"]["anchor"].startswith("clean image")
    assert sorted(figs) == ["orbits_blur.png", "orbits_hue.png"]


def test_select_images_balanced_prefixes():
    from headgeom.orbits.pipeline import select_images

    data = load_dataset("shapes", "test", n=64)
    idx = select_images(data, 25, 7)
    assert len(set(idx.tolist())) == 25 and torch.equal(idx, select_images(data, 25, 7))
    counts = torch.bincount(data.labels[idx[:10]], minlength=10)
    assert counts.tolist() == [1] * 10  # every prefix of C images covers the C classes
    assert not torch.equal(idx, select_images(data, 25, 8))


def test_official_dino_vit_layout_end_to_end(tmp_path, capsys):
    """A synthetic DINO full checkpoint (official keys, weight-normed last layer): ImageNet
    preprocessing at the ViT's own side, the head's points and controls in the report."""
    from official_models import DDP, DINOHead, MultiCropWrapper, randomise_

    torch.manual_seed(0)
    nets = {name: randomise_(MultiCropWrapper(
        VisionTransformer(img_size=16, patch_size=4, embed_dim=64, depth=1, num_heads=1),
        DINOHead(64, 24, nlayers=2, hidden_dim=32, bottleneck_dim=8)), seed=i)
        for i, name in enumerate(("student", "teacher"))}
    path = tmp_path / "dino_deitsmall16_pretrain_full_checkpoint.pth"
    torch.save({"student": DDP(nets["student"]).state_dict(), "teacher": nets["teacher"].state_dict(),
                "epoch": 1}, path)
    out = tmp_path / "out"
    code, cap = _analyze([path, "--data", "shapes", "--images", 6, "--families", "rotation_45",
                          "--no-tangents", "--out", out, *FAST], capsys)
    assert code == 0, cap.err
    res = json.loads((out / "analysis.json").read_text())
    assert res["model"]["release"] == "dino_vit"
    pre = res["preprocessing"]
    assert pre["kind"] == "imagenet" and pre["size"] == 16 and pre["mean"] == list(IMAGENET_MEAN)
    assert "official ImageNet release 'dino_vit'" in pre["reason"]
    fam = res["orbits"]["families"]["rotation_45"]
    last = list(fam["ratios"])[-1]
    assert set(fam["controls"]) == {"fresh_head", "random_directions"}
    summary = _table_after((out / "report.md").read_text(), "## Summary")
    assert summary[0][1] == last
    _close(summary[0][2], fam["ratios"][last]["compression"])


def test_vit_backbone_side_and_kind(tmp_path):
    for side, patch, kind in ((16, 4, "native"), (112, 16, "imagenet")):
        path = tmp_path / f"vit{side}.pth"
        torch.save(VisionTransformer(img_size=side, patch_size=patch, embed_dim=64, depth=1,
                                     num_heads=1).state_dict(), path)
        mi = model_input.resolve_model(path, num_heads=1, normalization="none")
        assert (mi.kind, mi.size) == (kind, side)

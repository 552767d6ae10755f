"""evaluate_model / evaluate_run / `headgeom eval`: wiring, subsets, files and error paths.

The probes themselves are tested against independent references in test_eval_knn.py,
test_eval_linear_probe.py, test_eval_rankme.py and test_eval_rotation.py; here the sweep
must give exactly what those functions give on the features of each point.
"""

from __future__ import annotations

import argparse
import json

import pytest
import torch
from torch import nn

from headgeom.data import ImageDataset
from headgeom.eval.evaluate import EvalConfig, evaluate_model, subsample
from headgeom.eval.features import extract_features
from headgeom.eval.knn import knn_accuracy
from headgeom.eval.linear_probe import LinearProbeConfig, linear_probe_accuracy
from headgeom.eval.mlp_probe import MLPProbeConfig, mlp_probe_accuracy
from headgeom.eval.rankme import representation_stats
from headgeom.eval.rotation import rotation_probe
from headgeom.heads import head_from

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

FAST_PROBE = LinearProbeConfig(max_iter=100)
FAST_MLP = MLPProbeConfig(hidden=8, epochs=3, batch_size=16)


def coloured(n: int, seed: int, split: str, size: int = 8) -> ImageDataset:
    """3 classes told apart by a colour offset, plus noise and a bright top row."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 3
    x = torch.randint(40, 120, (n, 3, size, size), generator=g)
    x[torch.arange(n), labels] += 80
    x[:, :, 0, :] = 255
    return ImageDataset(x.to(torch.uint8), labels, ["r", "g", "b"], "coloured", split)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.AvgPool2d(2), nn.Flatten()), head_from("48-16-8:relu:bn")


def test_sweep_equals_the_probes_on_each_point():
    backbone, head = model()
    train, test = coloured(60, 0, "train"), coloured(30, 1, "test")
    mean, std = (0.4, 0.4, 0.4), (0.2, 0.2, 0.2)
    cfg = EvalConfig(k=(5, 20), probe=FAST_PROBE, rotation_train=40, mlp=True, mlp_probe=FAST_MLP)
    res = evaluate_model(backbone, {"head": head}, train, test, mean=mean, std=std, config=cfg)
    assert list(res["points"]) == ["z", "head.0", "head.1", "head.2", "head.3"]
    assert res["protocol"]["point_modules"]["head.1"] == "BatchNorm1d(16)"
    assert res["n_train"] == 60 and res["n_test"] == 30 and res["protocol"]["rotation_n_train"] == 40
    ftr = extract_features(backbone, train, head, mean=mean, std=std)
    fte = extract_features(backbone, test, head, mean=mean, std=std)
    rot = rotation_probe(backbone, subsample(train, 40, 2), test, head, config=FAST_PROBE,
                         mean=mean, std=std)
    for p, r in res["points"].items():
        assert r["dim"] == ftr[p].shape[1]
        knn = knn_accuracy(ftr[p], train.labels, fte[p], test.labels, k=(5, 20))
        assert r["knn_top1"] == {"5": knn[5], "20": knn[20]}
        lin = linear_probe_accuracy(ftr[p], train.labels, fte[p], test.labels, 3, FAST_PROBE)
        assert r["linear"] == lin
        assert r["mlp"] == mlp_probe_accuracy(ftr[p], train.labels, fte[p], test.labels, 3, FAST_MLP)
        assert r["rotation_linear"] == rot[p]
        assert r["stats"] == representation_stats(fte[p])
    # the colour offset is linearly visible in z; the bright top row gives the rotation away
    assert res["points"]["z"]["linear"]["test_top1"] == 1.0
    assert res["protocol"]["mlp_probe"] == {**FAST_MLP.to_dict(), "dtype": "float32"}
    assert res["points"]["z"]["rotation_linear"]["test_top1"] == 1.0
    json.dumps(res)  # JSON-able as it stands


def test_subsets_are_seeded_and_options_switch_parts_off():
    backbone, head = model()
    train, test = coloured(50, 0, "train"), coloured(20, 1, "test")
    a = subsample(train, 10, seed=3)
    assert len(a) == 10 and torch.equal(a.images, subsample(train, 10, seed=3).images)
    assert not torch.equal(a.labels, subsample(train, 10, seed=4).labels) or \
        not torch.equal(a.images, subsample(train, 10, seed=4).images)
    cfg = EvalConfig(k=3, linear=False, rotation=False, stats=False, max_train=12,
                     head_inputs=("raw", "l2"), points=("z", "l2z/head.3"))
    res = evaluate_model(backbone, head, train, test, config=cfg)
    assert res["n_train"] == 12 and list(res["points"]) == ["z", "l2z/head.3"]
    assert set(res["points"]["z"]) == {"dim", "knn_top1"} and res["protocol"]["k"] == (3,)
    assert res["protocol"]["point_modules"]["l2z/head.3"] == "Linear(16->8)"


def test_error_paths():
    backbone, head = model()
    train, test = coloured(20, 0, "train"), coloured(10, 1, "test")
    with pytest.raises(ValueError, match="k = 200 exceeds the 20 training images"):
        evaluate_model(backbone, head, train, test)
    other = ImageDataset(test.images, test.labels, ["x", "y", "z"], "other", "test")
    with pytest.raises(ValueError, match="different classes"):
        evaluate_model(backbone, head, train, other, config=EvalConfig(k=3))
    small = coloured(10, 2, "test", size=4)
    with pytest.raises(ValueError, match="differ in size"):
        evaluate_model(backbone, head, train, small, config=EvalConfig(k=3))
    with pytest.raises(ValueError, match=r"unknown feature point\(s\) \['pred.0'\]"):
        evaluate_model(backbone, head, train, test, config=EvalConfig(k=3, points=("pred.0",)))
    with pytest.raises(ValueError, match="max_train must be None or an int >= 2"):
        EvalConfig(max_train=1)
    wide = ImageDataset(torch.zeros(4, 3, 8, 6, dtype=torch.uint8), torch.tensor([0, 1, 2, 0]),
                        ["r", "g", "b"], "w", "train")
    with pytest.raises(ValueError, match="rotation probe needs square images"):
        evaluate_model(nn.Flatten(), None, wide, wide,
                       config=EvalConfig(k=2, knn=False, linear=False, stats=False))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    train_mod = pytest.importorskip("headgeom.train")
    out = tmp_path_factory.mktemp("run") / "r"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    cfg = train_mod.TrainConfig(
        method="simsiam", backbone="resnet18", backbone_options={"width": 0.0625},
        head="d-16-16:relu:bn", predictor="d-8-16:relu", data="shapes",
        data_options={"n": 40}, epochs=1, batch_size=20, max_steps=1, progress=False,
        device="cpu")
    try:
        train_mod.train(cfg, out)
    finally:
        torch.set_num_threads(before)
    return out


def test_evaluate_run_and_cli_write_results_in_the_run_dir(tiny_run, capsys):
    from headgeom.eval import cli as eval_cli
    from headgeom.train import TrainConfig, build_method_from_config, load_checkpoint

    parser = argparse.ArgumentParser(prog="headgeom")
    eval_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", str(tiny_run), "--k", "5", "--predictor", "--device", "cpu",
                              "--random-baseline", "--rotation-train", "10", "--max-test", "12",
                              "--probe-max-iter", "20", "--mlp", "--mlp-hidden", "8", "--mlp-epochs", "2",
                              "--quiet"])
    assert args.func(args) == 0
    res = json.loads((tiny_run / "eval.json").read_text())
    printed = capsys.readouterr().out
    assert "head.3" in printed and "random initialisation" in printed and " MLP " in printed
    assert {"linear", "mlp"} <= set(res["trained"]["points"]["head.3"])
    assert {k: res["trained"]["protocol"]["mlp_probe"][k] for k in ("hidden", "epochs", "seed")} == {
        "hidden": 8, "epochs": 2, "seed": 0}
    assert res["step"] == 1 and res["method"] == "simsiam"
    pts = ["z", "head.0", "head.1", "head.2", "head.3", "pred.0", "pred.1", "pred.2"]
    assert list(res["trained"]["points"]) == pts and list(res["random_init"]["points"]) == pts
    assert res["trained"]["n_test"] == 12 and res["trained"]["protocol"]["mean"] is not None
    # the trained point z is the checkpoint's backbone, not a fresh one
    tc = TrainConfig.from_dict(json.loads((tiny_run / "config.json").read_text())["config"])
    method = build_method_from_config(tc)
    method.load_state_dict(load_checkpoint(tiny_run / "checkpoints" / "last.pt")["method"])
    from headgeom.data import load_dataset
    train = load_dataset("shapes", "train", **tc.data_options)
    test = subsample(load_dataset("shapes", "test", **tc.data_options), 12, 1)
    mean, std = res["trained"]["protocol"]["mean"], res["trained"]["protocol"]["std"]
    ftr = extract_features(method.backbone, train, mean=mean, std=std)["z"]
    fte = extract_features(method.backbone, test, mean=mean, std=std)["z"]
    assert res["trained"]["points"]["z"]["knn_top1"]["5"] == knn_accuracy(
        ftr, train.labels, fte, test.labels, k=5)[5]


def test_cli_errors(tmp_path):
    from headgeom.eval import cli as eval_cli

    parser = argparse.ArgumentParser(prog="headgeom")
    eval_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", str(tmp_path / "missing")])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        args.func(args)
    args = parser.parse_args(["eval", str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="config.json not found"):
        args.func(args)


def test_cli_points_option(tiny_run):
    from headgeom.eval import cli as eval_cli

    parser = argparse.ArgumentParser(prog="headgeom")
    eval_cli.add_parser(parser.add_subparsers(dest="command"))
    out = tiny_run / "eval_points.json"
    args = parser.parse_args(["eval", str(tiny_run), "--points", "z, head.3", "--k", "3",
                              "--no-linear", "--no-rotation", "--device", "cpu", "--quiet",
                              "--out", str(out)])
    assert args.func(args) == 0
    assert list(json.loads(out.read_text())["trained"]["points"]) == ["z", "head.3"]
    bad = parser.parse_args(["eval", str(tiny_run), "--points", "head.9", "--device", "cpu"])
    with pytest.raises(ValueError, match=r"unknown feature point\(s\) \['head.9'\]"):
        bad.func(bad)


def test_resized_backbone_sees_the_training_view_size():
    from headgeom.eval.evaluate import _Resized

    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(tuple(x.shape[-2:]))
            return x.mean(dim=(2, 3))

    x = torch.rand(2, 3, 8, 8)
    out = _Resized(Probe(), 4)(x)
    assert seen == [(4, 4)]
    # bilinear resizing with weights summing to one keeps a constant image constant
    const = torch.full((1, 3, 8, 8), 0.3)
    torch.testing.assert_close(_Resized(Probe(), 4)(const), torch.full((1, 3), 0.3))
    assert out.shape == (2, 3) and _Resized(Probe(), 8)(x).shape == (2, 3) and seen[-1] == (8, 8)

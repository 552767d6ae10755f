"""`headgeom train` through a throwaway parser (the shared cli.py wires the same add_parser),
and a real method (simclr / byol on a ResNet-18 at width 1/8, 16 px shapes) through the loop."""
from __future__ import annotations

import argparse
import json

import pytest
import torch

from headgeom.train import TrainConfig, load_checkpoint, train
from headgeom.train.cli import add_parser, config_from_args

TINY = ("--method simclr --backbone resnet18 --width 0.125 --head d-32-16 --data shapes "
        "--data-option n=32 --data-option size=16 --batch-size 8 --device cpu --quiet").split()


def parse(argv):
    p = argparse.ArgumentParser(prog="headgeom")
    add_parser(p.add_subparsers(dest="command"))
    return p.parse_args(["train", *argv])


def test_parser_options_become_the_config(tmp_path):
    args = parse([*TINY, "--epochs", "3", "--max-steps", "5", "--seed", "4", "--optimizer", "lars",
                  "--lr", "0.3", "--weight-decay", "1e-6", "--warmup-epochs", "0.5", "--schedule", "constant",
                  "--method-option", "temperature=0.2", "--backbone-option", "zero_init_residual=true",
                  "--pseudo-collapse", "0.1", "--out", str(tmp_path / "r")])
    c = config_from_args(args)
    assert c == TrainConfig(method="simclr", backbone="resnet18",
                            backbone_options={"zero_init_residual": True, "width": 0.125}, head="d-32-16",
                            pseudo_collapse=0.1, method_options={"temperature": 0.2}, data="shapes",
                            data_options={"n": 32, "size": 16}, epochs=3, max_steps=5, batch_size=8, seed=4,
                            optimizer="lars", lr=0.3, weight_decay=1e-6, warmup_epochs=0.5, schedule="constant",
                            device="cpu", progress=False)
    assert args.func.__name__ == "run" and not args.resume
    with pytest.raises(ValueError, match="needs --method --backbone --data"):
        config_from_args(parse(["--out", str(tmp_path)]))
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        config_from_args(parse(["--out", str(tmp_path / "none"), "--resume"]))
    with pytest.raises(SystemExit):
        parse([*TINY, "--out", "x", "--method-option", "novalue"])
    with pytest.raises(SystemExit):
        parse([*TINY, "--out", "x", "--optimizer", "rmsprop"])


def test_cli_run_writes_the_run_directory_and_resumes(tmp_path, capsys):
    run_dir = tmp_path / "run"
    args = parse([*TINY, "--epochs", "2", "--max-steps", "2", "--out", str(run_dir)])
    assert args.func(args) == 0
    assert "stopped at step 2" in capsys.readouterr().out
    meta = json.loads((run_dir / "config.json").read_text())
    assert meta["config"]["method"] == "simclr" and meta["steps_per_epoch"] == 4
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2] and all(isinstance(r["loss"], float) for r in lines)
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 2
    # a fresh start into a used directory is refused; --resume continues with the stored settings
    again = parse([*TINY, "--out", str(run_dir)])
    assert again.func(again) == 2 and "--resume" in capsys.readouterr().err
    resumed = parse(["--out", str(run_dir), "--resume", "--max-steps", "3"])
    assert resumed.func(resumed) == 0
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3]
    with pytest.raises(ValueError, match="lr: stored 0.06, given 0.5"):
        train(config_from_args(parse(["--out", str(run_dir), "--resume", "--lr", "0.5"])), run_dir, resume=True)


def test_cli_tracking_writes_geometry_metrics_and_figures(tmp_path, capsys):
    run_dir = tmp_path / "tracked"
    args = parse([*TINY, "--max-steps", "2", "--track-every", "2", "--probe-size", "8",
                  "--track-block-samples", "2", "--out", str(run_dir)])
    assert args.func(args) == 0
    lines = {r["step"]: r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}
    assert sorted(lines) == [0, 1, 2] and "loss" in lines[2] and "loss" not in lines[0]
    for step in (0, 2):
        assert lines[step]["heff_ambient_mean_lambda_max"] >= lines[step]["heff_ambient_mean_lambda_min"]
    assert "tracking figure(s)" in capsys.readouterr().out
    assert list((run_dir / "figures" / "tracking").glob("*.png"))
    meta = json.loads((run_dir / "tracking.json").read_text())
    assert meta["reading"] == "ambient"


def test_real_byol_resumes_bit_identically(tmp_path):
    """BYOL: BatchNorm statistics, EMA target with the cosine momentum schedule, LARS."""
    c = TrainConfig(method="byol", backbone="resnet18", backbone_options={"width": 0.125}, head="d-32-16",
                    predictor="16-32-16", data="shapes", data_options={"n": 16, "size": 16}, epochs=2,
                    batch_size=8, optimizer="lars", lr=0.5, weight_decay=1e-5, progress=False, device="cpu")
    train(c, tmp_path / "full")
    train(TrainConfig(**{**c.to_dict(), "max_steps": 3}), tmp_path / "split")  # mid-epoch
    train(c, tmp_path / "split", resume=True)
    a = load_checkpoint(tmp_path / "full" / "checkpoints" / "last.pt")["method"]
    b = load_checkpoint(tmp_path / "split" / "checkpoints" / "last.pt")["method"]
    assert a.keys() == b.keys() and any("target" in k for k in a)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    read = lambda d: (tmp_path / d / "metrics.jsonl").read_text()  # noqa: E731
    assert read("full") == read("split")

"""2-process gloo DDP (torch.multiprocessing.spawn) against one process with the same global batch.

Every process augments the same global batch (headgeom.train.ddp). With a loss that is a mean
over samples and no BatchNorm/dropout, DDP's averaged gradient equals the single-process one.
The batch-coupled methods (SimCLR, VICReg, Barlow Twins), DINO (centre all-reduced) and a
BatchNorm backbone and head with ``sync_bn`` see the global batch, so they match too: the logged
losses of every step and every parameter and buffer after two updates agree to float32
round-off, and so do the head/backbone gradient norms rank 0 logs (taken after the all-reduce: one
process's local gradient would differ). Control: the BatchNorm case with ``sync_bn=False`` does not match.
"""
from __future__ import annotations

import json
import os
import socket
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from torch import nn

from headgeom.methods import build_method, preserve_buffers
from headgeom.train import load_checkpoint, train
from headgeom.train.grad_norms import GRAD_NORM_KEYS
from test_train_loop import cfg, tiny

# name -> (method, head, backbone with BatchNorm, sync_bn, method options)
CASES = {
    "simclr": ("simclr", "d-16-8", False, True, {}),
    "vicreg": ("vicreg", "d-16-8", False, True, {}),
    "barlow_twins": ("barlow_twins", "d-16-8", False, True, {}),
    "dino": ("dino", "d-16-16:gelu:dino=8", False, True, {"n_local_crops": 2}),
    "bn_sync": ("simclr_oneway", "d-16-8:bn", True, True, {}),
    "bn_no_sync": ("simclr_oneway", "d-16-8:bn", True, False, {}),  # control
}


class TinyBackbone(nn.Module):
    """(N, 3, H, W) -> (N, 8), with or without BatchNorm."""

    feature_dim = 8

    def __init__(self, bn: bool) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.BatchNorm2d(8) if bn else nn.Identity(),
                                 nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x):
        return self.net(x)


def case_config(name: str):
    method, head, bn, sync, options = CASES[name]
    return cfg(method=method, backbone="tiny_bn" if bn else "tiny", head=head, method_options=options,
               sync_bn=sync, optimizer="sgd", epochs=1, max_steps=2, warmup_epochs=0.0,
               track_every=1 if name == "bn_sync" else 0, probe_size=16)


def probe_tracker(step, method, probe):
    """The loss of the probe batch through the bare method: on rank 0 only, in train mode with
    BatchNorm; it must run locally (no collective, else rank 0 would wait for rank 1 forever)."""
    with torch.no_grad(), preserve_buffers(method):
        return {"probe_loss": float(method(probe)["loss"])}


def build_tiny(config):
    return build_method(config.method, backbone=TinyBackbone(config.backbone == "tiny_bn"), head=config.head,
                        **config.method_options)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    try:
        train(cfg(method_options={"separable": True}, optimizer="sgd", epochs=2), out, build_method=tiny)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_two_process_gloo_matches_single_process(tmp_path):
    single, multi = tmp_path / "single", tmp_path / "ddp"
    train(cfg(method_options={"separable": True}, optimizer="sgd", epochs=2), single, build_method=tiny)
    mp.spawn(_worker, args=(2, _free_port(), str(multi)), nprocs=2, join=True)
    a = load_checkpoint(single / "checkpoints" / "last.pt")
    b = load_checkpoint(multi / "checkpoints" / "last.pt")
    assert a["step"] == b["step"] == 8
    for k, v in a["method"].items():
        if v.is_floating_point():
            torch.testing.assert_close(b["method"][k], v, rtol=1e-4, atol=1e-5, msg=k)
    assert torch.equal(a["aug_generator"], b["aug_generator"])  # same augmentation stream
    la = [json.loads(x) for x in (single / "metrics.jsonl").read_text().splitlines()]
    lb = [json.loads(x) for x in (multi / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in la] == [r["step"] for r in lb]
    for ra, rb in zip(la, lb):
        assert abs(ra["loss"] - rb["loss"]) < 1e-5
        for key in GRAD_NORM_KEYS:  # the global batch's gradient, logged once (rank 0)
            assert rb[key] == pytest.approx(ra[key], rel=1e-4), (key, ra[key], rb[key])
    assert json.loads((multi / "config.json").read_text())["processes"] == 2
    # and the DDP run moved: it is not the initialisation
    torch.manual_seed(cfg().seed)  # train() seeds the initialisation the same way
    init = tiny(cfg(method_options={"separable": True})).state_dict()
    assert not torch.allclose(init["skip.weight"], b["method"]["skip.weight"])


def _case_worker(rank: int, world: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    # joined here with a short timeout, so a collective that only one process reaches fails fast
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        for name in CASES:
            train(case_config(name), os.path.join(out, name), build_method=build_tiny, tracker=probe_tracker)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.fixture(scope="module")
def case_runs(tmp_path_factory):
    """{name: (single-process run dir, 2-process run dir)} for every case in CASES."""
    root = tmp_path_factory.mktemp("ddp_cases")
    mp.spawn(_case_worker, args=(2, _free_port(), str(root / "ddp")), nprocs=2, join=True)
    torch.set_num_threads(1)
    for name in CASES:
        train(case_config(name), root / "single" / name, build_method=build_tiny, tracker=probe_tracker)
    return {name: (root / "single" / name, root / "ddp" / name) for name in CASES}


def _losses(run, key="loss"):
    return [r[key] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if key in r]


def _state(run):
    ck = load_checkpoint(run / "checkpoints" / "last.pt")
    assert ck["step"] == 2
    return {k: v for k, v in ck["method"].items() if isinstance(v, torch.Tensor) and v.is_floating_point()}


@pytest.mark.parametrize("name", ["simclr", "vicreg", "barlow_twins", "dino", "bn_sync"])
def test_two_processes_match_one_on_the_global_batch(case_runs, name):
    single, multi = case_runs[name]
    la, lb = _losses(single), _losses(multi)
    assert len(la) == len(lb) == 2
    for a, b in zip(la, lb):
        assert abs(a - b) <= 1e-5 * max(1.0, abs(a)), (la, lb)
    for key in GRAD_NORM_KEYS:
        ga, gb = _losses(single, key), _losses(multi, key)
        assert len(ga) == len(gb) == 2 and gb == pytest.approx(ga, rel=1e-4), (key, ga, gb)
    a, b = _state(single), _state(multi)
    assert set(a) == set(b)
    for k, v in a.items():
        torch.testing.assert_close(b[k], v, rtol=1e-4, atol=1e-5, msg=k)
    if name == "dino":
        assert a["centering.center"].abs().max() > 0  # the centre moved, and matches
    if name == "bn_sync":
        assert any("running_mean" in k for k in a)  # BatchNorm in backbone and head
        pa, pb = _losses(single, "probe_loss"), _losses(multi, "probe_loss")  # rank 0's local tracker
        assert len(pa) == len(pb) == 3  # steps 0, 1, 2
        for x, y in zip(pa, pb):
            assert abs(x - y) <= 1e-5 * max(1.0, abs(x)), (pa, pb)
    torch.manual_seed(3)  # train() seeds the initialisation with config.seed
    init = build_tiny(case_config(name)).state_dict()
    moved = [k for k in a if k in init and not torch.allclose(init[k], b[k])]
    assert moved, "the 2-process run did not change any parameter"


def test_without_sync_bn_the_batchnorm_case_differs(case_runs):
    """Control: per-process BatchNorm statistics change the loss, so the match above is not vacuous."""
    single, multi = case_runs["bn_no_sync"]
    la, lb = _losses(single), _losses(multi)
    assert abs(la[0] - lb[0]) > 1e-3, (la, lb)


def test_sync_bn_flag_and_config():
    """--no-sync-bn turns the global-batch BatchNorm off; it is on by default; config checks the type."""
    import argparse

    from headgeom.train import TrainConfig
    from headgeom.train.cli import add_parser, config_from_args

    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers(dest="command"))
    base = ["train", "--method", "simclr", "--backbone", "resnet18", "--data", "shapes", "--out", "x"]
    assert config_from_args(p.parse_args(base)).sync_bn is True
    assert config_from_args(p.parse_args([*base, "--no-sync-bn"])).sync_bn is False
    with pytest.raises(ValueError, match="sync_bn"):
        TrainConfig(method="simclr", sync_bn="yes")

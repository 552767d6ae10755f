"""2-process gloo DDP (torch.multiprocessing.spawn) against one process with the same global batch.

With a loss that is a mean over samples and no BatchNorm/dropout, DDP's averaged gradient equals
the single-process one, and every process augments the same global batch (headgeom.train.ddp),
so parameters and logged losses match to float32 round-off.
"""
from __future__ import annotations

import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from headgeom.train import load_checkpoint, train
from test_train_loop import cfg, tiny


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
    assert json.loads((multi / "config.json").read_text())["processes"] == 2
    # and the DDP run moved: it is not the initialisation
    torch.manual_seed(cfg().seed)  # train() seeds the initialisation the same way
    init = tiny(cfg(method_options={"separable": True})).state_dict()
    assert not torch.allclose(init["skip.weight"], b["method"]["skip.weight"])

"""The GPU paths of headgeom.train (bf16 autocast, channels_last, data and augmentation on the
device, resume on CUDA). Skipped without a CUDA device; ``benchmarks/gpu_checks.sh`` runs them
on a lent GPU. Each compares against the same run in float32 / contiguous memory or against an
uninterrupted run, so none can pass by construction."""
import json

import pytest
import torch

from headgeom.methods import METHODS
from headgeom.train import TrainConfig, load_checkpoint, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

HEADS = {"dino": "d-64-64:gelu:bn:dino=32", "simsiam": "d-64-64:bn:last=bn", "byol": "d-64-64:bn"}


def cfg(method: str, **kw) -> TrainConfig:
    base = dict(method=method, backbone="resnet18", backbone_options={"width": 0.125},
                head=HEADS.get(method, "d-64-64:bn"), data="shapes", data_options={"n": 256, "size": 32},
                epochs=2, batch_size=64, lr=0.03, device="cuda", progress=False, seed=0)
    if method in ("simsiam", "byol"):
        base["predictor"] = "d-32-64:bn"
    if method == "dino":
        base["method_options"] = {"n_local_crops": 2, "teacher_temp": 0.04, "teacher_temp_warmup": 0.0}
    base.update(kw)
    return TrainConfig(**base)


def losses(run) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_bf16_channels_last_run_is_finite_and_tracks_float32(tmp_path, method):
    fast = train(cfg(method), tmp_path / "fast")
    exact = train(cfg(method, bf16=False, channels_last=False), tmp_path / "exact")
    assert fast["complete"] and exact["complete"]
    a, b = losses(tmp_path / "fast"), losses(tmp_path / "exact")
    assert len(a) == len(b) == 8 and all(map(lambda v: v == v and abs(v) < 1e6, a))
    # bf16 keeps 8 bits of mantissa: the first step's loss (same weights, same views) agrees to
    # bf16 precision, later ones drift apart but stay close
    assert a[0] == pytest.approx(b[0], rel=2e-2, abs=2e-2)


def test_resume_on_cuda_matches_the_uninterrupted_run(tmp_path):
    full, split = tmp_path / "full", tmp_path / "split"
    train(cfg("simclr", bf16=False), full)
    train(cfg("simclr", bf16=False, max_steps=5), split)
    train(cfg("simclr", bf16=False), split, resume=True)
    a = load_checkpoint(full / "checkpoints" / "last.pt")["method"]
    b = load_checkpoint(split / "checkpoints" / "last.pt")["method"]
    for k in a:  # same kernels, same RNG states: equal up to non-deterministic cuDNN reductions
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)

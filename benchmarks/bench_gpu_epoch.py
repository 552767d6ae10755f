"""Benchmark (GPU): seconds per epoch of SimCLR + CIFAR ResNet-18 on CIFAR-10 (the training
stack's GPU throughput goal: at most 5 s per epoch), through ``headgeom.train.train`` as a user runs it.

    python benchmarks/bench_gpu_epoch.py --data-dir DIR [--epochs 3] [--batch-size 512]
        [--width 1.0] [--no-bf16] [--no-channels-last] [--device cuda] [--json OUT]

Settings: symmetric NT-Xent (SimCLR), full-width CIFAR ResNet-18 (3×3 stem, no max-pool), the
SimCLR v1 head d-d-128, batch 512, two 32-px views per image from SimCLR's CIFAR recipe, SGD
(lr 0.06 · B/128 as lightly's CIFAR-10 benchmark, momentum 0.9, wd 5e-4), cosine schedule,
bf16 autocast and channels_last on CUDA. The whole training set and every augmentation stay on
the device (``train`` moves the uint8 images there once); one metrics line per epoch, a
checkpoint per epoch (written by a background thread, as in every run).

Reported: seconds per epoch = steps_per_epoch · B / images_per_s, where images_per_s is
``done.json``'s (every step after the first, so cuDNN autotuning and lazy initialisation are
left out; the per-epoch checkpoints are in). Goal: ≤ 5 s per epoch on one H200 (lightly's
published CIFAR-10 benchmark: 331 min for 800 epochs ≈ 25 s per epoch, on other hardware).

Without a GPU (``--device cpu``) the script runs the same code path, which is how the test
suite checks it; the figure then means nothing for the goal.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def gpu_config(data_dir: str | None, epochs: int, batch_size: int, width: float, bf16: bool,
               channels_last: bool, device: str, data: str = "cifar10",
               data_options: dict[str, Any] | None = None):
    """The TrainConfig of the benchmark (see the module docstring)."""
    from headgeom.train import TrainConfig

    return TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": width},
                       data=data, data_dir=data_dir, data_options=dict(data_options or {}),
                       epochs=epochs, batch_size=batch_size, optimizer="sgd", lr=0.06 * batch_size / 128,
                       momentum=0.9, weight_decay=5e-4, schedule="cosine", log_every=10**9,
                       device=device, bf16=bf16, channels_last=channels_last, progress=False)


def seconds_per_epoch(done: dict[str, Any], steps_per_epoch: int, batch_size: int) -> float:
    """steps_per_epoch · B / images_per_s (the throughput excludes the first step)."""
    ips = done.get("images_per_s")
    if not ips:
        raise ValueError("the run took fewer than two steps, so it has no throughput; use more epochs")
    return steps_per_epoch * batch_size / ips


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="folder holding cifar-10-batches-bin or -py")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--width", type=float, default=1.0, help="ResNet-18 width multiplier")
    p.add_argument("--no-bf16", action="store_true")
    p.add_argument("--no-channels-last", action="store_true")
    p.add_argument("--device", default="cuda")
    p.add_argument("--shapes", type=int, default=0,
                   help="use N procedurally generated `shapes` images instead of CIFAR-10 (smoke runs)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from headgeom.io import atomic_write_json
    from headgeom.train import train

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("bench_gpu_epoch: no CUDA device here; this benchmark needs a GPU (or pass --device cpu "
                 "for a smoke run whose figure means nothing)")
    data, options = ("shapes", {"n": args.shapes}) if args.shapes else ("cifar10", {})
    if data == "cifar10" and not args.data_dir:
        sys.exit("bench_gpu_epoch: give --data-dir (the folder holding cifar-10-batches-bin or -py)")
    config = gpu_config(args.data_dir, args.epochs, args.batch_size, args.width, not args.no_bf16,
                        not args.no_channels_last, args.device, data, options)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as run:
        done = train(config, run)
        steps_per_epoch = json.loads((Path(run) / "config.json").read_text())["steps_per_epoch"]
    spe = seconds_per_epoch(done, steps_per_epoch, args.batch_size)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"
    result = {"device": name, "torch": torch.__version__, "config": config.to_dict(), "done": done,
              "steps_per_epoch": steps_per_epoch, "seconds_per_epoch": spe,
              "wall_s": time.perf_counter() - t0}
    print(f"SimCLR ResNet-18 (width {args.width}), batch {args.batch_size}, {data}: {spe:.2f} s per epoch "
          f"({done['images_per_s']:.0f} images/s) on {name}; bf16 {config.bf16}, channels_last "
          f"{config.channels_last}; goal <= 5 s per epoch on one H200")
    if args.json:
        atomic_write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()

"""Benchmark: CPU training throughput of SimCLR + CIFAR ResNet-18 through headgeom.train.train
against a bare PyTorch loop timed in the same run.

    python benchmarks/bench_train.py [--data-dir DIR] [--widths 0.25,0.5] [--full-width]
        [--batch-size 256] [--steps 8] [--warmup 2] [--repeats 4] [--threads N]
        [--track-periods 195,39] [--no-tracking] [--json OUT]

DIR holds ``cifar-10-batches-bin`` (real CIFAR-10); without it the embedded ``shapes`` data set
is generated (one epoch's worth, so no epoch boundary falls inside the timed window).

Both loops train the same model (``headgeom.backbones`` ResNet-18 at the width + the SimCLR v1
head d-d-128:relu, same seed, so the same initial weights), each view through the backbone
separately (per-view BatchNorm, as headgeom's methods), on the same 2-view SimCLR CIFAR recipe
(crop (0.08, 1), flip, jitter (0.4, 0.4, 0.4, 0.1) p 0.8, grayscale 0.2, normalise) built from the
same batched ops of ``headgeom.augment.random_ops``, with symmetric NT-Xent (T = 0.5, written
here as a cross-entropy) and SGD (lr 0.06, momentum 0.9, wd 5e-4 off biases and norms). The bare
loop has no schedule, logging, checkpoints or checks; headgeom's is ``train()`` itself (data
permutation, on-device augmentation, method, cosine schedule, metrics.jsonl line every step, the
non-finite check, progress bar off).

Timing: a stamp at the start of every training forward (a forward pre-hook on the method for
headgeom; the tracker's no-grad forwards are not stamped); images/s = steps · batch / (stamp[W+S]
- stamp[W]) over S full iterations after W warm-up iterations. The window leaves out the final
step's checkpoint (the loop writes one per epoch, i.e. once per 195 steps at batch 256; done.json's
own images/s, which includes it, is kept in the JSON). Each stamp also reads the process CPU
time, so the same window gives images per CPU second, steadier than wall time on a shared
machine (with ``--threads 1`` it counts the work and not the waiting). Runs are interleaved:
repeat r runs [bare, headgeom, headgeom+tracking], in reverse order on odd r, so load changes
weigh on all of them and, over an even number of repeats, a steady drift of the load favours
neither loop. Ratios are headgeom/bare within a repeat; the table gives medians over repeats.

Tracking: ``GeometryTracker(every=K, reading, block_samples)`` exactly as ``headgeom train
--track-every K`` builds it (TrainConfig defaults: probe 256, ambient reading, H_eff blocks of 32
probe samples). Tracking is off by default (TrainConfig.track_every = 0); the experiments track
once per epoch in their paper presets (C8: K = 195 at batch 256, the collapse grid and ablation
K = 97 at batch 512) and every 39 steps in their small presets, hence ``--track-periods 195,39``.
The tracked run uses K = S (one call inside the window; the loop's extra call at step 0 falls
before it); per-call seconds are timed around each call; the amortised overhead at period K is
c / (K · t_step + c), the fraction of wall (or CPU) time spent tracking.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.augment.random_ops import (ColorJitter, Compose, Normalize, RandomGrayscale,
                                         RandomHorizontalFlip, RandomResizedCrop)
from headgeom.backbones import get_backbone
from headgeom.data import dataset_stats, load_dataset
from headgeom.heads import ProjectionHead, get_head_spec
from headgeom.io import atomic_write_json
from headgeom.train import TrainConfig, build_method_from_config, train

Clock = Callable[[], float]
TEMPERATURE, LR, MOMENTUM, WEIGHT_DECAY = 0.5, 0.06, 0.9, 5e-4


# ----------------------------------------------------------------------------- the bare loop
class BareSimCLR(nn.Module):
    """ResNet-18 (width) + SimCLR v1 head d-d-128 (ReLU, biases): views -> [(N, 128)] per view."""

    def __init__(self, width: float) -> None:
        super().__init__()
        self.backbone = get_backbone("resnet18", width=width)
        d = self.backbone.feature_dim
        self.projector = ProjectionHead(get_head_spec("simclr", in_dim=d, hidden_dim=d, out_dim=128))

    def forward(self, views: list[Tensor]) -> list[Tensor]:
        return [self.projector(self.backbone(v)) for v in views]  # per-view BatchNorm statistics


def nt_xent_ce(a: Tensor, b: Tensor, temperature: float = TEMPERATURE) -> Tensor:
    """Symmetric NT-Xent as SimCLR's code writes it: cross-entropy over the 2N x 2N cosine
    similarities / T with the diagonal masked out and the partner view (r ± N) as the label."""
    n = a.shape[0]
    z = F.normalize(torch.cat([a, b]), dim=1)
    sim = (z @ z.T / temperature).masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), -math.inf)
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(sim, labels)


def bare_view(size: int, mean: tuple[float, ...], std: tuple[float, ...]) -> Compose:
    """The SimCLR CIFAR view (Chen et al. 2020, B.9) from headgeom's batched ops, normalised last."""
    return Compose((RandomResizedCrop(size, scale=(0.08, 1.0)), RandomHorizontalFlip(0.5),
                    ColorJitter(0.4, 0.4, 0.4, 0.1, p=0.8), RandomGrayscale(0.2), Normalize(mean, std)))


def sgd(model: nn.Module) -> torch.optim.SGD:
    """SGD with momentum; weight decay on >= 2-D weights only (not biases or norm parameters)."""
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and not n.endswith(".bias")]
    keep = [p for n, p in model.named_parameters() if p.ndim <= 1 or n.endswith(".bias")]
    return torch.optim.SGD([{"params": decay, "weight_decay": WEIGHT_DECAY},
                            {"params": keep, "weight_decay": 0.0}], lr=LR, momentum=MOMENTUM)


def throughput(stamps: list[float], warmup: int, steps: int, batch: int) -> float:
    """images/s over the ``steps`` iterations after ``warmup``: stamps are taken at the start of
    every iteration's forward, so stamp[W + S] - stamp[W] spans S whole iterations."""
    if len(stamps) < warmup + steps + 1:
        raise ValueError(f"need {warmup + steps + 1} forward stamps (warm-up {warmup} + {steps} steps + 1), "
                         f"got {len(stamps)}")
    return steps * batch / (stamps[warmup + steps] - stamps[warmup])


def bare_loop(images: Tensor, mean: tuple[float, ...], std: tuple[float, ...], width: float, batch: int,
              steps: int, warmup: int, seed: int = 0, clock: Clock = time.perf_counter,
              cpu_clock: Clock = time.process_time) -> dict[str, Any]:
    """Plain PyTorch SimCLR on ``images`` (N, 3, H, W) uint8: W + S + 1 iterations, no records.

    Returns {"images_per_s", "images_per_cpu_s" (the same over process CPU seconds), "losses"
    (floats, read after the run), "stamps"}.
    """
    torch.manual_seed(seed)
    model = BareSimCLR(width).train()
    opt = sgd(model)
    view = bare_view(images.shape[-1], mean, std)
    data_gen, aug_gen = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 1)
    n_per_epoch = images.shape[0] // batch
    stamps, cpu_stamps, losses, perm = [], [], [], None
    for step in range(warmup + steps + 1):
        if step % n_per_epoch == 0:
            perm = torch.randperm(images.shape[0], generator=data_gen)
        pos = step % n_per_epoch
        x = images[perm[pos * batch:(pos + 1) * batch]].float().div_(255)
        views = [view(x, aug_gen), view(x, aug_gen)]
        stamps.append(clock())
        cpu_stamps.append(cpu_clock())
        u1, u2 = model(views)
        loss = nt_xent_ce(u1, u2)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return {"images_per_s": throughput(stamps, warmup, steps, batch),
            "images_per_cpu_s": throughput(cpu_stamps, warmup, steps, batch),
            "losses": [float(v) for v in losses], "stamps": stamps}


# ----------------------------------------------------------------------------- headgeom's loop
class TimedTracker:
    """Wraps a tracker; records the seconds of every call (its state_dict, if any, passes through)."""

    def __init__(self, tracker: Any, clock: Clock = time.perf_counter, cpu_clock: Clock = time.process_time) -> None:
        self.tracker, self.clock, self.cpu_clock, self.seconds, self.cpu_seconds = tracker, clock, cpu_clock, [], []
        if hasattr(tracker, "state_dict"):  # the loop checkpoints a stateful tracker (update sizes)
            self.state_dict, self.load_state_dict = tracker.state_dict, tracker.load_state_dict

    def __call__(self, step: int, method: nn.Module, views: list[Tensor]) -> dict[str, float]:
        t, c = self.clock(), self.cpu_clock()
        out = self.tracker(step, method, views)
        self.seconds.append(self.clock() - t)
        self.cpu_seconds.append(self.cpu_clock() - c)
        return out


def train_config(width: float, data: str, data_dir: str | None, data_options: dict[str, Any], batch: int,
                 steps: int, warmup: int, n_train: int, seed: int = 0, track_every: int = 0) -> TrainConfig:
    """headgeom's SimCLR run for W + S + 1 steps; epochs cover them so the schedule is well defined."""
    need = warmup + steps + 1
    epochs = max(1, math.ceil(need / max(1, n_train // batch)))
    return TrainConfig(method="simclr", backbone="resnet18", backbone_options={"width": width}, data=data,
                       data_dir=data_dir, data_options=data_options, batch_size=batch, epochs=epochs,
                       max_steps=need, seed=seed, optimizer="sgd", lr=LR, momentum=MOMENTUM,
                       weight_decay=WEIGHT_DECAY, log_every=1, track_every=track_every, device="cpu",
                       progress=False)


def headgeom_loop(config: TrainConfig, out_dir: str | Path, warmup: int, steps: int,
                  tracker: Any = None, clock: Clock = time.perf_counter,
                  cpu_clock: Clock = time.process_time) -> dict[str, Any]:
    """``headgeom.train.train(config, out_dir)`` with a stamp at each training forward.

    Returns {"images_per_s" (window), "images_per_cpu_s" (the same over process CPU seconds),
    "loop_images_per_s" (done.json), "final_loss", "track_seconds", "track_cpu_seconds", "stamps"}.
    """
    stamps: list[float] = []
    cpu_stamps: list[float] = []

    def stamp(module: nn.Module, args: Any) -> None:
        if torch.is_grad_enabled():  # a training forward, not the tracker's no-grad ones
            stamps.append(clock())
            cpu_stamps.append(cpu_clock())

    def build(cfg: TrainConfig) -> nn.Module:
        method = build_method_from_config(cfg)
        method.register_forward_pre_hook(stamp)
        return method

    timed = TimedTracker(tracker, clock, cpu_clock) if tracker is not None else None
    done = train(config, out_dir, tracker=timed, build_method=build)
    return {"images_per_s": throughput(stamps, warmup, steps, config.batch_size),
            "images_per_cpu_s": throughput(cpu_stamps, warmup, steps, config.batch_size),
            "loop_images_per_s": done["images_per_s"], "final_loss": done["final_loss"],
            "track_seconds": timed.seconds if timed is not None else [],
            "track_cpu_seconds": timed.cpu_seconds if timed is not None else [], "stamps": stamps}


def default_tracker(config: TrainConfig) -> Any:
    """The tracker ``headgeom train --track-every K`` builds (train/cli.py)."""
    from headgeom.tracking import GeometryTracker
    return GeometryTracker(every=config.track_every, reading=config.track_reading,
                           block_samples=config.track_block_samples)


# ----------------------------------------------------------------------------- the benchmark
def amortised(call_s: float, step_s: float, period: int) -> float:
    """Fraction of wall time spent tracking with one call of ``call_s`` every ``period`` steps."""
    return call_s / (period * step_s + call_s)


def run_order(kinds: list[str], repeat: int) -> list[str]:
    """The kinds in order on even repeats and reversed on odd ones (ABBA over two repeats)."""
    return list(kinds) if repeat % 2 == 0 else list(kinds)[::-1]


def bench_width(width: float, args: argparse.Namespace, data: str, data_options: dict[str, Any]) -> dict[str, Any]:
    ds = load_dataset(data, "train", args.data_dir, **data_options)
    stats = dataset_stats(data, ds)
    mean, std = tuple(stats.mean), tuple(stats.std)
    kinds = ["bare", "headgeom"] + ([] if args.no_tracking else ["tracking"])
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for r in range(args.repeats):
        for kind in run_order(kinds, r):
            if kind == "bare":
                res = bare_loop(ds.images, mean, std, width, args.batch_size, args.steps, args.warmup, args.seed)
                res = {k: res[k] for k in ("images_per_s", "images_per_cpu_s")} | {"final_loss": res["losses"][-1]}
            else:
                track = args.steps if kind == "tracking" else 0
                cfg = train_config(width, data, args.data_dir, data_options, args.batch_size, args.steps,
                                   args.warmup, len(ds), args.seed, track)
                with tempfile.TemporaryDirectory() as tmp:
                    res = headgeom_loop(cfg, Path(tmp) / "run", args.warmup, args.steps,
                                        default_tracker(cfg) if track else None)
            runs[kind].append(res)
            print(f"  width {width} repeat {r} {kind}: {res['images_per_s']:.1f} images/s", file=sys.stderr)
    med = statistics.median
    row: dict[str, Any] = {"width": width, "feature_dim": BareSimCLR(width).backbone.feature_dim,
                           "params": sum(p.numel() for p in BareSimCLR(width).parameters()), "runs": runs}
    for clock, key in (("wall", "images_per_s"), ("cpu", "images_per_cpu_s")):
        bare = [x[key] for x in runs["bare"]]
        hg = [x[key] for x in runs["headgeom"]]
        ratios = [h / b for h, b in zip(hg, bare)]  # paired within a repeat
        row[clock] = {"bare": med(bare), "headgeom": med(hg), "ratio": med(ratios), "ratios": ratios}
        if "tracking" in runs:
            on = med([x[key] for x in runs["tracking"]])
            seconds = "track_seconds" if clock == "wall" else "track_cpu_seconds"
            calls = [c for x in runs["tracking"] for c in x[seconds][1:]]  # [0]: step 0, before the window
            call_s = med(calls) if calls else float("nan")
            step_s = args.batch_size / med(hg)
            row[clock].update({"tracking_on": on, "tracking_measured_overhead": 1 - on / med(hg),
                               "tracking_call_s": call_s,
                               "tracking_step0_call_s": [x[seconds][0] for x in runs["tracking"]],
                               "tracking_amortised": {str(k): amortised(call_s, step_s, k)
                                                      for k in args.track_periods}})
    return row


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The throughput table, and the tracking table when tracking was measured."""
    lines = ["| width (d) | params | bare img/s | headgeom img/s | headgeom/bare wall (min-max) | "
             "headgeom/bare CPU time (min-max) |", "|---|---|---|---|---|---|"]
    for r in rows:
        w, c = r["wall"], r["cpu"]
        lines.append(f"| {r['width']} ({r['feature_dim']}) | {r['params'] / 1e6:.2f} M | {w['bare']:.1f} | "
                     f"{w['headgeom']:.1f} | **{w['ratio']:.2f}** ({min(w['ratios']):.2f}-{max(w['ratios']):.2f}) | "
                     f"**{c['ratio']:.2f}** ({min(c['ratios']):.2f}-{max(c['ratios']):.2f}) |")
    if rows and "tracking_on" in rows[0]["wall"]:
        ks = args.track_periods
        lines += ["", f"| width | img/s tracking every {args.steps} steps (off) | measured overhead | "
                  f"s per tracking call (CPU s) | " + " | ".join(f"amortised at K={k} (by CPU time)" for k in ks)
                  + " |", "|---|---|---|---|" + "---|" * len(ks)]
        for r in rows:
            w, c = r["wall"], r["cpu"]
            lines.append(f"| {r['width']} | {w['tracking_on']:.1f} ({w['headgeom']:.1f}) | "
                         f"{100 * w['tracking_measured_overhead']:.0f} % | {w['tracking_call_s']:.1f} "
                         f"({c['tracking_call_s']:.1f}) | "
                         + " | ".join(f"{100 * w['tracking_amortised'][str(k)]:.1f} % "
                                      f"({100 * c['tracking_amortised'][str(k)]:.1f} %)" for k in ks) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=None, help="folder holding cifar-10-batches-bin (else: shapes)")
    p.add_argument("--widths", default="0.25,0.5", help="ResNet-18 width multipliers, comma-separated")
    p.add_argument("--full-width", action="store_true", help="also width 1.0 (d = 512)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=8, help="timed iterations per run")
    p.add_argument("--warmup", type=int, default=2, help="untimed iterations before them")
    p.add_argument("--repeats", type=int, default=4, help="interleaved repeats (even: balanced order)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--track-periods", default="195,39",
                   help="tracking periods (steps) for the amortised overhead (default: once per epoch at "
                        "batch 256 as the paper presets, and the small presets' 39)")
    p.add_argument("--no-tracking", action="store_true", help="skip the tracking runs")
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    args.widths = [float(w) for w in args.widths.split(",")] + ([1.0] if args.full_width else [])
    args.track_periods = [int(k) for k in args.track_periods.split(",")]
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        p.error(f"need --steps >= 1, --warmup >= 0, --repeats >= 1; got {args.steps}, {args.warmup}, {args.repeats}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    data = "cifar10" if args.data_dir else "shapes"
    # shapes: one epoch covers the whole run, so no epoch-boundary checkpoint falls in the window
    data_options = {} if args.data_dir else {"n": args.batch_size * (args.warmup + args.steps + 2)}
    load0, t0 = os.getloadavg(), time.perf_counter()
    rows = [bench_width(w, args, data, data_options) for w in args.widths]
    result = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "cpus": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "loadavg_start": load0, "loadavg_end": os.getloadavg()},
              "settings": {"data": data, "batch_size": args.batch_size, "steps": args.steps, "warmup": args.warmup,
                           "repeats": args.repeats, "widths": args.widths, "track_periods": args.track_periods},
              "seconds": time.perf_counter() - t0, "rows": rows}
    table = markdown(rows, args)
    print(table)
    print(f"\n{data}, batch {args.batch_size}, {args.steps} timed steps after {args.warmup} warm-up, median of "
          f"{args.repeats} interleaved repeats; {torch.get_num_threads()} torch threads; load average "
          f"{load0[0]:.1f} -> {os.getloadavg()[0]:.1f}; {result['seconds']:.0f} s")
    if args.json:
        atomic_write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()

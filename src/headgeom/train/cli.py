"""``headgeom train``: pre-train an SSL method into a run directory (issue 4 §5).

Wiring (in headgeom/cli.py's build_parser): ``from headgeom.train.cli import add_parser`` and
``add_parser(sub)``; the sub-parser sets ``func=run``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from .config import TrainConfig
from .optim import OPTIMIZERS
from .schedules import SCHEDULES

__all__ = ["add_parser", "config_from_args", "run"]

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainConfig)
             if f.default is not dataclasses.MISSING}


def _key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (0.5, true, [1,2]), else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``train`` on ``subparsers`` (from ``parser.add_subparsers``); returns the sub-parser."""
    d = _DEFAULTS
    p = subparsers.add_parser(
        "train", help="pre-train an SSL method (simclr, simsiam, byol, vicreg, barlow_twins, dino) with any head",
        description="Pre-train an SSL method into RUN_DIR: config.json, metrics.jsonl (step, epoch, loss, lr, "
        "...), checkpoints/last.pt (every epoch, every --checkpoint-every steps) and done.json. "
        "--resume continues RUN_DIR from its last checkpoint with its stored settings (bit-identical on CPU).",
        usage="headgeom train --method NAME --backbone NAME [--head SPEC] [--predictor SPEC] --data NAME "
        "[--data-dir DIR] [--epochs E] [--max-steps S] [--batch-size B] [--seed S] --out RUN_DIR [--resume] "
        "[options]")
    a = p.add_argument
    # None defaults: an option given on the command line is told apart from the stored one on --resume.
    a("--method", default=None, metavar="NAME",
      help="simclr, simclr_oneway, simsiam, byol, vicreg, barlow_twins, dino (required unless --resume)")
    a("--backbone", default=None, metavar="NAME",
      help="resnet18, resnet50, vit_tiny, vit_small (required unless --resume)")
    a("--width", type=float, default=None, metavar="W",
      help="ResNet width multiplier (same as --backbone-option width=W)")
    a("--backbone-option", type=_key_value, action="append", default=None, metavar="KEY=VALUE",
      help="backbone builder option, repeatable (e.g. width=0.5, patch_size=4)")
    a("--head", default=None, metavar="SPEC", help="projector: preset name or spec string (default: the method's)")
    a("--predictor", default=None, metavar="SPEC", help="predictor for simsiam/byol (default: the method's)")
    a("--pseudo-collapse", type=float, default=None, metavar="ALPHA",
      help="multiply the projector's Linear weights by ALPHA at init (paper: 0.1)")
    a("--method-option", type=_key_value, action="append", default=None, metavar="KEY=VALUE",
      help="method hyper-parameter, repeatable (temperature=0.2, lambd=0.005, recipe=paper_simclr, ...)")
    a("--data", default=None, metavar="NAME",
      help="cifar10, cifar100, shapes, imagefolder (required unless --resume)")
    a("--data-dir", default=None, metavar="DIR", help="dataset folder (default $HEADGEOM_DATA)")
    a("--data-option", type=_key_value, action="append", default=None, metavar="KEY=VALUE",
      help="dataset option, repeatable (shapes: n=512, size=32)")
    a("--image-size", type=int, default=None, metavar="PX", help="augmented view side (default: the images')")
    a("--no-normalize", dest="normalize", action="store_const", const=False, default=None,
      help="do not append the dataset's mean/std normalisation to the augmentation")
    a("--epochs", type=int, default=None, metavar="E",
      help=f"the schedule's length in epochs (default {d['epochs']})")
    a("--max-steps", type=int, default=None, metavar="S",
      help="stop after S updates in total (the schedule still spans --epochs)")
    a("--batch-size", type=int, default=None, metavar="B", help=f"global batch (default {d['batch_size']})")
    a("--seed", type=int, default=None, metavar="S",
      help=f"seed of init, data order and augmentation (default {d['seed']})")
    a("--optimizer", choices=OPTIMIZERS, default=None, help=f"default {d['optimizer']}")
    a("--lr", type=float, default=None, help=f"peak learning rate, absolute (default {d['lr']})")
    a("--momentum", type=float, default=None, help=f"SGD/LARS momentum (default {d['momentum']})")
    a("--weight-decay", type=float, default=None, help=f"default {d['weight_decay']}; biases and norms excluded")
    a("--lars-eta", type=float, default=None, help=f"LARS trust coefficient (default {d['lars_eta']})")
    a("--warmup-epochs", type=float, default=None, help="linear warm-up length in epochs (default 0)")
    a("--schedule", choices=SCHEDULES, default=None, help=f"after warm-up (default {d['schedule']})")
    a("--final-lr", type=float, default=None, help="cosine end value (default 0)")
    a("--log-every", type=int, default=None, metavar="K", help="metrics line every K steps (default 1)")
    a("--track-every", type=int, default=None, metavar="K", help="geometry tracking every K steps (default 0: off)")
    a("--probe-size", type=int, default=None, metavar="N", help=f"tracking probe batch (default {d['probe_size']})")
    a("--track-reading", choices=("ambient", "tangential", "mse"), default=None,
      help=f"loss-Hessian reading of G in tracking (default {d['track_reading']})")
    a("--track-block-samples", type=int, default=None, metavar="N",
      help=f"H_eff blocks of the first N probe samples (default {d['track_block_samples']})")
    a("--checkpoint-every", type=int, default=None, metavar="K", help="also checkpoint every K steps (default 0)")
    a("--keep-every-epochs", type=int, default=None, metavar="K", help="keep checkpoints/epoch_XXXX.pt every K epochs")
    a("--device", default=None, help="auto (default), cpu, cuda, cuda:1")
    a("--no-bf16", dest="bf16", action="store_const", const=False, default=None, help="no bf16 autocast on GPU")
    a("--no-channels-last", dest="channels_last", action="store_const", const=False, default=None,
      help="no channels_last memory format on GPU")
    a("--no-sync-bn", dest="sync_bn", action="store_const", const=False, default=None,
      help="under torchrun, keep BatchNorm statistics per process instead of over the global batch")
    a("--no-progress", dest="progress", action="store_const", const=False, default=None, help="no progress bar")
    a("--out", required=True, metavar="RUN_DIR", help="run directory")
    a("--resume", action="store_true", help="continue RUN_DIR from checkpoints/last.pt with its stored settings")
    p.set_defaults(func=run)
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The TrainConfig of ``args``; with ``--resume``, RUN_DIR/config.json overlaid by the options given."""
    given: dict[str, Any] = {}
    for f in dataclasses.fields(TrainConfig):
        v = getattr(args, f.name, None)
        if v is not None and f.name not in ("backbone_options", "method_options", "data_options"):
            given[f.name] = v
    for field_name, arg in (("backbone_options", "backbone_option"), ("method_options", "method_option"),
                            ("data_options", "data_option")):
        if getattr(args, arg, None):
            given[field_name] = dict(getattr(args, arg))
    if args.width is not None:
        given["backbone_options"] = {**given.get("backbone_options", {}), "width": args.width}
    if args.resume:
        stored_path = Path(args.out) / "config.json"
        if not stored_path.exists():
            raise FileNotFoundError(f"--resume: {stored_path} not found; {args.out} is not a run directory "
                                    f"written by `headgeom train` (drop --resume to start it)")
        stored = json.loads(stored_path.read_text(encoding="utf-8"))["config"]
        return TrainConfig.from_dict({**stored, **given})
    missing = [f"--{k}" for k in ("method", "backbone", "data") if k not in given]
    if missing:
        raise ValueError(f"headgeom train needs {' '.join(missing)} (or --resume to continue a run)")
    return TrainConfig(**given)


def run(args: argparse.Namespace) -> int:
    """Train from parsed ``args``; prints where the run went and returns 0 (2 when RUN_DIR is taken;
    other errors raise for the caller to report)."""
    import sys

    from .loop import train

    config = config_from_args(args)
    tracker = None
    if config.track_every:
        from headgeom.tracking import GeometryTracker
        tracker = GeometryTracker(every=config.track_every, reading=config.track_reading,
                                  block_samples=config.track_block_samples)
    try:
        done = train(config, args.out, resume=args.resume, tracker=tracker)
    except FileExistsError as err:
        print(f"headgeom train: error: {err}", file=sys.stderr)
        return 2
    if int(os.environ.get("RANK", "0")) != 0:
        return 0  # under torchrun rank 0 reports for the job
    if tracker is not None:
        from headgeom.tracking import plot_run
        tracker.write_metadata(Path(args.out) / "tracking.json")  # definitions and the engine path taken
        paths = plot_run(args.out)
        print(f"{len(paths)} tracking figure(s) under {Path(args.out) / 'figures' / 'tracking'}")
    state = "complete" if done["complete"] else f"stopped at step {done['step']} (--max-steps)"
    ips = done["images_per_s"]
    print(f"headgeom train: {state}, final loss {done['final_loss']:.4f}, "
          f"{done['seconds']:.1f} s{'' if ips is None else f', {ips:.0f} images/s'}; run directory {args.out}")
    return 0

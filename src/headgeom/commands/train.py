"""``headgeom train``: its parser (the work is :func:`headgeom.train.cli.run`)."""
from __future__ import annotations

import argparse
from typing import Any

from . import Command
from .options import add_command, deprecated_alias, key_value
from .outputs import Output
from .vocabulary import (BACKBONES, DATASETS, LOGGERS, METHODS, OPTIMIZERS, PREDICTOR_METHODS, READINGS, SCHEDULES,
                         TRAIN_DEFAULTS)

__all__ = ["add_parser"]

EXAMPLES = [
    "headgeom train --method simsiam --backbone resnet18 --width 0.25 --head d-512-512:silu --data shapes "
    "--epochs 2 --batch-size 128 --max-steps 40 --track-every 20 --out runs/simsiam",
    "headgeom train --out runs/simsiam --resume          # continue to the end of the schedule",
    "headgeom train --out runs/simsiam --resume --logger tensorboard   # also TensorBoard scalars from here on",
    "headgeom train --method simclr --backbone resnet18 --data shapes --epochs 1 --logger jsonl,mlflow "
    "--out runs/simclr-mlflow   # and an MLflow run in runs/simclr-mlflow/mlflow.db",
    "headgeom train --method simsiam --backbone resnet18 --data shapes --epochs 2 --out runs/simsiam --overwrite  "
    "# start it over",
    "headgeom train --method simclr --backbone resnet18 --data cifar10 --data-dir ~/data --epochs 200 "
    "--batch-size 512 --lr 0.5 --warmup-epochs 10 --checkpoint-every 500 --out runs/simclr",
]


def _outputs(args: argparse.Namespace) -> list[Output]:
    return [Output(args.out, "dir", "--out")]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``train`` on ``subparsers`` (from ``parser.add_subparsers``); returns the sub-parser."""
    d = TRAIN_DEFAULTS
    p = add_command(
        subparsers, "train",
        help="pre-train an SSL method (simclr, simsiam, byol, vicreg, barlow_twins, dino) with any head",
        description="Pre-train an SSL method into RUN_DIR: config.json, metrics.jsonl (step, epoch, loss, lr, "
        "...), checkpoints/last.pt (every epoch, every --checkpoint-every steps and at the stop) and done.json. "
        "--resume continues RUN_DIR from its last checkpoint with its stored settings (bit-identical on CPU). "
        "RUN_DIR is locked while a process writes it: a second one is refused.",
        usage="headgeom train --method NAME --backbone NAME [--head SPEC] [--predictor SPEC] --data NAME "
        "[--data-dir DIR] [--epochs E] [--max-steps S] [--batch-size B] [--seed S] --out RUN_DIR "
        "[--resume | --resume-or-start | --overwrite] "
        "[options]",
        examples=EXAMPLES)
    a = p.add_argument
    # None defaults: an option given on the command line is told apart from the stored one on --resume.
    a("--method", default=None, metavar="NAME",
      help=f"{', '.join(METHODS)} (required unless --resume)")
    a("--backbone", default=None, metavar="NAME",
      help=f"{', '.join(BACKBONES)} (required unless --resume)")
    a("--width", type=float, default=None, metavar="W",
      help="ResNet width multiplier (same as --backbone-option width=W)")
    a("--backbone-option", type=key_value, action="append", default=None, metavar="KEY=VALUE",
      help="backbone builder option, repeatable (e.g. width=0.5, patch_size=4)")
    a("--head", default=None, metavar="SPEC",
      help="projector: preset name or head spec; d- fills in the backbone's width (default: the method's; "
      "`headgeom heads` explains the grammar)")
    a("--predictor", default=None, metavar="SPEC", help=f"predictor for {'/'.join(PREDICTOR_METHODS)} (default: the method's)")
    a("--pseudo-collapse", type=float, default=None, metavar="ALPHA",
      help="multiply the projector's Linear weights by ALPHA at init (paper: 0.1)")
    a("--method-option", type=key_value, action="append", default=None, metavar="KEY=VALUE",
      help="method hyper-parameter, repeatable (temperature=0.2, lambd=0.005, recipe=paper_simclr, ...)")
    a("--data", default=None, metavar="NAME",
      help=f"{', '.join(DATASETS)} (required unless --resume)")
    a("--data-dir", default=None, metavar="DIR", help="dataset folder (default $HEADGEOM_DATA)")
    a("--data-option", type=key_value, action="append", default=None, metavar="KEY=VALUE",
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
    a("--track-reading", choices=READINGS, default=None,
      help=f"loss-Hessian reading of G in tracking (default {d['track_reading']})")
    a("--track-block-samples", type=int, default=None, metavar="N",
      help=f"H_eff blocks of the first N probe samples (default {d['track_block_samples']})")
    a("--logger", default=None, metavar="NAME[,NAME...]",
      help=f"where the metrics and tracked geometry go, a comma list of {', '.join(LOGGERS)}: jsonl "
      "(RUN_DIR/metrics.jsonl) is always written; tensorboard: RUN_DIR/tensorboard/; mlflow: an MLflow run in "
      "sqlite:///RUN_DIR/mlflow.db or $MLFLOW_TRACKING_URI; wandb: a W&B run, offline under RUN_DIR/wandb/ "
      "unless W&B is configured otherwise; the trackers get the shared tags of docs/logging.md, the config, "
      "the tracking figures and the final checkpoint (each needs its extra: pip install -e \".[NAME]\")")
    a("--checkpoint-every", type=int, default=None, metavar="K", help="also checkpoint every K steps (default 0)")
    a("--keep-every-epochs", type=int, default=None, metavar="K", help="keep checkpoints/epoch_XXXX.pt every K epochs")
    a("--device", default=None, help="auto (default), cpu, cuda, cuda:1")
    a("--no-bf16", dest="bf16", action="store_const", const=False, default=None, help="no bf16 autocast on GPU")
    a("--no-channels-last", dest="channels_last", action="store_const", const=False, default=None,
      help="no channels_last memory format on GPU (CPU runs are always contiguous)")
    a("--no-sync-bn", dest="sync_bn", action="store_const", const=False, default=None,
      help="under torchrun or srun, keep BatchNorm statistics per process instead of over the global batch")
    quiet = a("--quiet", dest="progress", action="store_const", const=False, default=None, help="no progress bar")
    a("--out", required=True, metavar="RUN_DIR", help="run directory")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--resume", action="store_true",
                       help="continue RUN_DIR from checkpoints/last.pt with its stored settings; refused when "
                       "no checkpoint was written yet")
    start.add_argument("--resume-or-start", action="store_true",
                       help="--resume when RUN_DIR has a checkpoint, else start it from step 0 (a job script "
                       "that is requeued)")
    start.add_argument("--overwrite", action="store_true",
                       help="replace the run in RUN_DIR (a folder in which nothing was trained is started "
                       "again without it)")
    deprecated_alias(p, "--no-progress", quiet)
    p.set_defaults(func=Command("headgeom.train.cli:run", outputs=_outputs))
    return p

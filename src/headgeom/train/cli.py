"""``headgeom train``: pre-train an SSL method into a run directory.

The parser is :func:`headgeom.commands.train.add_parser` (torch-free, so ``--help`` is instant); it
names :func:`run` as the command's work. A single process stops on SIGTERM or SIGINT after the step
it is taking (said at once), with a checkpoint of that step, one line on stderr and exit status
128 + the signal (:mod:`.interrupt`); a second Ctrl-C stops it at once, with one line naming the
checkpoint it resumes from; a disk that fills while it writes ends it with one line and exit status
2, the previous checkpoint kept.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import os
import signal
import sys
from pathlib import Path
from typing import Any

from headgeom.commands.train import add_parser  # the parser lives with the torch-free parsers
from headgeom.tracking import GeometryTracker, plot_run

from .config import TrainConfig
from .checkpoint import CheckpointError, load_checkpoint
from .ddp import job_layout
from .interrupt import StopSignals, TrainingInterrupted, signal_words
from .loop import train
from .resume import stored_config
from .save import last_checkpoint

__all__ = ["add_parser", "config_from_args", "run"]


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
    stored_path = Path(args.out) / "config.json"
    if args.resume and not stored_path.exists():
        raise FileNotFoundError(f"--resume: {stored_path} not found; {args.out} is not a run directory "
                                f"written by `headgeom train` (drop --resume to start it, or pass --resume-or-start)")
    if args.resume or (args.resume_or_start and stored_path.exists()):
        return TrainConfig.from_dict({**stored_config(stored_path), **given})
    missing = [f"--{k}" for k in ("method", "backbone", "data") if k not in given]
    if missing:
        raise ValueError(f"headgeom train needs {' '.join(missing)} (or --resume to continue a run)")
    return TrainConfig(**given)


def run(args: argparse.Namespace) -> int:
    """Train from parsed ``args``; prints where the run went and returns 0 (2 when RUN_DIR is taken;
    other errors raise for the caller to report)."""
    config = config_from_args(args)
    tracker = None
    if config.track_every:
        tracker = GeometryTracker(every=config.track_every, reading=config.track_reading,
                                  block_samples=config.track_block_samples)
    layout = job_layout(os.environ)
    stop = StopSignals() if layout is None else None  # several processes: the launcher signals every rank
    written: list[Path] = []

    def figures(out: Path) -> list[Path]:
        """tracking.json and the tracking figures, written at the end of the run (its loggers get them)."""
        if tracker is not None:
            tracker.write_metadata(out / "tracking.json")  # definitions and the engine path taken
            written.extend(plot_run(out))
        return written

    try:
        with stop if stop is not None else contextlib.nullcontext():
            done = train(config, args.out, resume=args.resume, tracker=tracker,
                         resume_or_start=args.resume_or_start, overwrite=args.overwrite, should_stop=stop,
                         figures=figures)
    except FileExistsError as err:
        print(f"headgeom train: error: {err}", file=sys.stderr)
        return 2
    except TrainingInterrupted as err:
        print(f"headgeom train: {err}", file=sys.stderr)
        return 128 + err.signum
    except KeyboardInterrupt:
        if stop is None or stop.received is None:
            raise  # not a second signal of ours: Python's own report
        print(f"headgeom train: {stopped_now_message(Path(args.out), stop.finished)}", file=sys.stderr)
        return 128 + signal.SIGINT
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"headgeom train: error: {disk_full_message(Path(args.out), err)}", file=sys.stderr)
        return 2
    if layout is not None and int(layout["rank"]) != 0:
        return 0  # under torchrun or srun rank 0 reports for the job
    if tracker is not None:
        print(f"{len(written)} tracking figure(s) under {Path(args.out) / 'figures' / 'tracking'}")
    state = "complete" if done["complete"] else f"stopped at step {done['step']} (--max-steps)"
    ips = done["images_per_s"]
    print(f"headgeom train: {state}, final loss {done['final_loss']:.4f}, "
          f"{done['seconds']:.1f} s{'' if ips is None else f', {ips:.0f} images/s'}; run directory {args.out}")
    return 0


def kept_checkpoint(out: Path) -> tuple[str, str]:
    """(what a run stopped in the middle of a write or a step kept, what continues it): its last
    checkpoint, which an atomic write never leaves half-written, and the command to go on from it."""
    last = last_checkpoint(out)
    again = f"start it again with: headgeom train --resume-or-start --out {out}"
    try:
        step = int(load_checkpoint(last)["step"])
    except FileNotFoundError:
        return "it had written no checkpoint yet", again
    except CheckpointError as bad:
        return f"its checkpoint cannot be read ({bad})", again
    return f"its checkpoint of step {step} ({last}) is intact", f"continue with: headgeom train --resume --out {out}"


def stopped_now_message(out: Path, finished: int | None) -> str:
    """One line for a run a second Ctrl-C stopped in the middle of step ``finished + 1``."""
    during = "before its first step" if finished is None else f"during step {finished + 1}"
    kept, then = kept_checkpoint(out)
    return f"stopped at once {during} ({signal_words(signal.SIGINT)[1]}); {kept}: {then}"


def disk_full_message(out: Path, err: OSError) -> str:
    """One line for a disk that filled while the run wrote ``out``: what was being written and the
    checkpoint it can resume from."""
    where = f" {err.filename}" if err.filename else f" under {out}"
    kept, then = kept_checkpoint(out)
    return f"no space left on the disk while writing{where}; the run stopped and {kept}: free some space, then {then}"

"""How a training run starts in its folder: fresh, again in place, resumed, or replaced.

``headgeom train --out RUN`` writes ``RUN/config.json``, ``RUN/metrics.jsonl`` and
``RUN/checkpoints/last.pt``. What a new command may do with a folder that already holds some of
these depends on whether anything was *trained* there: a checkpoint, or a metrics record of a
step >= 1 (a step-0 tracking record is the initialisation, not training).

=====================  =====================  ===========================  ======================
folder                 no option              ``--resume``                 ``--resume-or-start``
=====================  =====================  ===========================  ======================
empty or missing       start                  refused: not a run           start
nothing trained        start again (a note)   refused: nothing to resume   start again (a note)
trained, no checkpoint refused                refused: nothing to resume   start again (a note)
checkpoint             refused                resume                       resume
=====================  =====================  ===========================  ======================

``--overwrite`` replaces whatever the folder holds (one atomic rename, then deletion: see
:meth:`headgeom.runs.lock.RunLock.empty_folder`). Resuming checks the stored settings against
the given ones (the trainer's check). :func:`claim_run_folder` does all of it under the folder's
lock.
"""
from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Literal

from headgeom.io import absent_folders, remove_empty_folders

from .lock import RunLock
from .metrics import read_metrics

__all__ = ["CHECKPOINT_WRITTEN", "RunContents", "Start", "claim_run_folder", "inspect_run_folder",
           "missing_checkpoint_message", "plan_start"]

CHECKPOINT_WRITTEN = ("a run writes checkpoints/last.pt at the end of every epoch, every --checkpoint-every "
                      "steps and when it stops at --max-steps")
"""When a run has a checkpoint: the one wording of every message that needs it."""


def missing_checkpoint_message(path: str | os.PathLike[str]) -> str:
    """What every command says of a checkpoint file that is not there (when it is a run's last.pt,
    also when a run writes it)."""
    path = Path(path)
    when = f" ({CHECKPOINT_WRITTEN})" if path.parent.name == "checkpoints" and path.name == "last.pt" else ""
    return f"checkpoint {path} does not exist{when}"


@dataclass(frozen=True)
class RunContents:
    """What a run folder holds."""

    has_config: bool
    has_checkpoint: bool
    trained_records: int  # metrics.jsonl records of a step >= 1

    @property
    def holds_run(self) -> bool:
        return self.has_config or self.has_checkpoint or self.trained_records > 0

    @property
    def trained(self) -> bool:
        return self.has_checkpoint or self.trained_records > 0


@dataclass(frozen=True)
class Start:
    """How to start: ``action`` and, when the user should hear of it, ``note``."""

    action: Literal["start", "restart", "resume", "overwrite"]
    note: str | None = None

    @property
    def from_checkpoint(self) -> bool:
        return self.action == "resume"


def inspect_run_folder(folder: str | os.PathLike[str]) -> RunContents:
    """Read what ``folder`` holds (a missing folder holds nothing)."""
    folder = Path(folder)
    records = sum(rec.step >= 1 for rec in read_metrics(folder))  # a torn last line is skipped
    return RunContents((folder / "config.json").is_file(), (folder / "checkpoints" / "last.pt").is_file(), records)


def plan_start(folder: str | os.PathLike[str], *, resume: bool = False,
               resume_or_start: bool = False, overwrite: bool = False) -> Start:
    """How ``headgeom train`` starts in ``folder``, per the table of this module; reads only.
    (Whether the given settings may resume the stored run is the trainer's question.)

    Raises:
        ValueError: contradicting options, or nothing to resume.
        FileExistsError: a fresh start into a folder in which a run was trained.
        FileNotFoundError: ``--resume`` of a folder that holds no run.
    """
    folder = Path(folder)
    if overwrite and (resume or resume_or_start):
        raise ValueError("--overwrite replaces the run in the output folder, --resume continues it: give one")
    have = inspect_run_folder(folder)
    if overwrite:
        return Start("overwrite", f"note: --overwrite: replaced the run in {folder}" if have.holds_run else None)
    if (resume or resume_or_start) and have.has_checkpoint:
        return Start("resume")
    if resume and not resume_or_start:
        if not have.holds_run:
            raise FileNotFoundError(f"--resume: {folder} is not a run directory (no config.json, no checkpoint); drop "
                                    f"--resume to start one there, or pass --resume-or-start")
        raise ValueError(f"--resume: nothing to resume in {folder}: "
                         f"{missing_checkpoint_message(folder / 'checkpoints' / 'last.pt')}; its "
                         f"{have.trained_records} metrics record(s) of training are kept. Pass --resume-or-start "
                         f"to start it again from step 0, or --overwrite to replace it")
    if not have.holds_run:
        return Start("start")
    if not have.trained or resume_or_start:
        what = ("nothing was trained there" if not have.trained else
                f"it has no checkpoint yet, so its {have.trained_records} metrics record(s) are discarded")
        return Start("restart", f"note: starting the run in {folder} again from step 0: {what}")
    raise FileExistsError(f"{folder} already holds a run ({'a checkpoint' if have.has_checkpoint else 'metrics'}); "
                          f"pass --resume to continue it, --overwrite to replace it, or choose a new --out folder")


@contextlib.contextmanager
def claim_run_folder(folder: str | os.PathLike[str], *, resume: bool = False,
                     resume_or_start: bool = False, overwrite: bool = False, writer: bool = True,
                     note: Callable[[str], None] | None = None) -> Iterator[Start]:
    """Lock ``folder`` (``writer=True``: the process that writes; other DDP ranks only plan), plan
    the start (:func:`plan_start`), empty the folder for ``--overwrite``, tell ``note`` (default:
    stderr) what was done, and yield the :class:`Start`; the lock is released on exit.

    A start that is refused, or a run that fails before it wrote anything (a missing dataset, a
    batch larger than the data, Ctrl-C while it loads), leaves none of the folders the lock created.

    Raises what :func:`plan_start` raises, and :class:`headgeom.runs.RunLockedError` when another
    process writes ``folder``; nothing in the folder was changed then.
    """
    say = note or (lambda msg: print(msg, file=sys.stderr))
    created = absent_folders(folder) if writer else []
    with (RunLock(folder, note=say) if writer else contextlib.nullcontext()) as lock:
        try:
            start = plan_start(folder, resume=resume, resume_or_start=resume_or_start, overwrite=overwrite)
            if writer:
                if start.action == "overwrite" and inspect_run_folder(folder).holds_run:
                    lock.empty_folder()
                if start.note:
                    say(start.note)
            yield start
        except BaseException:
            if created:  # the lock file goes with the lock; then the folders, if nothing else was written
                lock.release()
                remove_empty_folders(created)
            raise

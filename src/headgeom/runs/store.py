"""The trained-model store of ``headgeom reproduce``: each distinct model is trained once, and every
cell that needs it reads it from here (train once, measure many).

A model is named by its **key**: a stable hash of the JSON form of its training config (a
``headgeom.train.TrainConfig``) and of what the training cell records beside it (its tracker's
readings and settings), without the fields that change neither the model nor what a cell reads
(:data:`IGNORED`; without a tracker also :data:`UNTRACKED_IGNORED`) and without ``max_steps``.
Runs that differ only in ``max_steps`` are one trajectory stopped at different steps (the schedule
spans ``epochs``, never ``max_steps``, and on CPU a run stopped and resumed is bit-identical to an
uninterrupted one: :mod:`headgeom.train.resume`), so they share a key and each stop is a folder of
its own, continued from the nearest shorter one instead of trained again::

    OUT/runs/trained/<key>/key.json          the key's JSON form (what the hash covers)
    OUT/runs/trained/<key>/.lock             held while a process trains any stop of this key
    OUT/runs/trained/<key>/steps-100/        a `headgeom train` run folder stopped at max_steps 100
    OUT/runs/trained/<key>/steps-150/        the same run continued from steps-100 to 150
    OUT/runs/trained/<key>/steps-all/        max_steps None (the whole schedule)

A stop folder is finished when it holds ``done.json`` (or ``diverged.json``: the run stopped on a
non-finite loss, which is a result) and is never written again, so readers need no lock; a folder
without either is an attempt that was killed and is resumed. Writers hold the key's
:class:`~headgeom.runs.lock.RunLock` while they train (waiting for it, never training twice); on
SLURM a job that waits holds its allocation idle meanwhile. The training itself is
``headgeom.train.cells``'s: this module knows folders, keys and the lock, not torch.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from headgeom.io import atomic_write_json, json_safe

from .lock import RunLock

__all__ = ["DIVERGED", "IGNORED", "STORE_NAME", "UNTRACKED_IGNORED", "ModelStore", "lineage_key", "model_key",
           "steps_name"]

STORE_NAME = "trained"
"""The store's folder under ``OUT/runs/`` (experiment ids are upper case: no clash)."""

IGNORED = frozenset({"logger", "progress", "checkpoint_every", "keep_every_epochs", "track_reading",
                     "track_block_samples"})
"""TrainConfig fields that change neither the model nor what a cell reads back: where the run logs,
its progress bar, extra checkpoint files, and the ``headgeom train --track-every`` tracker's settings
(a cell builds its own tracker, whose settings are part of the key). Each may change when a run is
resumed (``train.config.RESUMABLE_CHANGES``), so a stop continued from another with other values is valid."""

UNTRACKED_IGNORED = frozenset({"track_every", "probe_size"})
"""Fields read only by a tracker: they change nothing in a run trained without one."""

STEPS = "max_steps"
DIVERGED = "diverged.json"
DONE = "done.json"
KEY_FILE = "key.json"
# what a continued stop copies from the stop it continues (its logger files are its own)
_CARRIED = ("config.json", "metrics.jsonl", "checkpoints/last.pt")


def _form(config: Mapping[str, Any], tracking: Mapping[str, Any] | None) -> dict[str, Any]:
    """The JSON form a key hashes: the config without the ignored fields and ``max_steps``, and the tracking."""
    drop = IGNORED | {STEPS} | (UNTRACKED_IGNORED if tracking is None else frozenset())
    return json_safe({"train": {k: v for k, v in config.items() if k not in drop},
                      "tracking": None if tracking is None else dict(tracking)})


def _digest(form: Any, n: int) -> str:
    blob = json.dumps(json_safe(form), sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:n]


def model_key(config: Mapping[str, Any], tracking: Mapping[str, Any] | None = None) -> str:
    """The store key of a training run: ``<method>-<backbone>-seed<k>-<16 hex digits>``, the hash over
    ``config`` (``TrainConfig.to_dict()``) and ``tracking`` (the tracker's readings and settings, None
    without one) as :data:`IGNORED` and :data:`UNTRACKED_IGNORED` say, ``max_steps`` left out."""
    slug = re.sub(r"[^A-Za-z0-9.+-]+", "_", f"{config.get('method')}-{config.get('backbone')}-seed{config.get('seed')}")
    return f"{slug[:60]}-{_digest(_form(config, tracking), 16)}"


def lineage_key(config: Mapping[str, Any]) -> str:
    """The hash of a training config without ``max_steps`` and without any tracking: the cells that
    train one trajectory whatever they track. The runner groups cells by it (which stops of a trajectory
    the plan needs, and which cells should not start training it at once)."""
    return _digest(_form(config, None), 16)


def steps_name(max_steps: int | None) -> str:
    """The stop folder of ``max_steps``: ``steps-000100``, or ``steps-all`` for the whole schedule."""
    return "steps-all" if max_steps is None else f"steps-{int(max_steps):06d}"


def _order(max_steps: int | None) -> float:
    return float("inf") if max_steps is None else float(max_steps)


@dataclass(frozen=True)
class ModelStore:
    """The store under ``root`` (``OUT/runs/trained``); see the module docstring."""

    root: Path

    def folder(self, key: str, max_steps: int | None) -> Path:
        """The run folder of ``key`` stopped at ``max_steps``."""
        return Path(self.root) / key / steps_name(max_steps)

    @staticmethod
    def finished(folder: Path) -> bool:
        """Whether the stop folder holds a result: done.json, or diverged.json (a non-finite loss)."""
        return (folder / DONE).exists() or (folder / DIVERGED).exists()

    @staticmethod
    def diverged(folder: Path) -> str | None:
        """The message of a run that stopped on a non-finite loss (None: it did not)."""
        path = folder / DIVERGED
        return json.loads(path.read_text(encoding="utf-8"))["message"] if path.exists() else None

    @staticmethod
    def mark_diverged(folder: Path, message: str) -> None:
        atomic_write_json(folder / DIVERGED, {"message": message})

    def stops(self, key: str) -> list[int | None]:
        """The max_steps of every finished stop of ``key``, shortest first."""
        found = []
        for sub in (Path(self.root) / key).glob("steps-*"):
            if self.finished(sub):
                tail = sub.name.removeprefix("steps-")
                found.append(None if tail == "all" else int(tail))
        return sorted(found, key=_order)

    def base(self, key: str, max_steps: int | None) -> Path | None:
        """The finished stop of ``key`` with the most steps below ``max_steps`` that has a checkpoint to
        continue from (a diverged one continues to the same divergence), or None: train from step 0."""
        for steps in reversed([s for s in self.stops(key) if _order(s) < _order(max_steps)]):
            folder = self.folder(key, steps)
            if (folder / "checkpoints" / "last.pt").exists():
                return folder
        return None

    @staticmethod
    def continue_from(base: Path, folder: Path) -> None:
        """Make ``folder`` (absent) a copy of ``base``'s run (config, metrics, last checkpoint), ready to be
        resumed to a later stop: built beside it and renamed into place, so it appears whole or not at all."""
        tmp = folder.with_name(f".{folder.name}.copying-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        for name in _CARRIED:
            if (base / name).exists():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(base / name, tmp / name)
        os.rename(tmp, folder)

    @contextlib.contextmanager
    def hold(self, key: str, form: Mapping[str, Any] | None = None,
             note: Callable[[str], None] | None = None) -> Iterator[Path]:
        """Hold ``key``'s lock for the block (waiting while another process trains it); yields its folder.
        ``form`` (the key's JSON form) is written to key.json the first time and checked after: a
        different form under the same key (a hash collision, or a store written by another version) is
        refused rather than reused."""
        lineage = Path(self.root) / key
        with RunLock(lineage, note=note, wait=True):
            if form is not None:
                path = lineage / KEY_FILE
                form = json_safe(form)
                if not path.exists():
                    atomic_write_json(path, form)
                elif json.loads(path.read_text(encoding="utf-8")) != form:
                    raise ValueError(f"{lineage} holds another training config under the same key ({path}); "
                                     f"move that folder away or choose another output folder")
            yield lineage

    @staticmethod
    def key_form(config: Mapping[str, Any], tracking: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What :func:`model_key` hashes, as written to key.json."""
        return _form(config, tracking)

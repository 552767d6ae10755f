"""Weights & Biases as a training run's logger (``--logger wandb``; docs/wandb.md).

:class:`WandbLogger` logs a run's scalars under the names it is given (the shared tag scheme is
the caller's), its resolved config as the W&B config, figures as images and the final
checkpoint as an artifact of type "model", into one W&B run whose id (:attr:`WandbLogger.run_id`)
the caller keeps so that a resumed run continues the same W&B run.

Offline unless the user chose otherwise: the mode is "offline" when ``WANDB_MODE`` is unset, and
wandb's files go under ``RUN_DIR/wandb/`` whatever ``WANDB_DIR`` says (one ``offline-run-TIME-ID/``
folder per session; upload with ``wandb sync``). The project is "headgeom" unless
``WANDB_PROJECT`` names one, the run's name the run folder's unless ``WANDB_NAME`` does. wandb
prints nothing but its warnings and errors (``silent``) and leaves stdout/stderr unwrapped
(``console="off"``), unless ``WANDB_SILENT`` / ``WANDB_CONSOLE`` say otherwise.

Resuming: a resumed session logs only the steps after those the run has recorded, so that W&B
holds each step once. Online, W&B says where the run stands (``Run.starting_step``); offline it
starts every session at step 0, so this logger reads the steps the run's earlier sessions wrote
to their transaction logs (``RUN_DIR/wandb/*/run-ID.wandb``, :func:`recorded_last_step`). Where a
session was killed, :attr:`WandbLogger.first_step` may differ from the step the training resumes
at, both ways:

- later: the killed session had recorded steps after its last checkpoint, which the resumed one
  computes again; they are not logged twice (on CPU a resumed run is bit-identical, so W&B holds
  the numbers metrics.jsonl holds);
- earlier: wandb-core writes the log in 32 KiB pieces, and a SIGKILL loses what it had not
  written yet (seen with wandb 0.31: a session of six steps left an empty log). Those steps are
  missing from W&B; the caller may log them again from metrics.jsonl (:meth:`WandbLogger.log`
  takes any step from ``first_step`` on, in order).

wandb is an optional dependency (``pip install -e ".[wandb]"``) imported only by this module.
"""
from __future__ import annotations

import itertools
import numbers
import os
import shutil
import struct
import time
import warnings
import zlib
from pathlib import Path
from typing import Any

import wandb
from wandb.proto import wandb_internal_pb2

from headgeom.io import json_safe

__all__ = ["PROJECT", "WandbLogger", "open_wandb", "recorded_last_step"]

PROJECT = "headgeom"  # the W&B project unless WANDB_PROJECT names one

# wandb's transaction log: a 7-byte file header (b":W&B", magic 0xBEE1, version 0), then
# LevelDB-style 32 KiB blocks of chunks, each a 7-byte header (zlib CRC-32 of kind byte and
# payload, payload length, kind) and its payload; kinds FULL=1, FIRST=2, MIDDLE=3, LAST=4.
_BLOCK = 32768
_FILE_HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_CHUNK = struct.Struct("<IHB")


def _env_or(env: str, default: str) -> str:
    """The environment variable ``env`` when the user set it, else ``default`` (read at each
    session: wandb itself reads the environment once per process)."""
    return os.environ.get(env) or default


def _records(data: bytes, offset: int = 0) -> list[bytes]:
    """The complete records in ``data``, the bytes of a transaction log from ``offset`` (0, or a
    block boundary) on. Reading stops at the first torn or damaged chunk (the tail of a session
    killed mid-write), keeping what came before; the end of a record begun before ``offset`` is
    skipped."""
    if offset == 0:
        if not data.startswith(_FILE_HEADER):
            return []
        pos = len(_FILE_HEADER)
    else:
        pos = 0
    out, pending = [], None
    while pos + _CHUNK.size <= len(data):
        room = _BLOCK - (offset + pos) % _BLOCK
        if room < _CHUNK.size:  # block padding
            pos += room
            continue
        checksum, length, kind = _CHUNK.unpack_from(data, pos)
        payload = data[pos + _CHUNK.size:pos + _CHUNK.size + length]
        if len(payload) != length or zlib.crc32(bytes([kind]) + payload) != checksum or kind not in (1, 2, 3, 4):
            break
        pos += _CHUNK.size + length
        if kind in (1, 2):
            pending = payload
        elif pending is not None:
            pending += payload
        if kind in (1, 4) and pending is not None:
            out.append(pending)
            pending = None
    return out


def _record_type(payload: bytes) -> tuple[str | None, Any]:
    """(the kind of record, the Record) of one serialized record; (None, None) if unreadable."""
    record = wandb_internal_pb2.Record()
    try:
        record.ParseFromString(payload)
    except Exception:  # protobuf's DecodeError: a record this wandb cannot read
        return None, None
    return record.WhichOneof("record_type"), record


def _closed(path: Path) -> bool:
    """Whether the transaction log at ``path`` ends with its session's exit record (wandb-core
    writes it last, after ``Run.finish`` has returned); only the last block is read."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            offset = (size - 1) // _BLOCK * _BLOCK if size > _BLOCK else 0
            fh.seek(offset)
            tail = _records(fh.read(), offset)
    except FileNotFoundError:
        return False
    return bool(tail) and _record_type(tail[-1])[0] == "exit"


def recorded_last_step(wandb_dir: str | Path, run_id: str) -> int | None:
    """The last history step run ``run_id``'s sessions recorded in their transaction logs under
    ``wandb_dir`` (``*/run-ID.wandb``, online and offline): -1 when they recorded none, None when
    there is no log of the run."""
    last = None
    for path in Path(wandb_dir).glob(f"*/run-{run_id}.wandb"):
        if path.parent.is_symlink():  # latest-run
            continue
        last = -1 if last is None else last
        for payload in _records(path.read_bytes()):
            kind, record = _record_type(payload)
            if kind == "history":
                last = max(last, record.history.step.num)
    return last


class WandbLogger:
    """One session of a W&B run for the headgeom run in ``run_dir``.

    ``first_step``: the first step the training will log (0 for a new run, the checkpoint's step
    + 1 for a resumed one); ``run_id``: the W&B run to continue (None starts a new one).
    :attr:`first_step` is the first step this session logs: ``first_step`` for a new run, or for
    a resumed one of which W&B knows nothing here (no transaction log, ``Run.starting_step`` 0);
    else the step after the last one the run recorded (module docstring). Earlier steps are
    dropped."""

    def __init__(self, run_dir: str | Path, first_step: int, run_id: str | None = None) -> None:
        run_dir = Path(run_dir)
        (run_dir / "wandb").mkdir(parents=True, exist_ok=True)
        recorded = recorded_last_step(run_dir / "wandb", run_id) if run_id else None
        settings = {key: value for key, value, env in (("silent", True, "WANDB_SILENT"),
                                                      ("console", "off", "WANDB_CONSOLE"))
                    if not os.environ.get(env)}
        self._run = wandb.init(
            dir=str(run_dir), id=run_id, resume="allow" if run_id else None,
            mode=_env_or("WANDB_MODE", "offline"), project=_env_or("WANDB_PROJECT", PROJECT),
            name=_env_or("WANDB_NAME", run_dir.name),
            reinit="create_new",  # never return or finish a run the user has open in this process
            settings=wandb.Settings(**settings))
        self.run_id: str = self._run.id
        #: where this session's files are (``RUN_DIR/wandb/offline-run-TIME-ID`` offline)
        self.sync_dir = Path(self._run.settings.sync_dir)
        known = self._run.starting_step > 0 or recorded is not None
        self.first_step = (max(self._run.starting_step, -1 if recorded is None else recorded + 1)
                           if run_id and known else first_step)
        self._offline = self._run.offline
        self._step: int | None = None  # the last step this session handed to wandb
        self._artifacts = itertools.count()
        self._closed = False

    def _at(self) -> int:
        """The step a figure or artifact belongs to: the last step logged, else the first."""
        return self.first_step if self._step is None else self._step

    def log(self, step: int, scalars: dict[str, Any]) -> None:
        """Every real number of ``scalars`` under its name at ``step`` (calls at one step make one
        W&B history row); nothing before :attr:`first_step`."""
        values = {name: value if isinstance(value, int) else float(value) for name, value in scalars.items()
                  if isinstance(value, numbers.Real) and not isinstance(value, bool)}
        if step >= self.first_step and values:
            self._run.log(values, step=step)
            self._step = step

    def log_params(self, config: dict[str, Any]) -> None:
        """The resolved config as the run's W&B config (a resumed session may change a value)."""
        self._run.config.update(json_safe(config), allow_val_change=True)

    def log_figure(self, name: str, path: str | Path) -> None:
        """The image file at ``path`` (a PNG) as a ``wandb.Image`` named ``name``, at the last
        step logged."""
        step = self._at()
        self._run.log({name: wandb.Image(str(path))}, step=step)
        self._step = step

    def log_artifact(self, path: str | Path) -> None:
        """The checkpoint at ``path`` as a version of the artifact ``model-RUN_ID`` (type "model").

        wandb uploads an offline run's artifact files at ``wandb sync``, maybe after a resumed
        session has replaced the checkpoint: the artifact holds a snapshot under this session's
        folder (a hard link, since checkpoints are replaced by os.replace, else a copy)."""
        path = Path(path)
        if self._run.disabled:  # wandb writes nothing; neither does this
            return
        snapshot = self.sync_dir / "artifacts" / str(next(self._artifacts)) / path.name
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, snapshot)
        except OSError:
            shutil.copy2(path, snapshot)
        artifact = wandb.Artifact(f"model-{self.run_id}", type="model", metadata={"step": self._at()})
        artifact.add_file(str(snapshot), name=path.name, policy="immutable")
        self._run.log_artifact(artifact)

    def close(self, timeout: float = 60.0) -> None:
        """Finish this session of the run; offline, wait (up to ``timeout`` seconds, then warn)
        until wandb-core has written it all to the transaction log, so that a session opened next
        in this process (a resume) sees every step (online, W&B's ``starting_step`` tells it). A
        second call does nothing."""
        if self._closed:
            return
        self._closed = True
        self._run.finish()
        log = self.sync_dir / f"run-{self.run_id}.wandb"
        deadline = time.monotonic() + timeout
        while self._offline and not _closed(log):
            if time.monotonic() > deadline:
                warnings.warn(f"wandb has not finished writing {log} after {timeout:g} s; a run resumed "
                              f"now may log again the steps it has not written yet", stacklevel=2)
                return
            time.sleep(0.02)


def open_wandb(run_dir: Path, first_step: int, stored: dict[str, Any]) -> tuple[WandbLogger, dict[str, Any]]:
    """The W&B run of ``run_dir``: the one loggers.json keeps (``stored``, a resumed run) or a new
    one; its loggers.json entry (run id) for the next session."""
    logger = WandbLogger(run_dir, first_step, stored.get("run_id"))
    return logger, {"run_id": logger.run_id}

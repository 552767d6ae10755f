"""Where a command writes: checked before any work, and file-system errors said in one line.

A command declares its outputs (``Output(path, kind, option)``); :func:`check_output` refuses,
before the command loads a model or trains a step, an output that is a file where a folder is
needed (or the reverse), sits under a regular file, lies in a folder that cannot be written
(read-only file system, no permission) or on a full disk. :func:`os_error_message` turns an
OSError raised later (a disk that fills up during a run) into one line naming the path and
what to do.
"""
from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

__all__ = ["MIN_FREE_BYTES", "Output", "OutputError", "check_output", "json_output", "os_error_message"]

# Refuse up front when the disk has less than this left: not even a config.json and a first
# metrics line would fit with room to spare.
MIN_FREE_BYTES = 1 << 20


class OutputError(OSError):
    """An output location that cannot be written; the message says which and what to do."""


@dataclass(frozen=True)
class Output:
    """A path a command writes: a ``"dir"`` it fills or a ``"file"`` it writes, given by ``option``."""

    path: Path
    kind: Literal["dir", "file"]
    option: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))


def json_output(args: Any) -> list[Output]:
    """The output of a command whose only file is an optional ``--json FILE``."""
    return [Output(args.json, "file", "--json")] if args.json else []


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and not p.is_symlink() and p != p.parent:
        p = p.parent
    return p


def check_output(out: Output) -> None:
    """Raise :class:`OutputError` when ``out`` cannot be written; creates nothing."""
    path, opt = out.path, out.option
    if out.kind == "dir" and path.exists() and not path.is_dir():
        raise OutputError(f"{opt} {path} is a file, not a folder; choose a folder (it is created when missing)")
    if out.kind == "file" and path.is_dir():
        raise OutputError(f"{opt} {path} is a folder; give a file name, e.g. {path / 'result.json'}")
    folder = path if out.kind == "dir" else path.parent
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise OutputError(f"cannot create {folder}: {existing} is a regular file, not a folder; choose "
                          f"another {opt}, or move {existing} away")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write to {path}: {existing} is not writable (read-only file system or "
                          f"no permission); choose a writable {opt}")
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise OutputError(f"cannot write to {path}: only {free} bytes are free on the disk holding "
                          f"{existing}; free some space or choose {opt} on another disk")


def os_error_message(err: OSError, outputs: Sequence[Output] = ()) -> str:
    """One line for ``err``: what failed, at which path, and what to do.

    A project error with its own message (no errno) keeps it. ``outputs`` name the path when
    the OS did not (a write() that hit a full disk carries no file name).
    """
    if isinstance(err, OutputError) or err.errno is None:
        return str(err)
    path = err.filename if err.filename is not None else None
    where = f" {path}" if path is not None else (f" under {outputs[0].path}" if outputs else "")
    opts = "/".join(dict.fromkeys(o.option for o in outputs)) or "the output location"
    code = err.errno
    if code in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on the disk while writing{where}; free some space or choose {opts} on another disk"
    if code == errno.EROFS:
        return f"cannot write{where}: read-only file system; choose a writable {opts}"
    if code in (errno.EACCES, errno.EPERM):
        return f"permission denied:{where}; choose a location you can write ({opts}) or change its permissions"
    if code == errno.ENOTDIR:
        return f"cannot use{where}: a part of the path is a regular file, not a folder; choose another {opts}"
    if code == errno.EEXIST:
        return f"cannot create folder{where}: a file of that name exists; choose another {opts} or move the file"
    if code == errno.EISDIR:
        return f"{where.strip()} is a folder, not a file; give a file name"
    if code == errno.ENOENT:
        return f"no such file or folder:{where}"
    return f"{err.strerror or err}:{where}"

"""An advisory lock on a run folder, held while one process writes it.

``RUN/.lock`` is locked with ``fcntl.flock`` (exclusive, non-blocking) and holds its holder as
JSON (pid, host, start time, command), so a second writer is refused with one line naming the
first. The kernel drops a flock when its process dies, however it dies, so a dead holder never
blocks anyone; the file it leaves behind (``kill -9`` gives it no chance to remove it) is taken
over with a note naming the process that is gone. A clean release removes the file.

Removing a locked file has a classic race: a process that opened the old file may lock it after
its removal. :meth:`RunLock.acquire` therefore checks, once locked, that the path still names the
file it locked, and tries again otherwise.
"""
from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

__all__ = ["LOCK_NAME", "Holder", "RunLock", "RunLockedError", "pid_alive"]

LOCK_NAME = ".lock"


class RunLockedError(RuntimeError):
    """Another live process holds the run folder's lock; nothing was written."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run folder's lock."""

    pid: int
    host: str
    started: str  # ISO 8601, UTC
    command: str

    @classmethod
    def me(cls) -> Holder:
        started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        command = " ".join(sys.argv) or sys.executable
        return cls(os.getpid(), socket.gethostname(), started,
                   command if len(command) <= 200 else command[:197] + "...")  # the refusal stays one short line

    @classmethod
    def parse(cls, text: str) -> Holder | None:
        """The holder written in a lock file, or None for an empty or foreign file."""
        try:
            rec = json.loads(text)
            return cls(int(rec["pid"]), str(rec["host"]), str(rec["started"]), str(rec["command"]))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host}, started {self.started}: {self.command}"


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunLock:
    """``with RunLock(folder):`` holds ``folder/.lock`` (creating the folder) for the block.

    Raises :class:`RunLockedError` on entry when another process holds it, unless ``wait``: then it
    waits until the holder releases the lock (or dies), telling ``note`` once whom it waits for (the
    kernel wakes the waiter: no polling). ``note(message)`` is also told when a lock left by a process
    that is gone is taken over (default: stderr).
    """

    def __init__(self, folder: str | os.PathLike[str], note: Callable[[str], None] | None = None,
                 wait: bool = False) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.note = note or (lambda msg: print(msg, file=sys.stderr))
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this RunLock")
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise OSError(err.errno, f"cannot lock {self.path} ({err.strerror}): its file system does "
                                  f"not support file locks; choose an output folder on a local disk") from err
                previous = _holder_name(fd)
                who = previous.describe() if previous else "a process that has not written its name yet"
                if not self.wait:
                    os.close(fd)
                    raise RunLockedError(
                        f"{self.folder} is being written by another process ({who}); wait for it to "
                        f"finish, or choose another output folder") from None
                self.note(f"waiting for {self.folder}: another process holds it ({who})")
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # blocks until the holder releases it or dies
                except BaseException:  # Ctrl-C while waiting
                    os.close(fd)
                    raise
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # the holder removed the file between our open and our lock: start again
        previous = _read(fd)
        if previous is not None:
            gone = ("that process is gone" if previous.host != socket.gethostname() or not pid_alive(previous.pid)
                    else "that pid no longer holds the lock")
            self.note(f"note: took over the lock of {self.folder} left by pid {previous.pid} on host "
                      f"{previous.host} (started {previous.started}; {gone})")
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(Holder.me())) + "\n").encode(), 0)
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file (while still holding it) and unlock; a no-op when not held."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)  # closing drops the flock

    def empty_folder(self) -> Path:
        """Set the locked folder's contents aside in one atomic rename and go on holding the lock
        on an empty folder of the same name; the old contents are then deleted. Returns where they
        were set aside (gone on return; left there, whole, only if the process dies meanwhile).

        A crash leaves either the old folder whole or the new one: never a half-deleted run.
        """
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not held; acquire the lock before emptying {self.folder}")
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
        aside = self.folder.with_name(f".{self.folder.name}.replaced-{stamp}-{os.getpid()}")
        os.rename(self.folder, aside)
        old = RunLock(aside)  # the lock now held, on its file's new path
        old._fd, self._fd = self._fd, None
        self.acquire()  # the folder anew; refused only if another process created and locked it meanwhile
        old.release()
        shutil.rmtree(aside)
        return aside

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


NAME_WAIT_S = 2.0  # how long a refused writer waits for a holder that has locked but not yet written its name


def _holder_name(fd: int) -> Holder | None:
    """The holder of a busy lock. A holder writes its name just after locking, so a refusal that lands
    in between (two writers started together) reads an empty file: wait briefly for the name."""
    deadline = time.monotonic() + NAME_WAIT_S
    while (holder := _read(fd)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return holder


def _read(fd: int) -> Holder | None:
    try:
        return Holder.parse(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
    except OSError:
        return None

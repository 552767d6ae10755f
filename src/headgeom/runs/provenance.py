"""Where a result came from: the git revision of the headgeom source, library versions, the machine.

Every file a run writes (``config.json`` of ``headgeom train``, ``eval.json``, ``analysis.json``,
a reproduction's ``results.json``) carries :func:`environment`, so a number can be traced to the
code that produced it (the nanoGPT habit: a run's log carries its own code version and environment).
"""
from __future__ import annotations

import datetime as _dt
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy
import scipy
import torch

import headgeom

__all__ = ["environment", "git", "utc_now"]


def git(*args: str) -> str | None:
    """``git ARGS`` run in the headgeom source folder: its stdout, or None when git or the checkout
    is missing (an installed wheel) or the command fails."""
    try:
        out = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True,
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def environment() -> dict[str, Any]:
    """Git revision of the headgeom source ("unknown" outside a checkout), a dirty flag
    (tracked files changed; None when unknown), and library versions."""
    rev = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if rev else None
    return {
        "git_revision": rev or "unknown",
        "git_dirty": (bool(status) if status is not None else None),
        "versions": {"headgeom": headgeom.__version__, "torch": torch.__version__, "numpy": numpy.__version__,
                     "scipy": scipy.__version__, "python": platform.python_version()},
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }


def utc_now() -> str:
    """The time now in UTC, ISO 8601 to the second (the ``started``/``finished`` of run files)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

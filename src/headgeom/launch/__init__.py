"""Where the cells of ``headgeom reproduce`` run: in this process and local worker processes
(``local``) or as SLURM jobs (``slurm``, through submitit).

A launcher has ``run(tasks, on_result) -> Outcome`` and ``describe() -> dict``; the tasks and
every state it reports follow the file protocol of :mod:`headgeom.launch.cells`. This package's
``__init__`` imports neither torch nor submitit, so that building the command line stays fast.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

LAUNCHERS = ("local", "slurm")
CLUSTER_INSTALL = 'pip install -e ".[cluster]"'

__all__ = ["CLUSTER_INSTALL", "LAUNCHERS", "make_launcher"]


def make_launcher(name: str, out: Path, *, jobs: int | None = None, wait: bool = False, **overrides: Any) -> Any:
    """The launcher ``name`` for a run folder ``out``. ``jobs``: local worker processes (None: the
    usable cores); ``wait`` and ``overrides`` (partition, account, gpus, time, options): slurm only.
    Raises RuntimeError, in one line naming the install step, when submitit or sbatch is missing."""
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher {name!r}; choose one of {', '.join(LAUNCHERS)}")
    # Imported here, not at the top: local imports torch and slurm the optional submitit.
    if name == "local":
        return importlib.import_module("headgeom.launch.local").LocalLauncher(jobs)
    try:
        slurm = importlib.import_module("headgeom.launch.slurm")
    except ModuleNotFoundError as err:
        if err.name != "submitit":
            raise
        raise RuntimeError(f"--launcher slurm needs the optional dependency submitit, which is not installed; "
                           f"install it with: {CLUSTER_INSTALL}") from err
    return slurm.SlurmLauncher(Path(out) / "slurm", wait=wait, **overrides)

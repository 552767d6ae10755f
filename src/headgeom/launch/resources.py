"""What one cell needs from a machine or a SLURM allocation, and the command-line overrides.

Experiments declare a :class:`Resources` per preset (``Experiment.resources``); the user overrides
them with ``--partition``, ``--account``, ``--gpus-per-cell``, ``--time`` and ``--slurm-option
KEY=VALUE`` (:func:`with_overrides`). ``cpus`` is also the number of torch threads the cell's
process uses, so cells running side by side never oversubscribe the cores.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Resources:
    """One cell's allocation (one SLURM job or array task; one local worker process).

    gpus: GPUs per cell; tasks: processes per cell (None: one per GPU, at least one), which train
    one model together with DDP (headgeom.train.ddp reads SLURM's variables; gloo on CPU, nccl on
    GPU); cpus: cores per cell, shared out over its tasks (and their torch threads); mem_gb: memory
    per cell (None: the cluster's default share of the cores); time_min: wall-clock limit in minutes (SLURM kills
    the job after it; submitit checkpoints and requeues it 90 s before); partition/account: SLURM's;
    options: extra sbatch options as (key, value) pairs, e.g. (("constraint", "a100"),);
    expected_min: the expected wall-clock minutes of one cell on this allocation (a rough planning
    figure, its source stated where it is declared; ``headgeom reproduce --dry-run`` turns it into
    GPU-hours; None: unknown). Not sent to SLURM."""

    gpus: int = 0
    cpus: int = 1
    mem_gb: float | None = None
    time_min: int = 60
    partition: str | None = None
    account: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    expected_min: float | None = None
    tasks: int | None = None

    def __post_init__(self) -> None:
        for name in ("gpus", "cpus", "time_min"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "gpus" else 1):
                raise ValueError(f"Resources.{name} must be an integer >= {0 if name == 'gpus' else 1}; got {v!r}")
        if self.mem_gb is not None and not self.mem_gb > 0:
            raise ValueError(f"Resources.mem_gb must be positive or None; got {self.mem_gb!r}")
        if self.tasks is not None and (isinstance(self.tasks, bool) or not isinstance(self.tasks, int)
                                       or self.tasks < 1):
            raise ValueError(f"Resources.tasks must be a positive integer or None; got {self.tasks!r}")
        if self.expected_min is not None and not self.expected_min > 0:
            raise ValueError(f"Resources.expected_min must be positive or None; got {self.expected_min!r}")

    @property
    def processes(self) -> int:
        """Processes (SLURM tasks, DDP ranks) of one cell: ``tasks``, else one per GPU, at least one."""
        return self.tasks if self.tasks is not None else max(1, self.gpus)


def parse_time(text: str) -> int:
    """SLURM's time formats as whole minutes (rounded up): ``MM``, ``MM:SS``, ``HH:MM:SS``,
    ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``. Raises ValueError with the accepted forms."""
    t = str(text).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", t)
    if not m or (m.group(1) is None and m.group(4) is not None and m.group(3) is None):
        raise ValueError(f"--time {text!r} is not a SLURM time; use minutes (90), HH:MM:SS (1:30:00) "
                         "or D-HH:MM:SS (2-00:00:00)")
    days, a, b, c = (int(g) if g is not None else None for g in m.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        seconds = days * 86400 + a * 3600 + (b or 0) * 60 + (c or 0)
    elif c is not None:  # HH:MM:SS
        seconds = a * 3600 + b * 60 + c
    elif b is not None:  # MM:SS
        seconds = a * 60 + b
    else:  # MM
        seconds = a * 60
    if seconds <= 0:
        raise ValueError(f"--time {text!r} is zero; give a positive time limit")
    return -(-seconds // 60)


def parse_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--slurm-option`` (an sbatch long option without its dashes)."""
    key, sep, value = str(text).partition("=")
    key = key.strip().lstrip("-")
    if not sep or not key or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", key):
        raise ValueError(f"--slurm-option {text!r} is not KEY=VALUE (an sbatch option without its dashes, "
                         "e.g. constraint=a100 or qos=high)")
    return key, value


def with_overrides(base: Resources, *, partition: str | None = None, account: str | None = None,
                   gpus: int | None = None, time: str | None = None, options: list[str] | None = None) -> Resources:
    """``base`` with the command line's overrides (None: keep the experiment's value); options
    given twice keep the last value."""
    changes: dict = {}
    if partition is not None:
        changes["partition"] = partition
    if account is not None:
        changes["account"] = account
    if gpus is not None:
        changes["gpus"] = gpus
    if time is not None:
        changes["time_min"] = parse_time(time)
    if options:
        merged = dict(base.options)
        merged.update(parse_option(o) for o in options)
        changes["options"] = tuple(merged.items())
    return dataclasses.replace(base, **changes)

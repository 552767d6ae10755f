"""The narrow interface between the runner and the launchers: a cell task, its files, its state.

A cell task is a picklable call ``fn(*args)`` that runs one cell into ``run_dir`` and writes
``done.json`` (finished: the cell's metrics) or ``error.json`` (it raised: the error and its
traceback), as ``headgeom.experiments.runner.run_one_cell`` does; a call that finds ``done.json``
returns it without running again. Launchers decide only *where* the call runs; everything they
report is read back from these files, plus ``slurm.json`` (written at submission: job id and log
paths) and SLURM's queue, so a state survives the process that launched it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from headgeom.launch.resources import Resources

DONE, ERROR, SUBMITTED = "done.json", "error.json", "slurm.json"
STATES = ("done", "failed", "pending", "running", "missing")
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED"})  # SLURM states read as pending


@dataclass(frozen=True)
class CellTask:
    """One cell. ``fn`` is a module-level function (picklable by reference) when ``portable``:
    then it may run in a worker process or a SLURM job; a task that is not portable (an experiment
    registered from a script or a test, which a new process cannot import) runs in-process only.

    name: ``<experiment>/<cell-key>`` (status lines, logs); group: the experiment id (the tasks of
    a group that share their resources go in one SLURM job array); share: the trained model the cell
    trains or reuses (its trajectory's :func:`headgeom.runs.store.lineage_key`; None: it trains nothing),
    so a launcher can keep cells that share one from starting to train it at once."""

    name: str
    group: str
    run_dir: Path
    fn: Callable[..., dict[str, Any]]
    args: tuple
    resources: Resources = Resources()
    portable: bool = True
    share: str | None = None


@dataclass
class Outcome:
    """What a launcher's ``run`` leaves: ``results`` {run_dir: result} of the finished cells (the
    dicts of :func:`read_result`, status "reused" for cells finished before this call), the tasks
    still ``waiting`` in SLURM's queue (submitted without ``--wait``), and the jobs this call
    ``submitted`` as (task, job id)."""

    results: dict[Path, dict[str, Any]]
    waiting: list[CellTask] = field(default_factory=list)
    submitted: list[tuple[CellTask, str]] = field(default_factory=list)


@dataclass(frozen=True)
class CellState:
    """What a cell's folder and SLURM's queue say: state in ``STATES``, the job id (when it was
    submitted), the log to read, and one line of detail (the error's last line, the queue reason)."""

    state: str
    job_id: str | None = None
    log: Path | None = None
    detail: str = ""


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when it is missing, unreadable or not an object (a cell's files
    may be half-written by a process that was killed)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_result(run_dir: Path) -> dict[str, Any]:
    """The cell's outcome from its files: {"status": "done", "metrics", "elapsed_s"} from done.json,
    {"status": "failed", "error", "elapsed_s"} from error.json, or failed "no result" when neither
    is readable (the process was killed, or the cell never ran)."""
    done = read_json(run_dir / DONE)
    if done is not None and "metrics" in done:
        return {"status": "done", "metrics": done["metrics"], "elapsed_s": done.get("elapsed_s"),
                "cpu_s": done.get("cpu_s")}
    err = read_json(run_dir / ERROR)
    if err is not None:
        return {"status": "failed", "error": str(err.get("error", "unknown error")), "elapsed_s": err.get("elapsed_s")}
    sub = read_json(run_dir / SUBMITTED) or {}
    where = f" (SLURM job {sub['job_id']}, log {sub.get('stderr')})" if sub.get("job_id") else ""
    return {"status": "failed", "elapsed_s": None,
            "error": f"the cell ended without {DONE} or {ERROR}{where}: its process was killed, cancelled or "
                     "timed out; rerun the command to run it again"}


def last_line(path: Path | None, max_bytes: int = 65536) -> str:
    """The last non-empty line of a text file ('' when missing or empty)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - max_bytes))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return next((line.strip() for line in reversed(lines) if line.strip()), "")


def cell_state(run_dir: Path, queue: dict[str, tuple[str, str]] | None) -> CellState:
    """State of one cell: done (done.json) > pending/running (its job is in ``queue``, {job id:
    (SLURM state, reason)}) > failed (error.json, or a submitted job that left the queue without a
    result) > missing (never run). ``queue=None``: SLURM was not asked (a submitted cell without a
    result then reads as failed only if error.json says so, else pending with detail "unknown")."""
    sub = read_json(run_dir / SUBMITTED) or {}
    job_id = sub.get("job_id")
    log = Path(sub["stderr"]) if sub.get("stderr") else None
    if (run_dir / DONE).exists():
        return CellState("done", job_id, log)
    if job_id and queue is not None and job_id in queue:
        slurm_state, reason = queue[job_id]
        state = "pending" if slurm_state in WAITING else "running"
        return CellState(state, job_id, log, slurm_state.lower() + (f" ({reason})" if reason not in ("", "None") else ""))
    err = read_json(run_dir / ERROR)
    if err is not None:
        lines = str(err.get("error", "")).strip().splitlines()
        return CellState("failed", job_id, log or run_dir / ERROR, lines[-1] if lines else "unknown error")
    if job_id:
        if queue is None:
            return CellState("pending", job_id, log, "submitted; SLURM's queue could not be read")
        return CellState("failed", job_id, log, f"job {job_id} left the queue without a result (cancelled, timed "
                         f"out or killed); last log line: {last_line(log) or '(empty log)'}")
    return CellState("missing")

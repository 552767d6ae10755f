"""Per-cell state of a run folder (``headgeom reproduce --status``) and SLURM's queue as read by squeue.

Job states come from ``squeue`` (pending, running) and from the cells' own files (done.json,
error.json); never from ``sacct``, which needs an accounting database that many clusters (and the
local test cluster of tools/local_slurm.sh) do not run.
"""
from __future__ import annotations

import getpass
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from headgeom.launch.cells import STATES, SUBMITTED, CellState, CellTask, cell_state


def read_queue() -> dict[str, tuple[str, str]]:
    """{job id: (state, reason)} of this user's jobs in SLURM's queue, one entry per array task
    (``123_4``). Raises RuntimeError when squeue fails (controller down, no SLURM)."""
    cmd = ["squeue", "--noheader", "--array", "--user", getpass.getuser(), "--format", "%i|%T|%r"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"could not read SLURM's queue with squeue: {err}") from err
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"squeue failed (exit {out.returncode}): {why}; is the SLURM controller running?")
    queue = {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            queue[parts[0]] = (parts[1], parts[2])
    return queue


def cell_states(tasks: list[CellTask]) -> list[CellState]:
    """The state of every task's cell; squeue is asked only when some cell was submitted to SLURM
    (and when it cannot be asked, submitted cells without a result read as pending, "unknown")."""
    queue = None
    if any((t.run_dir / SUBMITTED).exists() for t in tasks) and shutil.which("squeue"):
        try:
            queue = read_queue()
        except RuntimeError:
            queue = None
    return [cell_state(t.run_dir, queue) for t in tasks]


def format_status(tasks: list[CellTask], states: list[CellState], out: Path) -> str:
    """One line per experiment with its counts, then one line per cell: state, cell, job id, and
    for failed (and waiting) cells the detail and the log to read; paths relative to ``out``."""

    def rel(p: Path | None) -> str:
        if p is None:
            return ""
        try:
            return str(Path(p).relative_to(out))
        except ValueError:
            return str(p)

    lines = []
    groups: dict[str, list[tuple[CellTask, CellState]]] = {}
    for task, state in zip(tasks, states):
        groups.setdefault(task.group, []).append((task, state))
    for group, items in groups.items():
        counts = Counter(s.state for _, s in items)
        lines.append(f"{group}: {len(items)} cells: " + ", ".join(f"{counts[k]} {k}" for k in STATES if counts[k]))
        for task, s in items:
            line = f"  {s.state:<8} {task.name}"
            if s.job_id:
                line += f"  job {s.job_id}"
            if s.state != "done" and s.detail:
                line += f"  {s.detail}"
            if s.state == "failed" and s.log is not None:
                line += f"  log: {rel(s.log)}"
            lines.append(line)
    total = Counter(s.state for s in states)
    lines.append("total: " + ", ".join(f"{total[k]} {k}" for k in STATES if total[k]))
    return "\n".join(lines)

"""``--launcher slurm``: every cell is one SLURM job, submitted through submitit.

submitit is an optional dependency (``pip install -e ".[cluster]"``): this module imports it at
the top and is itself imported only when the slurm launcher is chosen (:func:`headgeom.launch.make_launcher`).

- The cells of one experiment that share their resources go in one job array; each task's logs
  land under ``OUT/slurm/<experiment>/`` and its job id and log paths in ``<cell>/slurm.json``.
- ``run`` submits the cells that are missing or failed (a cell whose job is still queued or running
  is left alone, a finished one is never recomputed) and returns, unless ``wait``: then it polls
  squeue and the cells' files until no job of the run is left in the queue.
- Timeout and preemption: submitit sends USR2 90 s before the limit (and SLURM on preemption); the
  job's callable is :class:`CellJob`, a ``submitit.helpers.Checkpointable``, so submitit requeues the
  same call and the cell resumes from its own checkpoints (a training cell from ``<cell>/train``;
  other cells are short and start again). A job cancelled outright (``scancel``) is resubmitted by
  the next run of the command and resumes the same way.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import submitit

from headgeom.io import atomic_write_json
from headgeom.launch.cells import SUBMITTED, CellTask, Outcome, cell_state, read_result
from headgeom.launch.local import set_threads
from headgeom.launch.resources import Resources, with_overrides
from headgeom.launch.status import read_queue

OnResult = Callable[[CellTask, dict[str, Any]], None]


class CellJob(submitit.helpers.Checkpointable):
    """The callable a SLURM job runs: one cell task with the job's cores as torch threads.

    ``checkpoint`` (inherited) hands submitit the same call to requeue on timeout or preemption;
    the call then resumes from the cell's files."""

    def __init__(self, fn: Callable[..., dict[str, Any]]) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> dict[str, Any]:
        set_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", "1")))
        return self.fn(*args)


def sbatch_parameters(res: Resources, job_name: str) -> dict[str, Any]:
    """submitit.SlurmExecutor parameters of one cell's allocation: one node, one task per process
    of the cell (``res.processes``: one per GPU), the cell's cores shared out over its tasks."""
    tasks = res.processes
    params: dict[str, Any] = {"job_name": job_name, "time": res.time_min, "nodes": 1, "ntasks_per_node": tasks,
                              "cpus_per_task": max(1, res.cpus // tasks)}
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    if res.mem_gb is not None:
        params["mem"] = f"{math.ceil(res.mem_gb * 1024)}M"
    if res.partition:
        params["partition"] = res.partition
    if res.account:
        params["account"] = res.account
    if res.options:
        params["additional_parameters"] = dict(res.options)
    return params


class SlurmLauncher:
    """Submit cells as SLURM jobs (see the module docstring). ``folder``: where submitit writes its
    scripts, pickles and logs (``OUT/slurm``); ``overrides``: the keyword arguments of
    :func:`headgeom.launch.resources.with_overrides` applied to every cell's resources."""

    name = "slurm"

    def __init__(self, folder: Path, *, wait: bool = False, poll_s: float = 5.0, max_timeouts: int = 3,
                 **overrides: Any) -> None:
        if shutil.which("sbatch") is None:
            raise RuntimeError("--launcher slurm needs SLURM's sbatch, which is not on PATH; run on a cluster's "
                               "login node, or start a local test cluster: apt-get install -y slurm-wlm munge && "
                               "tools/local_slurm.sh start")
        with_overrides(Resources(), **overrides)  # a bad --time or --slurm-option fails before any work
        self.folder = Path(folder)
        self.wait = wait
        self.poll_s = poll_s
        self.max_timeouts = max_timeouts
        self.overrides = overrides

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "wait": self.wait, "overrides": {k: v for k, v in self.overrides.items() if v}}

    def run(self, tasks: list[CellTask], on_result: OnResult | None = None) -> Outcome:
        """Submit what is missing or failed; with ``wait``, return once every cell has a result."""
        stuck = sorted({t.group for t in tasks if not t.portable})
        if stuck:
            raise ValueError(f"experiment(s) {', '.join(stuck)} cannot run as SLURM jobs: a job imports the module "
                             "whose EXPERIMENT attribute is the experiment, and these were registered otherwise; "
                             "use --launcher local")
        queue = read_queue()
        before = {t.run_dir: cell_state(t.run_dir, queue) for t in tasks}
        todo = [t for t in tasks if before[t.run_dir].state in ("missing", "failed")]
        submitted = self.submit(todo)
        results: dict[Path, dict[str, Any]] = {}
        for t in tasks:
            if before[t.run_dir].state == "done":
                results[t.run_dir] = {**read_result(t.run_dir), "status": "reused"}
                if on_result is not None:
                    on_result(t, results[t.run_dir])
        waiting = [t for t in tasks if t.run_dir not in results]
        while waiting and self.wait:
            time.sleep(self.poll_s)
            queue = read_queue()
            still = []
            for t in waiting:
                if cell_state(t.run_dir, queue).state in ("pending", "running"):
                    still.append(t)
                else:
                    results[t.run_dir] = read_result(t.run_dir)
                    if on_result is not None:
                        on_result(t, results[t.run_dir])
            waiting = still
        return Outcome(results, waiting, submitted)

    def resources(self, task: CellTask) -> Resources:
        """The task's allocation: its experiment's per-preset resources with the command line's
        overrides (what the command line names wins)."""
        return with_overrides(task.resources, **self.overrides)

    def executor(self, group: str, res: Resources) -> submitit.SlurmExecutor:
        """The submitit executor of one job array (submits nothing until ``submit`` is called on it)."""
        executor = submitit.SlurmExecutor(folder=self.folder / group, max_num_timeout=self.max_timeouts)
        executor.update_parameters(**sbatch_parameters(res, f"headgeom-{group}"))
        return executor

    def submit(self, tasks: list[CellTask]) -> list[tuple[CellTask, str]]:
        """One job array per (experiment, resources); writes each cell's slurm.json."""
        groups: dict[tuple[str, Resources], list[CellTask]] = {}
        for t in tasks:
            groups.setdefault((t.group, self.resources(t)), []).append(t)
        submitted = []
        for (group, res), members in groups.items():
            executor = self.executor(group, res)
            try:
                with executor.batch():
                    jobs = [executor.submit(CellJob(t.fn), *t.args) for t in members]
            except submitit.core.utils.FailedJobError as err:
                why = [line for line in str(err).splitlines() if line.strip()]
                raise RuntimeError(f"sbatch refused the {len(members)} cell(s) of {group}: "
                                   f"{why[-1] if why else err}") from err
            now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
            for t, job in zip(members, jobs):
                atomic_write_json(t.run_dir / SUBMITTED, {
                    "job_id": job.job_id, "stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr),
                    "submitted": now, "resources": dataclasses.asdict(res)})
                submitted.append((t, job.job_id))
        return submitted

"""``--launcher local``: the cells run on this machine, independent cells side by side.

With ``jobs`` = 1 every cell runs in this process, one after another (the runner's historical
behaviour, and the Python API's default). With ``jobs`` > 1 the portable cells that are not
finished yet run in ``jobs`` worker processes (spawned, so no OpenMP state is forked), each with
``cores // jobs`` torch threads so the workers never oversubscribe the cores; finished cells and
cells that only this process can import (experiments registered from a script or a test) run here.
Workers take the cells in order as they free up, except that two cells sharing a trained model
(``CellTask.share``: one trains it, the other reuses it from the run's store) never run at once: a cell
whose model another worker is busy with waits and the next cell starts instead, so no worker sits idle
waiting on the store's lock.
"""
from __future__ import annotations

import importlib
import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterable

import torch

from headgeom.launch.cells import DONE, CellTask, Outcome, read_result

OnResult = Callable[[CellTask, dict[str, Any]], None]


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask; os.cpu_count() where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def set_threads(threads: int) -> None:
    """This process's torch intra-op threads, and the OpenMP/MKL default of what it starts."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    torch.set_num_threads(threads)


def start_worker(threads: int) -> None:
    """A worker process's start: its threads (:func:`set_threads`), and torch._dynamo imported now, which
    torch.optim imports on a process's first optimizer (about 1 s of CPU): paid once per worker at its
    start rather than inside its first training cell, whose recorded time calibrates the progress estimate."""
    set_threads(threads)
    importlib.import_module("torch._dynamo")


class LocalLauncher:
    """Run cells on this machine (see the module docstring); ``jobs`` None = :func:`usable_cores`."""

    name = "local"

    def __init__(self, jobs: int | None = None) -> None:
        if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
            raise ValueError(f"--jobs must be a positive integer; got {jobs!r}")
        self.jobs = usable_cores() if jobs is None else jobs

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "jobs": self.jobs}

    def run(self, tasks: list[CellTask], on_result: OnResult | None = None) -> Outcome:
        """Run every task; returns their results (each task's own return value, or what its files
        say when its worker process died)."""
        results: dict = {}

        def finish(task: CellTask, res: dict[str, Any]) -> None:
            results[task.run_dir] = res
            if on_result is not None:
                on_result(task, res)

        parallel = [t for t in tasks if t.portable and not (t.run_dir / DONE).exists()] if self.jobs > 1 else []
        if len(parallel) < 2:
            parallel = []
        chosen = {id(t) for t in parallel}
        for task in tasks:
            if id(task) not in chosen:
                finish(task, task.fn(*task.args))
        if parallel:
            self._run_pool(parallel, finish)
        return Outcome(results)

    def _run_pool(self, tasks: list[CellTask], finish: OnResult) -> None:
        workers = min(self.jobs, len(tasks))
        threads = max(1, usable_cores() // workers)
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=start_worker, initargs=(threads,))
        pending, running = list(tasks), {}
        try:
            while pending or running:
                while len(running) < workers and (task := next_startable(pending, running.values())) is not None:
                    pending.remove(task)
                    running[pool.submit(task.fn, *task.args)] = task
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = running.pop(fut)
                    try:
                        res = fut.result()
                    except Exception as err:  # noqa: BLE001 - a dead worker fails its cells, not the run
                        res = read_result(task.run_dir)
                        if res["status"] == "failed":
                            res["error"] = f"{res['error']} ({type(err).__name__}: {err})"
                    finish(task, res)
        except BaseException:
            # Ctrl-C: the cells not started are dropped, the running ones end (the interrupt reached
            # them too) or finish; one shutdown call, since a second one would undo the cancelling
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


def next_startable(pending: list[CellTask], running: Iterable[CellTask]) -> CellTask | None:
    """The first pending task whose trained model (``share``) no running task holds (None: none may start)."""
    busy = {t.share for t in running if t.share is not None}
    return next((t for t in pending if t.share is None or t.share not in busy), None)

"""Benchmark: how true is the time left that ``headgeom reproduce`` shows? A finished run replayed.

    python benchmarks/bench_progress.py --runs reproduce-out [--preset quick] [--jobs 2] [--json PATH]

Nothing is trained: the cells of ``--preset`` are planned as ``headgeom reproduce`` plans them, each
cell's true time is the ``elapsed_s`` its ``done.json`` holds in the finished folder ``--runs``, and the
run is replayed on a simulated clock with ``--jobs`` workers taking cells in order (the local launcher's
pool). At every 5 % of the replayed wall time (and at each finished cell) it compares the true time
left with two estimates, as a fresh output folder would show them:

- ``cost``: :class:`headgeom.launch.progress.Tracker` (the cost model, calibrated by the cells finished
  so far; no records of earlier runs);
- ``count``: the cell-counting estimate the progress bar used before (cells left × wall time per
  finished cell, tqdm's rate without smoothing).

Prints the prior's error per calibration group (true cell time / prior: the median and range over its
cells), one row per 5 % of the replay, and the median over the samples of |log2(estimate / true)|
(0: exact, 1: off by 2×), over the first 90 % of the run (the last seconds of any estimate are noise).
"""
from __future__ import annotations

import argparse
import heapq
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

from headgeom.experiments.runner import cell_progress, cell_tasks, plan_experiments
from headgeom.launch.cost import prior_seconds
from headgeom.launch.local import LocalLauncher
from headgeom.launch.progress import Tracker, left_text


def true_times(plan_tasks: list, runs: Path, out: Path) -> dict:
    """{run dir of the plan: elapsed_s of the same cell in the finished folder ``runs``}."""
    times = {}
    for task in plan_tasks:
        done = runs / task.run_dir.relative_to(out)
        rec = json.loads((done / "done.json").read_text(encoding="utf-8"))
        times[task.run_dir] = float(rec["elapsed_s"])
    return times


def replay(items: list, times: dict, jobs: int) -> list[tuple[float, object]]:
    """(finish time, key) of every cell when ``jobs`` workers take the cells in order."""
    free = [(0.0, w) for w in range(jobs)]
    heapq.heapify(free)
    finish = []
    for item in items:
        start, w = heapq.heappop(free)
        end = start + times[item.key]
        finish.append((end, item.key))
        heapq.heappush(free, (end, w))
    return sorted(finish, key=lambda e: e[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--runs", required=True, type=Path, help="a finished headgeom reproduce output folder")
    p.add_argument("--preset", default="quick")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="write the samples and medians here")
    args = p.parse_args()

    plan, _ = plan_experiments(None, args.preset, None)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        tasks = cell_tasks(plan, out, args.preset, {})
        items = cell_progress(plan, tasks, out, args.preset, LocalLauncher(args.jobs)).tracker.items
        times = true_times(tasks, args.runs.resolve(), out)
    events = replay(items, times, args.jobs)
    end = events[-1][0]
    tracker = Tracker(items, {}, args.jobs, 0.0)
    grid = [end * k / 20 for k in range(20)]
    samples, n_done, i = [], 0, 0
    for t in sorted(grid + [e[0] for e in events[:-1]]):
        while i < len(events) and events[i][0] <= t:
            tracker.finish(events[i][1], times[events[i][1]], events[i][0])
            n_done, i = n_done + 1, i + 1
        cost = tracker.snapshot(t).left_s
        count = (len(items) - n_done) * t / n_done if n_done else None
        samples.append({"t": t, "done": n_done, "true": end - t, "cost": cost, "count": count,
                        "on_grid": t in grid})

    def error(key: str) -> float:
        errs = [abs(math.log2(s[key] / s["true"])) for s in samples
                if s["t"] <= 0.9 * end and s[key] and s["true"] > 0]
        return statistics.median(errs)

    ratios: dict[str, list[float]] = {}
    for item in items:
        ratios.setdefault(item.work.group, []).append(times[item.key] / prior_seconds(item.work))
    print(f"{'group':<16} {'cells':>5} {'true / prior: median':>21} {'range':>12}")
    for group, r in ratios.items():
        print(f"{group:<16} {len(r):>5} {statistics.median(r):>21.2f} {min(r):>5.2f}-{max(r):<6.2f}")
    print(f"\n{len(items)} cells, {args.jobs} workers, replayed wall time {end:.0f} s (sum of cell times "
          f"{sum(times.values()):.0f} s)")
    print(f"{'t (s)':>7} {'cells':>9} {'true left':>10} {'cost model':>11} {'cell count':>11}")
    for s in samples:
        if s["on_grid"]:
            count = left_text(s["count"]) if s["count"] is not None else "-"
            print(f"{s['t']:7.0f} {s['done']:>4}/{len(items):<4} {left_text(s['true']):>10} "
                  f"{left_text(s['cost']):>11} {count:>11}")
    medians = {"cost": error("cost"), "count": error("count")}
    print(f"median |log2(estimate / true)| over the first 90 %: cost model {medians['cost']:.2f}, "
          f"cell count {medians['count']:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"cells": len(items), "jobs": args.jobs, "wall_s": end, "samples": samples,
                                         "median_log2_error": medians, "true_over_prior": ratios}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: how long ``headgeom --help`` (and ``headgeom train --help``) take, against the
interpreter's own start and against ``import torch`` (what every help page paid before the
parsers became torch-free), each in a fresh process, interleaved so load changes weigh on all.

    python benchmarks/bench_cli_startup.py [--repeats 7] [--json PATH]

Reports the median wall and CPU seconds (user + system of the child) per command.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

from headgeom.io import atomic_write_json

COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "headgeom --help": [sys.executable, "-m", "headgeom.cli", "--help"],
    "headgeom train --help": [sys.executable, "-m", "headgeom.cli", "train", "--help"],
    "python -c 'import torch'": [sys.executable, "-c", "import torch"],
}


def _time(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args()
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, argv in COMMANDS.items():
            times[name].append(_time(argv))
    rows = {name: {"wall_s": statistics.median(w for w, _ in t), "cpu_s": statistics.median(c for _, c in t)}
            for name, t in times.items()}
    load = os.getloadavg()[0]
    print(f"{platform.node()}, load {load:.1f}, {args.repeats} repeats (medians)")
    for name, r in rows.items():
        print(f"{name:<28} wall {r['wall_s']:6.3f} s   cpu {r['cpu_s']:6.3f} s")
    if args.json:
        atomic_write_json(args.json, {"repeats": args.repeats, "load": load, "rows": rows})


if __name__ == "__main__":
    main()

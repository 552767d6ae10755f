"""Benchmark: the default ``headgeom reproduce`` of two checkouts, side by side, from one command.

    python benchmarks/bench_reproduce.py --base ../main --new . --out bench-out [--preset quick]
        [--jobs 2] [--one-after-the-other] [--json PATH]
    python benchmarks/bench_reproduce.py --table BASE/results.json NEW/results.json   # the table of two finished runs

Each checkout runs ``python -m headgeom reproduce --preset P --out OUT/<base|new> --quiet --jobs J`` with
the Python of ``<checkout>/.venv`` (a link to another checkout's environment will do: ``<checkout>/src``
comes first on PYTHONPATH, so a ``git archive`` of a revision is a checkout) under ``/usr/bin/time -v``: user + system CPU of
the whole command, its worker processes included, wall time and peak RSS. Both run **at the same time**
by default, so that other work on a shared machine weighs on both alike (their CPU seconds compare; their
wall times do not mean "on idle cores": each has half the machine); ``--one-after-the-other`` runs them in
turn (the wall time of each then says what the command costs alone, on a quiet machine). The load
average is read before and after.

Prints per experiment the cell time summed over its cells (``cells_elapsed_s`` of results.json: wall
seconds of cells that may run side by side) and, where results.json has it, the cells' own CPU seconds
(``cells_cpu_s``, written since the trained-model store), for base and new with their ratio, then the
whole command's CPU, wall and peak RSS. With the trained-model store a cell that reuses a model costs only
its measurements and the cell that trains it carries the training, so compare totals, not single rows.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from headgeom.io import atomic_write_json

TIME_FIELDS = {"user_s": r"User time \(seconds\): ([\d.]+)", "system_s": r"System time \(seconds\): ([\d.]+)",
               "wall": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)",
               "peak_rss_kb": r"Maximum resident set size \(kbytes\): (\d+)", "exit": r"Exit status: (\d+)"}


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def parse_time(text: str) -> dict[str, Any]:
    """The fields of ``/usr/bin/time -v``'s report that this benchmark reads (wall in seconds)."""
    out: dict[str, Any] = {}
    for key, pattern in TIME_FIELDS.items():
        found = re.search(pattern, text)
        if found is None:
            continue
        value = found.group(1)
        if key == "wall":
            seconds = 0.0
            for part in value.split(":"):
                seconds = 60 * seconds + float(part)
            out["wall_s"] = seconds
        else:
            out[key] = float(value) if "." in value else int(value)
    if "user_s" in out and "system_s" in out:
        out["cpu_s"] = out["user_s"] + out["system_s"]
    return out


def start(checkout: Path, out: Path, preset: str, jobs: int) -> tuple[subprocess.Popen, Path]:
    """Start one checkout's reproduce under /usr/bin/time -v; its report goes to ``out``.time."""
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists() or not (checkout / "src" / "headgeom").is_dir():
        raise SystemExit(f"{checkout} needs src/headgeom and a virtual environment in .venv (a link to one will do)")
    report = out.with_suffix(".time")
    cmd = ["/usr/bin/time", "-v", "-o", str(report), str(python), "-m", "headgeom", "reproduce", "--preset", preset,
           "--out", str(out), "--quiet", "--jobs", str(jobs)]
    # the checkout's own source first, whatever the environment installed (its workers inherit it)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout / "src"), os.environ.get("PYTHONPATH", "")])}
    log = open(out.with_suffix(".log"), "w", encoding="utf-8")  # noqa: SIM115 - closed when the process ends
    return subprocess.Popen(cmd, cwd=out.parent, env=env, stdout=log, stderr=subprocess.STDOUT), report


def experiments(results: Path) -> dict[str, dict[str, Any]]:
    return json.loads(results.read_text(encoding="utf-8"))["experiments"]


def table(base: Path, new: Path) -> list[str]:
    """Markdown rows: per experiment the cell seconds (wall, summed over cells) and CPU seconds of both runs."""
    a, b = experiments(base), experiments(new)
    rows = ["| experiment | cells | base: cell s | new: cell s | new / base | base: cell CPU s | new: cell CPU s |",
            "|---|---|---|---|---|---|---|"]
    sums = [0.0, 0.0, 0.0, 0.0]

    def cpu(e: dict[str, Any]) -> float | None:
        return e.get("cells_cpu_s")

    for exp in sorted(set(a) | set(b), key=lambda k: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", k)]):
        ea, eb = a.get(exp, {}), b.get(exp, {})
        sa, sb = ea.get("cells_elapsed_s"), eb.get("cells_elapsed_s")
        ratio = f"{sb / sa:.2f}" if sa and sb is not None and sa > 0.5 else "-"
        for i, v in enumerate((sa, sb, cpu(ea), cpu(eb))):
            sums[i] += float(v or 0.0)
        fmt = (lambda v: "-" if v is None else f"{v:.1f}")
        rows.append(f"| {exp} | {eb.get('n_cells', ea.get('n_cells', '-'))} | {fmt(sa)} | {fmt(sb)} | {ratio} | "
                    f"{fmt(cpu(ea))} | {fmt(cpu(eb))} |")
    rows.append(f"| all | | {sums[0]:.1f} | {sums[1]:.1f} | {sums[1] / sums[0]:.2f} | "
                f"{sums[2]:.1f} | {sums[3]:.1f} |" if sums[0] else "| all | | - | - | - | - | - |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--base", type=Path, help="the checkout to compare against (e.g. main)")
    ap.add_argument("--new", type=Path, help="the checkout measured")
    ap.add_argument("--out", type=Path, help="a folder for both runs (base/, new/ and their .time, .log)")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--one-after-the-other", action="store_true", help="run base, then new (default: both at once)")
    ap.add_argument("--table", nargs=2, type=Path, metavar=("BASE", "NEW"), help="only print the table of two results.json")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args()
    if args.table:
        print("\n".join(table(*args.table)))
        return 0
    if not (args.base and args.new and args.out):
        ap.error("give --base, --new and --out (or --table BASE NEW)")
    args.out = args.out.resolve()  # each checkout runs in its own folder: /usr/bin/time -o needs an absolute path
    args.out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"preset": args.preset, "jobs": args.jobs, "load_before": load(),
                              "together": not args.one_after_the_other, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    runs = {}
    for name, checkout in (("base", args.base), ("new", args.new)):
        out = args.out / name
        if out.exists():
            raise SystemExit(f"{out} exists: give a fresh --out (every cell must run)")
        runs[name] = start(checkout.resolve(), out, args.preset, args.jobs)
        if args.one_after_the_other:
            runs[name][0].wait()
            record[f"load_after_{name}"] = load()
    for name, (proc, _) in runs.items():
        proc.wait()
    record["load_after"] = load()
    for name, (proc, report) in runs.items():
        record[name] = {"returncode": proc.returncode, **parse_time(report.read_text(encoding="utf-8"))}
    rows = table(args.out / "base" / "results.json", args.out / "new" / "results.json")
    print("\n".join(rows))
    for name in ("base", "new"):
        r = record[name]
        print(f"{name}: CPU {r.get('cpu_s', float('nan')):.0f} s (user {r.get('user_s')} + system {r.get('system_s')}), "
              f"wall {r.get('wall_s', float('nan')):.0f} s, peak RSS {r.get('peak_rss_kb', 0) / 2**20:.2f} GiB, "
              f"exit {r.get('exit')}")
    print(f"load average before {record['load_before']}, after {record['load_after']}")
    if args.json:
        atomic_write_json(args.json, {**record, "table": rows})
    return 0 if all(record[n]["returncode"] == 0 for n in ("base", "new")) else 1


if __name__ == "__main__":
    sys.exit(main())

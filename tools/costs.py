"""The README's cost figures: measured with GNU time, kept in one table of BENCHMARKS.md, quoted by README.md.

    python tools/costs.py measure "headgeom hessian --head 512-2048-2048:silu ..."   # run it, print its row
    python tools/costs.py measure --write "headgeom hessian ..."                    # and put the row in BENCHMARKS.md
    python tools/costs.py quote                                                     # README.md's quotes from the table

A command, written as the README shows it, runs under ``/usr/bin/time -v bash -c`` in a new temporary
folder (or ``--cwd``): its wall time, its peak memory (the maximum resident set of
the largest process, which is what GNU time reports for a command that starts workers) and its CPU
time (user + system); the 1-minute load average (``/proc/loadavg``) is read every 10 s while it runs, and the machine's
float64 GEMM rate once before it (machines of one kind differ by 2x and more).
A run whose load went above the machine's cores shared them, and its row says so: its wall time is
pessimistic and is to be retaken on a quiet machine. ``tests/test_docs_facts.py`` checks that every
command the README shows has a row and that the README quotes it as :func:`quote` writes it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## What the README's commands cost"
ANCHOR = "BENCHMARKS.md#what-the-readmes-commands-cost"
FIELDS = ("wall", "memory", "cpu", "machine", "measured")
QUOTE = re.compile(r"^Cost on two cores: .*\)\.$", flags=re.M)


def cost_rows(benchmarks: str) -> dict[str, dict[str, str]]:
    """The costs table under :data:`HEADING`: command (its backquoted cell) -> {wall, memory, cpu, machine, measured}."""
    section = benchmarks.split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 1 + len(FIELDS) and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = dict(zip(FIELDS, cells[1:]))
    return rows


def quote(row: dict[str, str]) -> str:
    """How the README quotes a row, under the command's code block."""
    return (f"Cost on two cores: {row['wall']} wall, {row['memory']} peak memory ({row['machine']}; "
            f"[BENCHMARKS.md]({ANCHOR})).")


def readme_blocks(readme: str) -> list[tuple[list[str], str]]:
    """Each ```` ```bash ```` block of ``readme``: (its command lines, continuations joined and comments
    dropped; the text after it up to the next block)."""
    parts = re.split(r"```bash\n(.*?)```", readme, flags=re.S)
    out = []
    for block, after in zip(parts[1::2], parts[2::2]):
        lines = [ln.partition(" #")[0].strip() for ln in re.sub(r"\s*\\\n\s*", " ", block).splitlines()]
        out.append(([ln for ln in lines if ln], after))
    return out


def row_of(line: str, rows: dict[str, dict[str, str]]) -> str | None:
    """The table's command that README line ``line`` runs (``. .venv/bin/activate && X`` runs X)."""
    return next((c for c in rows if line == c or line.endswith("&& " + c)), None)


def with_quotes(readme: str, rows: dict[str, dict[str, str]]) -> str:
    """``readme`` with the quotes under its code blocks rewritten from ``rows`` (the block's own quote
    lines replaced, new ones added right below it)."""
    out, pos = [], 0
    for m in re.finditer(r"```bash\n(.*?)```\n", readme, flags=re.S):
        out.append(readme[pos:m.end()])
        pos = m.end()
        (lines, _), = readme_blocks(m.group(0))
        quotes = [quote(rows[c]) for c in (row_of(ln, rows) for ln in lines) if c is not None]
        old = re.match(r"(\n(?:Cost on two cores: [^\n]*\n)+)", readme[pos:])
        if old:
            pos += old.end()
        if quotes:
            out.append("\n" + "\n".join(quotes) + "\n")
    return "".join(out) + readme[pos:]


# ----------------------------------------------------------------------------- measuring
def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    hours, rest = divmod(seconds, 3600)
    return (f"{hours} h " if hours else "") + f"{rest // 60} min {rest % 60} s"


def time_report(text: str) -> dict[str, float]:
    """Wall seconds, peak resident bytes and CPU seconds from ``/usr/bin/time -v``'s report."""
    def field(name: str) -> str:
        return re.search(rf"^\s*{re.escape(name)}: (.+)$", text, flags=re.M).group(1)
    wall = 0.0
    for part in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"):
        wall = wall * 60 + float(part)
    return {"wall": wall, "memory": int(field("Maximum resident set size (kbytes)")) * 1024,
            "cpu": float(field("User time (seconds)")) + float(field("System time (seconds)"))}


def row(report: dict[str, float], loads: list[float], commit: str, day: str, cores: int = 2,
        gemm: float | None = None) -> dict[str, str]:
    """The table's cells for one measured run; ``gemm``: the machine's float64 GEMM rate in GFLOP/s
    (:func:`gemm_rate`), named in the machine cell, since machines of one kind differ by 2x or more."""
    low, high = min(loads), max(loads)
    rate = f" at {gemm:.0f} GFLOP/s float64 GEMM" if gemm is not None else ""
    machine = (f"quiet machine{rate}, load ≤ {high:.1f}" if high <= cores + 0.5 else
               f"shared machine{rate}, load {low:.1f}–{high:.1f}: to retake on a quiet one")
    return {"wall": _duration(report["wall"]), "memory": f"{report['memory'] / 2**30:.2f} GiB",
            "cpu": _duration(report["cpu"]), "machine": machine, "measured": f"{day}, {commit}"}


def gemm_rate(n: int = 2048, repeats: int = 3) -> float:
    """The machine's float64 GEMM rate (GFLOP/s, the fastest of ``repeats`` warm n x n products, torch's
    default threads) by benchmarks/gemm_rate.py, read in a child process so this tool does not import torch."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); from gemm_rate import matmul_rate; "
            f"print(matmul_rate({n}, {repeats}, best=True))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"costs: could not read the machine's GEMM rate with {sys.executable} (run this tool with "
                         f"the project's environment active):\n{done.stderr.strip()}")
    return float(done.stdout.strip())


def measure(command: str, cwd: Path) -> dict[str, str]:
    """Run the shell line ``command`` in ``cwd`` under GNU time and return its row (its output is shown)."""
    gemm = gemm_rate()  # before the command: the machine, not the command's load
    loads, done = [], threading.Event()

    def sample() -> None:
        while True:
            loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
            if done.wait(10):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        code = subprocess.run(["/usr/bin/time", "-v", "-o", report.name, "bash", "-c", command], cwd=cwd).returncode
        done.set()
        sampler.join()
        if code != 0:
            raise SystemExit(f"costs: `{command}` exited {code}; nothing recorded")
        text = Path(report.name).read_text()
    loads.append(float(Path("/proc/loadavg").read_text().split()[0]))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    return row(time_report(text), loads, commit, dt.date.today().isoformat(), os.cpu_count() or 2, gemm)


def table_line(command: str, cells: dict[str, str]) -> str:
    return "| `" + command + "` | " + " | ".join(cells[f] for f in FIELDS) + " |"


def write_row(benchmarks: str, command: str, cells: dict[str, str]) -> str:
    """``benchmarks`` with ``command``'s row replaced by ``cells`` (added at the table's end if new)."""
    head, section = benchmarks.split(f"\n{HEADING}\n", 1)
    section, sep, tail = section.partition("\n## ")
    lines = section.split("\n")
    mine = [i for i, ln in enumerate(lines) if ln.startswith(f"| `{command}` |")]
    if mine:
        lines[mine[0]] = table_line(command, cells)
    else:
        last = max(i for i, ln in enumerate(lines) if ln.startswith("|"))
        lines.insert(last + 1, table_line(command, cells))
    return f"{head}\n{HEADING}\n" + "\n".join(lines) + sep + tail


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    m = sub.add_parser("measure", allow_abbrev=False, help="run a command under GNU time and print its row")
    m.add_argument("--write", action="store_true", help="also put the row in BENCHMARKS.md's costs table")
    m.add_argument("--cwd", type=Path, default=None, help="where to run it (default: a new temporary folder)")
    m.add_argument("command", help="the command line as the README shows it (one argument; run by bash)")
    sub.add_parser("quote", allow_abbrev=False, help="rewrite README.md's cost quotes from BENCHMARKS.md")
    args = p.parse_args(argv)
    if args.action == "quote":
        rows = cost_rows((ROOT / "BENCHMARKS.md").read_text(encoding="utf-8"))
        readme = ROOT / "README.md"
        readme.write_text(with_quotes(readme.read_text(encoding="utf-8"), rows), encoding="utf-8")
        return 0
    cwd = args.cwd or Path(tempfile.mkdtemp(prefix="headgeom-cost-"))
    cells = measure(args.command, cwd)
    print(table_line(args.command, cells))
    if args.write:
        path = ROOT / "BENCHMARKS.md"
        path.write_text(write_row(path.read_text(encoding="utf-8"), args.command, cells), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

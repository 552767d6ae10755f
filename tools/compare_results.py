"""Compare two ``headgeom reproduce`` outputs: every claim row, table, note and config equal, reports equal
up to what differs between two invocations (times, dates, the environment, the --out folder, reused cells).

    python tools/compare_results.py BASE NEW            # two output folders (or two results.json files)
    python tools/compare_results.py BASE NEW --reports  # also report.md and report.html, masked (below)

What is ignored, and only that: the top level's ``finished``, ``environment`` and ``command`` (it names
the --out folder); per experiment ``elapsed_s``, ``cells_elapsed_s``, ``cells_cpu_s`` and ``n_reused``. Rows are compared as
parsed JSON (key order is not a value), an optional key written as null counting as absent. In the reports
the same things are masked: the --out folder, the finishing date, the git revision and versions line, the
seconds of each run line and its "N reused" count. Exit status 0 when everything else is equal, 1 with the
differences printed (at most ``--max`` of them) otherwise. A refactor that must leave results unchanged is
checked by rerunning into a copy of the earlier output folder (every cell is reused, so it takes seconds).
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from pathlib import Path
from typing import Any

TOP_IGNORED = ("finished", "environment", "command")
EXPERIMENT_IGNORED = ("elapsed_s", "cells_elapsed_s", "cells_cpu_s", "n_reused")
OPTIONAL_ROW_KEYS = ("reason", "budget", "out_of_distribution", "conventions", "robustness", "view_gap",
                     "incomplete")


def _results_path(path: Path) -> Path:
    return path / "results.json" if path.is_dir() else path


def _row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not (k in OPTIONAL_ROW_KEYS and v is None)}


def _diff(where: str, a: Any, b: Any, out: list[str]) -> None:
    """Append a line per difference between ``a`` and ``b`` (recursing into dicts and lists)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(dict.fromkeys([*a, *b])):
            if k not in b:
                out.append(f"{where}.{k}: only in BASE ({json.dumps(a[k])[:120]})")
            elif k not in a:
                out.append(f"{where}.{k}: only in NEW ({json.dumps(b[k])[:120]})")
            else:
                _diff(f"{where}.{k}", a[k], b[k], out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(f"{where}[{i}]", x, y, out)
    elif a != b or type(a) is not type(b):
        out.append(f"{where}: BASE {json.dumps(a)[:200]} != NEW {json.dumps(b)[:200]}")


def compare_results(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The differences between two results.json dicts, outside the ignored fields (module docstring)."""
    out: list[str] = []
    top = [k for k in dict.fromkeys([*base, *new]) if k not in TOP_IGNORED and k not in ("experiments", "claims")]
    for k in top:
        _diff(k, base.get(k), new.get(k), out)
    exps_a, exps_b = base.get("experiments", {}), new.get("experiments", {})
    if list(exps_a) != list(exps_b):
        out.append(f"experiments: BASE {list(exps_a)} != NEW {list(exps_b)}")
    for eid in exps_a:
        if eid in exps_b:
            strip = lambda e: {k: v for k, v in e.items() if k not in EXPERIMENT_IGNORED}  # noqa: E731
            _diff(f"experiments.{eid}", strip(exps_a[eid]), strip(exps_b[eid]), out)
    rows_a, rows_b = base.get("claims", []), new.get("claims", [])
    if len(rows_a) != len(rows_b):
        out.append(f"claims: {len(rows_a)} rows in BASE, {len(rows_b)} in NEW")
    for i, (a, b) in enumerate(zip(rows_a, rows_b)):
        _diff(f"claims[{i}] ({a.get('experiment')} {a.get('id')})", _row(a), _row(b), out)
    return out


def _masked(text: str, out_dir: str) -> str:
    """A report's text with what differs between two invocations masked (module docstring)."""
    text = text.replace(out_dir.rstrip("/"), "<OUT>")
    text = re.sub(r"finished [0-9T:.+\-Z]+", "finished <DATE>", text)
    text = re.sub(r"Code: git .*?(CUDA [^.<]*)", "Code: <ENVIRONMENT>", text)
    text = re.sub(r"[0-9.e+\-]+ s in this invocation, [0-9.e+\-]+ s of cell time", "<TIME>", text)
    return re.sub(r", \d+ reused from an earlier run", "", text)


def compare_reports(base_dir: Path, new_dir: Path, base_out: str, new_out: str) -> list[str]:
    """Unified diffs of report.md and report.html (masked), one entry per differing line."""
    out: list[str] = []
    for name in ("report.md", "report.html"):
        a = _masked((base_dir / name).read_text(encoding="utf-8"), base_out).splitlines()
        b = _masked((new_dir / name).read_text(encoding="utf-8"), new_out).splitlines()
        out += [f"{name}: {line[:300]}" for line in difflib.unified_diff(a, b, "BASE", "NEW", lineterm="", n=0)
                if not line.startswith(("---", "+++"))]
    return out


def _out_dir(results: dict[str, Any]) -> str:
    """The --out folder a results file was written to, from its command."""
    found = re.search(r"--out (\S+)", results.get("command", ""))
    return found.group(1) if found else "\0"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--reports", action="store_true", help="also compare report.md and report.html")
    parser.add_argument("--max", type=int, default=60, help="print at most this many differences")
    args = parser.parse_args(argv)
    base = json.loads(_results_path(args.base).read_text(encoding="utf-8"))
    new = json.loads(_results_path(args.new).read_text(encoding="utf-8"))
    diffs = compare_results(base, new)
    if args.reports:
        diffs += compare_reports(_results_path(args.base).parent, _results_path(args.new).parent,
                                 _out_dir(base), _out_dir(new))
    for line in diffs[:args.max]:
        print(line)
    if len(diffs) > args.max:
        print(f"... and {len(diffs) - args.max} more")
    print(f"{len(base.get('claims', []))} rows and {len(base.get('experiments', {}))} experiments compared: "
          + (f"{len(diffs)} difference(s)" if diffs else "equal"), file=sys.stderr)
    return int(bool(diffs))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

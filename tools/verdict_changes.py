"""The verdicts of two ``headgeom reproduce`` outputs side by side: one markdown line per claim row whose evidence
kind or verdict differs, and the rows only one of them has, so a release note quotes what changed from the
results files rather than by hand.

    python tools/verdict_changes.py BASE NEW           # two output folders or results.json files
    python tools/verdict_changes.py BASE NEW --all     # every row, changed or not

Rows are matched by experiment, claim and name (:func:`headgeom.claims.row.row_name`, the setting keys that
tell a claim's rows apart) and, where several rows share those, by their order. Rows are read as stored, not
re-checked: an earlier file may hold a row today's checks refuse (an identity that held without data), and
its verdict then is what changed. Exit status 0; 2, with one line, when a results file cannot be read.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from headgeom.claims.row import row_name
from headgeom.claims.sources import AUTHORS


def rows_by_key(path: Path) -> dict[tuple[str, str, int], dict]:
    """(experiment, row name with its source, index among equal keys) -> row as stored, from a results.json or its
    folder."""
    path = path / "results.json" if path.is_dir() else path
    seen: dict[tuple[str, str], int] = defaultdict(int)
    out = {}
    for entry in json.loads(path.read_text(encoding="utf-8")).get("claims", []):
        source = "authors" if entry.get("source") == AUTHORS else "ours"
        key = (entry.get("experiment") or "?", f"{row_name(entry.get('id'), entry.get('setting'))} [{source}]")
        out[(*key, seen[key])] = entry
        seen[key] += 1
    return out


def state(row: dict | None) -> str:
    """"kind: verdict" of a row, "-" for a row that is absent."""
    return "-" if row is None else f"{row.get('evidence')}: {row.get('verdict')}"


def changes(base: Path, new: Path, every: bool = False) -> list[str]:
    """The markdown table's lines (header first)."""
    a, b = rows_by_key(base), rows_by_key(new)
    lines = ["| experiment | row | before | after |", "|---|---|---|---|"]
    for key in sorted(set(a) | set(b)):
        before, after = state(a.get(key)), state(b.get(key))
        if every or before != after:
            lines.append(f"| {key[0]} | {key[1].replace('|', '/')} | {before} | {after} |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--all", action="store_true", help="every row, not only those that changed")
    args = parser.parse_args(argv)
    try:
        print("\n".join(changes(args.base, args.new, args.all)))
    except (OSError, ValueError) as err:  # a missing or unreadable results file: one line, no traceback
        print(f"verdict_changes: cannot read the results: {err}; give two reproduce output folders or their "
              "results.json", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

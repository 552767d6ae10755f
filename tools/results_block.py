"""Rewrite README.md's results block from the committed results files (headgeom.report.results_block).

    python tools/results_block.py            # rewrite README.md in place
    python tools/results_block.py --check    # exit 1 if README.md's block differs (what the test checks)
"""
from __future__ import annotations

import sys
from pathlib import Path

from headgeom.io import atomic_write_text
from headgeom.report.results_block import render_block, replace_block

ROOT = Path(__file__).resolve().parents[1]
# (results file, title): each written by the command its "command" field names
SOURCES = [(Path("docs/results/quick.json"), "The quick preset of every experiment, on 2 CPU cores"),
           (Path("docs/results/c4_paper.json"), "C4 at the paper's projector widths (512-2048-2048), on CPU")]


def main(argv: list[str]) -> int:
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = replace_block(text, render_block([s for s in SOURCES if (ROOT / s[0]).exists()], ROOT))
    if "--check" in argv:
        return int(new != text)
    atomic_write_text(readme, new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

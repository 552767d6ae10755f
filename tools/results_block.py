"""Rewrite the results blocks from the committed results files (headgeom.report.results_block): the full
block of docs/results.md and the short summary of README.md.

    python tools/results_block.py            # rewrite both in place
    python tools/results_block.py --check    # exit 1 if either differs (what the test checks)
"""
from __future__ import annotations

import sys
from pathlib import Path

from headgeom.io import atomic_write_text
from headgeom.report.results_block import (BEGIN, END, SUMMARY_BEGIN, SUMMARY_END, render_block, render_summary,
                                           replace_block)

ROOT = Path(__file__).resolve().parents[1]
# (results file, title): each written by the command its "command" field names
SOURCES = [(Path("docs/results/quick.json"), "The quick preset of every experiment, on 2 CPU cores"),
           (Path("docs/results/c4_paper.json"), "C4 at the paper's projector widths (512-2048-2048), on CPU")]
# (page, renderer, begin marker, end marker)
TARGETS = [(Path("docs/results.md"), render_block, BEGIN, END),
           (Path("README.md"), render_summary, SUMMARY_BEGIN, SUMMARY_END)]


def rendered(page: Path) -> tuple[str, str]:
    """(the page's text now, the text with its block re-rendered)."""
    _, render, begin, end = next(t for t in TARGETS if t[0] == page)
    text = (ROOT / page).read_text(encoding="utf-8")
    sources = [s for s in SOURCES if (ROOT / s[0]).exists()]
    return text, replace_block(text, render(sources, ROOT), begin, end)


def main(argv: list[str]) -> int:
    stale = []
    for page, *_ in TARGETS:
        text, new = rendered(page)
        if new != text:
            stale.append(page)
            if "--check" not in argv:
                atomic_write_text(ROOT / page, new)
    if "--check" in argv:
        for page in stale:
            print(f"{page}: the results block differs from the committed results files", file=sys.stderr)
        return int(bool(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

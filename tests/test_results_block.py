"""README's verdict numbers come from committed results files the tool wrote, never typed by hand.

The block between the results markers is re-rendered from the files tools/results_block.py names and
must match README.md to the character; an edited number, or a results file changed without
re-rendering, fails here."""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from headgeom.report.results_block import BEGIN, END, render_block, replace_block

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _tool():
    spec = importlib.util.spec_from_file_location("results_block_tool", ROOT / "tools" / "results_block.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _block(text: str) -> str:
    return text[text.index(BEGIN):text.index(END) + len(END)]


def test_every_results_file_exists_and_was_written_by_headgeom_reproduce():
    for rel, _ in _tool().SOURCES:
        results = json.loads((ROOT / rel).read_text(encoding="utf-8"))
        assert results["command"].startswith("headgeom reproduce"), rel
        assert results["claims"] and all("verdict" in c and "evidence" in c for c in results["claims"]), rel


def test_the_readme_block_is_the_rendering_of_the_committed_results():
    text = README.read_text(encoding="utf-8")
    expected = render_block(_tool().SOURCES, ROOT)
    assert _block(text) == expected, "README.md's results block is stale or edited: run python tools/results_block.py"


def test_an_edited_number_in_the_block_is_caught():
    text = README.read_text(encoding="utf-8")
    block = _block(text)
    match = re.search(r"\d\.\d+", block)
    assert match, "the block quotes no number"
    edited = block[:match.start()] + str((int(block[match.start()]) + 1) % 10) + block[match.start() + 1:]
    assert edited != render_block(_tool().SOURCES, ROOT)


def test_replace_block_needs_both_markers():
    with pytest.raises(ValueError, match="results:begin"):
        replace_block("no markers here", "x")
    assert replace_block(f"a {BEGIN} old {END} b", "NEW") == "a NEW b"

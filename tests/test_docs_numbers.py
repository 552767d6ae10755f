"""No hand-typed measurement anywhere in README.md or docs/ (tools/doc_numbers.py states the rule): every number on
every page is rendered from a results file, code, a name or a reference, no measurement by its form, a constant,
a figure quoted from BENCHMARKS.md and found there, or allowed with a reason; the rule itself is checked on built
pages that hold each case, a hand-typed measurement among them."""
from __future__ import annotations

from pathlib import Path

import pytest
from script_modules import tool

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return tool("doc_numbers")


TOOL = _tool()


def _found(text: str, benchmarks: str = "") -> list[str]:
    return [c.number for c in TOOL.candidates("page.md", text, benchmarks)]


def test_every_number_on_every_page_is_accounted_for():
    left, stale = TOOL.unexplained()
    assert not left, "hand-typed measurements (render them from a results file, quote BENCHMARKS.md, or remove " \
                     "them; a number that is no measurement goes into ALLOWED with its reason):\n" + \
                     "\n".join(str(c) for c in left)
    assert not stale, f"ALLOWED entries that match nothing any more (remove them): {stale}"
    assert {p.relative_to(ROOT).as_posix() for p in TOOL.pages()} >= {"README.md", "docs/paper.md", "docs/results.md"}


@pytest.mark.parametrize("text, expected", [
    ("the blocks are tiny (λ_max ≈ 2e-11 on the quick preset's collapsed ReLU head)", ["≈ 2e-11"]),
    ("the quick preset took 15.5 min on two cores", ["15.5 min"]),
    ("the head compresses orbits 21.85× and keeps 0.93 of the accuracy", ["21.85×", "0.93"]),
    ("C9 came out 3 supported, 1 inconclusive", ["3 supported", "1 inconclusive"]),
    ("a drop of about 40 points, ~12 s a cell, 2.3 GiB at peak, 42% of the time", ["about 40", "~12 s", "2.3 GiB",
                                                                                  "42%"]),
    ("```bash\nheadgeom reproduce --seeds 3   # 12.5 s on a laptop\n```", ["12.5 s"]),  # a code comment is prose
])
def test_a_hand_typed_measurement_is_caught(text, expected):
    assert _found(text) == expected


@pytest.mark.parametrize("text", [
    "ResNet-18 on CIFAR-10 and ViT-S/16 in float64, L2-normalised, a 2-D PCA, SHA-256",   # names
    "C4 (§3.8, Thm 3.1, Table 5, Fig. 3, pitfall [2]); 2026-12-05; torch 2.13.0; v0.3; arXiv 2605.17180",
    "14 runs, 3 seeds, batch 512, 50 epochs",                                            # plain integers
    "supported if ratio <= 0.1 and ε ≥ 1e-3; floor −1e-10·max|λ|; a fixed 0.5/√k; weights ×0.1",  # constants
    "lr 0.05, momentum 0.9, temperature 0.1, width 0.25; the 95% CI; a 512 × 512 block; at most 2× suppression",
    "`--set view_noise=0.3` and\n\n```python\nx = 0.25 * y\n```\n",                     # code
    "<!-- results:begin -->\n| C4 | 0.93 ± 0.01 | 3 supported |\n<!-- results:end -->",  # a rendered block
])
def test_what_is_no_measurement_passes(text):
    assert _found(text) == []


def test_a_benchmark_figure_passes_only_when_benchmarks_md_has_it():
    text = "The exact blocks take about 0.08 s per sample, 11.6× the loop (BENCHMARKS.md)."
    assert _found(text, "| 256 | 0.08 s | **11.6×** |") == []
    assert _found(text, "| 256 | 0.081 s | **11.6×** |") == ["about 0.08 s"]  # not inside a longer number
    assert _found(text.replace(" (BENCHMARKS.md)", ""), "| 256 | 0.08 s | **11.6×** |") == ["about 0.08 s", "11.6×"]


def test_an_allowed_number_needs_its_entry_and_a_stale_entry_is_said():
    text = "The paper reports compression 21.85× for ResNet-18."
    (c,) = TOOL.candidates("x.md", text, "")
    entry = ("x.md", "compression 21.85× for ResNet-18", TOOL.PAPER)
    assert TOOL.allowed(c, text, (entry,)) == entry
    assert TOOL.allowed(c, text, (("y.md", *entry[1:]),)) is None  # another page's entry
    assert TOOL.allowed(c, text, (("x.md", "compression 4015×", TOOL.PAPER),)) is None
    for page, snippet, reason in TOOL.ALLOWED:
        assert (ROOT / page).is_file() and snippet and reason, (page, snippet)


def test_the_hand_typed_eigenvalues_of_paper_md_are_gone():
    """docs/paper.md §4.2 quoted λmax ≈ 2e-11 and λmin ≈ −1e-19 of the quick preset, in no results file."""
    text = (ROOT / "docs/paper.md").read_text(encoding="utf-8")
    assert "2e-11" not in text and "1e-19" not in text


def test_each_rendered_block_names_the_test_that_checks_it():
    for name, test in TOOL.RENDERED.items():
        assert f"{name}:begin" in (ROOT / test).read_text(encoding="utf-8") or name in ("results", "results-summary")
        assert (ROOT / test).is_file()

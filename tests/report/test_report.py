"""report.md rendering from a hand-written results dict, and figure saving (PNG, Agg, closed)."""
import re
import io

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure
from PIL import Image

from headgeom.claims.row import Row
from headgeom.report import (claims_table, figure_file_name, figure_png_bytes, format_claims_short, format_measured,
                             make_figure, render_report, save_figure, use_agg, write_report)
from headgeom.report.figures import DPI

CLAIM = {"id": "C9", "experiment": "C9", "statement": "orbits | shrink", "setting": {"head": "relu", "preset": "quick"},
         "measured": {"ratio": {"value": 21.85, "n": 3, "spread": 1.5, "spread_kind": "std over n (ddof=1)"},
                      "ci": {"value": 2.0, "n": 50, "spread": 0.1, "spread_kind": "95% CI half-width"},
                      "count": 7},
         "verdict": "supported", "criterion": "ratio > 1 for every seed", "evidence": "test", "headline": "ratio"}


def _results(**over):
    exp = {"title": "Orbit compression", "statement": "the head compresses orbits", "config": {"epochs": 2, "lr": 0.1, "train": {"batch_size": 64, "data_options": {"n": 8}}},
           "seeds": 3, "n_cells": 4, "n_failed": 1, "n_reused": 2, "elapsed_s": 1.234, "cells_elapsed_s": 3.5,
           "tables": [("Ratios", "| a | b |\n|---|---|\n| 1 | 2 |")], "notes": ["trace ratio reported beside"],
           "figures": ["figures/C9_orbits.png"], "runs": "runs/C9",
           "failed_cells": [{"key": "seed=2-abcdef12", "cell": {"seed": 2}, "error": "RuntimeError: nan loss",
                             "error_file": "runs/C9/seed=2-abcdef12/error.json"}],
           "errors": []}
    exp.update(over)
    return {"preset": "quick", "seeds": None, "command": "headgeom reproduce --preset quick --only C9 --out o",
            "experiments": {"C9": exp}, "claims": [dict(CLAIM, incomplete="1 of 4 cells failed")],
            "environment": {"git_revision": "0123abc", "git_dirty": False,
                            "versions": {"headgeom": "0.1.0", "torch": "2.x"}, "platform": "linux",
                            "torch_threads": 2, "cuda": False},
            "load_errors": {}, "finished": "2026-01-01T00:00:00+00:00"}


def test_format_measured():
    assert format_measured({"value": 1.23456, "n": 3, "spread": 0.5}) == "1.235 ± 0.5 (n=3)"
    assert format_measured({"value": None, "n": 2, "spread": 0.0}) == "nan ± 0 (n=2)"
    assert format_measured(CLAIM["measured"]["ci"]) == "2 ± 0.1 (n=50) [95% CI half-width]"
    assert format_measured(7) == "7" and format_measured("inf") == "inf"


def _rows(*entries):
    return [Row.from_json(e) for e in entries]


def test_claims_table_rows_and_escaping():
    text = claims_table(_rows(CLAIM))
    lines = text.splitlines()
    assert lines[0] == "| row | id | statement | setting | measured | evidence | verdict | criterion |"
    row = lines[2]
    assert row.startswith("| 1 | C9 | orbits \\| shrink | head=relu; preset=quick | ")
    # the headline (the measure that decided) first and in bold, then the other entries
    assert "**ratio: 21.85 ± 1.5 (n=3)**<br>ci: 2 ± 0.1 (n=50) [95% CI half-width]<br>count: 7" in row
    assert row.endswith("| test | **supported** | ratio > 1 for every seed |")
    assert row.count(" | ") == 7  # eight cells: the escaped pipe does not open a new column
    assert "No claim entries" in claims_table([])


def test_a_rows_headline_leads_and_values_per_group_form_a_small_table():
    claim = dict(CLAIM, headline="count", measured={
        "ratio": {"value": 2.0, "n": 3, "spread": 0.1}, "count": 7,
        "threshold[gelu]": {"value": 0.3, "n": 5, "spread": 0.01}, "threshold[silu]": {"value": 0.2, "n": 5, "spread": 0.02},
        "lambda_min_H[silu]": {"value": -1e-4, "n": 5, "spread": 1e-5}})
    text = claims_table(_rows(claim))
    row = text.splitlines()[2]
    assert "**count: 7**<br>ratio: 2 ± 0.1 (n=3)<br>per 2 groups: table 1 below" in row
    assert "threshold" not in row  # not one cell of many values
    table = text[text.index("Table 1 (C9"):].splitlines()
    assert table[2] == "| | threshold | lambda_min_H |"
    assert table[4] == "| gelu | 0.3 ± 0.01 (n=5) | - |"
    assert table[5] == "| silu | 0.2 ± 0.02 (n=5) | -0.0001 ± 1e-05 (n=5) |"


def test_report_is_readable_on_its_own():
    md = render_report(_results())
    assert md.startswith("# headgeom: claims report")
    assert "`headgeom reproduce --preset quick --only C9 --out o`" in md and "0123abc" in md
    # the bottom lines lead, then the summary, then per claim its bottom line, its rows and the experiment section
    assert md.index("## Bottom lines") < md.index("| **C9** | the head compresses augmentation orbits while keeping "
                                                  "classes apart (Tables 1, 5) | **holds**: 1 of our test rows")
    assert md.index("## Summary") < md.index("| **C9** |", md.index("## Summary")) < md.index("## Details")
    assert md.index("## Details") < md.index("## C9: ") < md.index("**Bottom line:** **holds**") < md.index("| C9 |")
    assert md.index("| C9 |") < md.index("### C9: Orbit compression")
    assert "**supported** (1 of 4 cells failed)" in md and "**Warning:** 1 cell failed and 0 summary steps raised" in md
    section = md[md.index("## C9: Orbit compression"):]
    assert "> the head compresses orbits" in section
    assert "4 cells (1 failed, 2 reused from an earlier run), seeds 3" in section and "1.23 s" in section
    assert "| epochs | `2` |" in section and "| lr | `0.1` |" in section
    # a nested config one row per field, named as --set names it
    assert "| train.batch_size | `64` |" in section and "| train.data_options | `{'n': 8}` |" in section
    assert "### Ratios\n\n| a | b |" in section
    assert "![C9_orbits](figures/C9_orbits.png)" in section
    assert "- trace ratio reported beside" in section
    assert "`seed=2-abcdef12`: RuntimeError: nan loss (traceback in `runs/C9/seed=2-abcdef12/error.json`)" in section


def test_report_without_failures_and_with_summary_errors(tmp_path):
    res = _results(n_failed=0, failed_cells=[], errors=["summarize raised:\nTraceback ..."])
    res["claims"] = [CLAIM]
    md = render_report(res)
    assert "### Failed cells" not in md and "### Errors in the summary" in md and "Traceback ..." in md
    assert "0 cells failed and 1 summary step raised" in md  # nouns agree with their counts
    one = render_report(_results(n_cells=1, n_failed=0, n_reused=0, failed_cells=[]))
    assert "**Run:** 1 cell (0 failed)" in one
    path = write_report(tmp_path / "sub" / "report.md", res)
    assert path.read_text() == md


def _words(text):
    return text.replace("\n", " ").split()


def test_short_claims_table():
    text = format_claims_short(_rows(dict(CLAIM, incomplete="x")))
    header, counts, row, total, tests = text.splitlines()
    assert header == "C9  orbits | shrink"
    assert counts == "  ours: tests: 1 supported"  # the claim's counts per source, as the report's summary says them
    # the headline (the measure that decided) and how many others report.md holds
    assert row == "  [test] supported (incomplete)  ratio: 21.85 ± 1.5 (n=3); +2 more in report.md"
    assert (total, tests) == ("1 claim entry (only tests count as support):", "  tests: 1 supported")
    # narrow: every line fits, and the cells wrap between words: no word is cut, none is lost
    narrow = format_claims_short(_rows(dict(CLAIM, incomplete="x")), width=20)
    assert all(len(line) <= 20 for line in narrow.splitlines()) and "..." not in narrow
    assert sorted(_words(narrow)) == sorted(_words(text))
    # a word longer than the width stands whole on its own line
    long = format_claims_short(_rows(dict(CLAIM, statement="a supercalifragilistic word")), width=12)
    assert "supercalifragilistic" in long.splitlines()
    row = format_claims_short(_rows(dict(CLAIM, headline="count")), width=200).splitlines()[2]
    assert row == "  [test] supported  count: 7; +2 more in report.md"
    # the headline in words where the row has them
    worded = format_claims_short(_rows(dict(CLAIM, headline_text="orbit spread of z over h(z)")), width=200)
    assert "  [test] supported  orbit spread of z over h(z): 21.85 ± 1.5 (n=3)" in worded


def test_short_claims_table_gathers_a_claims_rows_from_every_experiment():
    """One block per claim over every experiment's rows: the rows differ by their settings, and by the
    experiment that made them when several did; diagnostic rows come last, said never to count."""
    rows = [dict(CLAIM, setting={"head": h, "preset": "quick"}, verdict=v)
            for h, v in (("relu", "supported"), ("silu", "not supported"))]
    grid = dict(CLAIM, experiment="GRID", setting={"head": "gelu", "preset": "quick"}, verdict="inconclusive")
    fixed = dict(CLAIM, experiment="GRID", setting={"head": "tanh", "preset": "quick"}, evidence="diagnostic")
    lines = format_claims_short(_rows(*rows, grid, fixed)).splitlines()
    assert lines[0].startswith("C9  orbits") and sum(line.startswith("C9  ") for line in lines) == 1
    assert lines[1] == "  ours: tests: 1 supported, 1 not supported, 1 inconclusive; diagnostics: 1 show it"
    assert lines[2].split()[:4] == ["[test]", "supported", "(C9),", "head=relu"] and "preset" not in lines[2]
    assert lines[3].split()[:5] == ["[test]", "not", "supported", "(C9),", "head=silu"]
    assert lines[2].index("(C9)") == lines[3].index("(C9)")  # one column
    assert lines[4].split()[:4] == ["[test]", "inconclusive", "(GRID),", "head=gelu"]
    assert lines[5] == "  diagnostic rows, never counted (the reading or the construction fixes their outcome):"
    assert lines[6].startswith("  [diagnostic] shows it") and "head=tanh" in lines[6]
    assert lines[-3:] == ["4 claim entries (only tests count as support):",
                          "  tests: 1 supported, 1 not supported, 1 inconclusive", "  diagnostics: 1 show it"]


def test_figure_file_name():
    assert figure_file_name("C4", "spectra") == "C4_spectra.png"
    assert figure_file_name("C4", "lambda min/seed 0.PNG") == "C4_lambda_min_seed_0.png"
    with pytest.raises(ValueError, match="no usable characters"):
        figure_file_name("C4", "//")


def test_make_figure_both_builder_forms_and_bad_return():
    results = [({"seed": 0}, {"v": 1.0}), ({"seed": 1}, {"v": 3.0})]

    def with_results(res):
        fig = Figure()
        fig.add_subplot().plot([m["v"] for _, m in res])
        return fig

    fig = make_figure(with_results, results)
    assert list(fig.axes[0].lines[0].get_ydata()) == [1.0, 3.0]
    assert isinstance(make_figure(lambda: Figure(), results), Figure)
    with pytest.raises(TypeError, match="must return a matplotlib Figure"):
        make_figure(lambda: None, results)


def test_save_figure_writes_png_and_closes(tmp_path):
    use_agg()
    fig = plt.figure(figsize=(2, 1.5), layout="constrained")  # a pyplot figure laid out as style's are
    fig.add_subplot().plot([0, 1], [1, 0])
    num = fig.number
    path = save_figure(fig, tmp_path / "figs" / "C1_a.png")
    assert num not in plt.get_fignums()
    img = Image.open(io.BytesIO(path.read_bytes()))
    assert img.format == "PNG" and img.size[0] > 50 and img.size[1] > 50
    assert [p.name for p in (tmp_path / "figs").iterdir()] == ["C1_a.png"]  # no temporary file left


def test_a_laid_out_figure_is_saved_as_its_canvas_and_another_cropped_to_its_content():
    from headgeom.report.style import new_figure

    laid_out, ax = new_figure(figsize=(4, 3))
    ax.plot([0, 1], [1, 0])
    plain = Figure(figsize=(4, 3))  # no layout engine: default margins, cropped away by "tight"
    plain.add_subplot().plot([0, 1], [1, 0])
    sizes = [Image.open(io.BytesIO(figure_png_bytes(f))).size for f in (laid_out, plain)]
    assert sizes[0] == (4 * DPI, 3 * DPI)  # the canvas the figure tests check, wrapped suptitle and all
    assert sizes[1][0] < 4 * DPI and sizes[1][1] < 3 * DPI


def test_count_noun_agrees_with_the_count():
    from headgeom.report.markdown import count_noun

    assert [count_noun(n, "claim") for n in (0, 1, 2)] == ["0 claims", "1 claim", "2 claims"]
    assert count_noun(1, "claim entry", "claim entries") == "1 claim entry"
    assert count_noun(3, "claim entry", "claim entries") == "3 claim entries"


def test_the_out_of_distribution_flag_appears_in_the_report_only_when_set():
    from headgeom.claims.ood import ood_flag

    cos = {"value": 0.994, "n": 2, "spread": 0.002}
    flagged = dict(CLAIM, setting={"head": "relu", "head_input": "l2"}, out_of_distribution=ood_flag(cos).to_json())
    plain = dict(CLAIM, setting={"head": "relu", "head_input": "raw"})
    assert Row.from_json(flagged).to_json()["out_of_distribution"] == flagged["out_of_distribution"]
    md = render_report(_results(**{}) | {"claims": [plain, flagged]})
    row_plain, row_flagged = [line for line in md.splitlines() if re.match(r"\| \d+ \| C9 \|", line)]
    assert "out of distribution" not in row_plain
    assert "out of distribution: head trained on raw z but fed z/‖z‖" in row_flagged
    assert "mean pairwise cosine at the head 0.994 ± 0.002 (n=2)" in row_flagged
    section = md[md.index("### C9: Orbit compression"):]
    assert "**Heads evaluated out of distribution:**" in section
    assert "- C9 (head_input=l2): out of distribution" in section and "head_input=raw" not in section
    assert "(head out of distribution)" in format_claims_short(_rows(plain, flagged), width=200)
    # nothing flagged: no word of it anywhere
    assert "out of distribution" not in render_report(_results() | {"claims": [plain]}).lower()
    with pytest.raises(ValueError, match="mean pairwise cosine"):
        ood_flag(0.99)
    with pytest.raises(ValueError, match="out_of_distribution"):
        Row.from_json(dict(CLAIM, out_of_distribution={"why": "x"}))

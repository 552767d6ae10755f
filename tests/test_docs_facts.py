"""What the README and the docs state agrees with its source, and they speak to users:

- the list of what ``.[dev]`` holds (README.md and docs/setup.md) is pyproject.toml's dev extra;
- no words of the machinery that tests or builds headgeom (continuous integration, machines lent to a
  session) in the pages a user reads: README.md, docs/ and BENCHMARKS.md (served on the site).
  "CI" as a confidence interval ("95% CI", "its CI") is the statistics' word and stays.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from script_modules import tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the backport, which `build` (in the dev extra) requires there
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
USER_PAGES = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)


def dev_extra() -> tuple[set[str], set[str]]:
    """(the packages the dev extra names itself, the extras it pulls in through headgeom[...])."""
    direct, extras = set(), set()
    for requirement in PYPROJECT["project"]["optional-dependencies"]["dev"]:
        m = re.fullmatch(r"headgeom\[(.*)\]", requirement)
        if m:
            extras |= {e.strip() for e in m.group(1).split(",")}
        else:
            direct.add(_name(requirement))
    return direct, extras


def stated_dev(text: str, page: str) -> set[str]:
    """The backquoted names of the sentence of ``text`` that says what ``.[dev]`` holds."""
    m = re.search(r"`\.\[dev\]` holds(.*?);", text, flags=re.S)
    assert m, f"{page}: no sentence '`.[dev]` holds ...;'"
    return set(re.findall(r"`([^`]+)`", m.group(1)))


def test_the_dev_extra_holds_every_optional_part():
    _, extras = dev_extra()
    optional = set(PYPROJECT["project"]["optional-dependencies"]) - {"dev"}
    assert extras == optional, "the dev extra should pull in every other extra, as the docs say"


@pytest.mark.parametrize("page", ["README.md", "docs/setup.md"])
def test_the_pages_list_what_the_dev_extra_holds(page):
    direct, extras = dev_extra()
    assert stated_dev((ROOT / page).read_text(encoding="utf-8"), page) == direct | extras


def test_the_check_sees_a_missing_extra():
    direct, extras = dev_extra()
    sentence = "`.[dev]` holds " + ", ".join(f"`{n}`" for n in sorted(direct | extras - {"mlflow"})) + ";"
    assert stated_dev(sentence, "x") != direct | extras


INFRASTRUCTURE = re.compile(r"(?i:\b(?:lent|lend|lending|lease)\b)|\bCI\b(?= (?:runs|sets|installs|shares|machine))"
                            r"|\b(?:[Ww]hat|[Ww]hich|as) CI\b|\bCI/|/CI\b")
"""Words of the machinery around the project; not "CI" of a confidence interval."""


@pytest.mark.parametrize("page", USER_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in USER_PAGES])
def test_user_pages_speak_to_users(page):
    text = page.read_text(encoding="utf-8")
    found = [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in INFRASTRUCTURE.finditer(text)]
    assert not found, f"{page.relative_to(ROOT)}: say what the user runs or reads instead ({found})"


def test_the_check_tells_continuous_integration_from_confidence_intervals():
    for infra in ("On a CPU machine (what CI runs)", "CI sets both.", "no GPU has been lent to run them",
                  "the development/CI machine"):
        assert INFRASTRUCTURE.search(infra), infra
    for statistics in ("the 95% CI of the selectivity", "kept beside it with its CI", "supported if the CI excludes 0"):
        assert not INFRASTRUCTURE.search(statistics), statistics


# ----------------------------------------------------------------------------- what the README's commands cost
costs = tool("costs")
NOT_COSTED = ("apt-get update",)
"""README commands without a row: the optional system packages (root and a network; not timed here)."""


def test_the_readme_quotes_the_cost_of_each_command_it_shows_from_benchmarks():
    rows = costs.cost_rows((ROOT / "BENCHMARKS.md").read_text(encoding="utf-8"))
    assert {"headgeom hessian", "headgeom train", "headgeom reproduce", "python -m pytest -q"} <= {
        " ".join(c.split()[:2]) if c.startswith("headgeom") else c for c in rows}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for lines, after in costs.readme_blocks(readme):
        for line in lines:
            if line.startswith(NOT_COSTED):
                continue
            command = costs.row_of(line, rows)
            assert command is not None, f"README shows `{line}` but BENCHMARKS.md's costs table has no row for it"
            assert costs.quote(rows[command]) in after, (
                f"README: under `{command}`, the quote of BENCHMARKS.md's costs table (`python tools/costs.py quote` "
                f"writes it):\n{costs.quote(rows[command])}")
    assert costs.with_quotes(readme, rows) == readme  # nothing the tool would change


TABLE = (f"x\n{costs.HEADING}\n\n| command | wall | peak memory | CPU | machine | measured |\n"
         "|---|---|---|---|---|---|\n| `headgeom hessian --x 1` | 14 s | 0.90 GiB | 13 s | quiet | 2026-12-08, abc |\n\n"
         "## next\n")


def test_the_costs_tool_reads_the_table_and_rewrites_a_stale_quote():
    rows = costs.cost_rows(TABLE)
    assert rows == {"headgeom hessian --x 1": {"wall": "14 s", "memory": "0.90 GiB", "cpu": "13 s", "machine": "quiet",
                                               "measured": "2026-12-08, abc"}}
    stale = "# t\n\n```bash\nheadgeom hessian --x 1   # a comment\n```\n\nCost on two cores: 2 min wall (x).\n\nnext\n"
    (lines, after), = costs.readme_blocks(stale)
    assert lines == ["headgeom hessian --x 1"] and costs.quote(rows["headgeom hessian --x 1"]) not in after
    fresh = costs.with_quotes(stale, rows)
    assert fresh == ("# t\n\n```bash\nheadgeom hessian --x 1   # a comment\n```\n\n"
                     f"{costs.quote(rows['headgeom hessian --x 1'])}\n\nnext\n")
    assert costs.with_quotes(fresh, rows) == fresh
    new = costs.write_row(TABLE, "headgeom hessian --x 1", {**rows["headgeom hessian --x 1"], "wall": "12 s"})
    assert costs.cost_rows(new)["headgeom hessian --x 1"]["wall"] == "12 s" and new.endswith("## next\n")


def test_a_gnu_time_report_becomes_a_row():
    report = ("\tUser time (seconds): 90.22\n\tSystem time (seconds): 2.31\n"
              "\tElapsed (wall clock) time (h:mm:ss or m:ss): 4:54.67\n\tMaximum resident set size (kbytes): 1961044\n")
    measured = costs.time_report(report)
    assert measured["wall"] == pytest.approx(294.67) and measured["cpu"] == pytest.approx(92.53)
    assert measured["memory"] == 1961044 * 1024
    assert costs.row(measured, [4.59, 10.27], "abc", "2026-12-07") == {
        "wall": "4 min 55 s", "memory": "1.87 GiB", "cpu": "1 min 33 s",
        "machine": "shared machine, load 4.6–10.3: to retake on a quiet one", "measured": "2026-12-07, abc"}
    assert costs.row(measured, [0.3, 1.9], "abc", "d")["machine"] == "quiet machine, load ≤ 1.9"
    assert (costs.row(measured, [0.3, 1.9], "abc", "d", gemm=55.4)["machine"]
            == "quiet machine at 55 GFLOP/s float64 GEMM, load ≤ 1.9")


def test_the_gemm_rate_is_read_from_a_product_that_ran():
    """A rate in GFLOP/s from a real float64 product (a small one here): positive and finite."""
    rate = costs.gemm_rate(n=64, repeats=1)
    assert 0 < rate < float("inf")

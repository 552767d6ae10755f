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

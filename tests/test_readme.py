"""Every example of the README and of the docs pages runs, so neither can drift from the code.

The Python snippets run as written. Every fenced shell command is parsed verbatim by the real
parser, then run in order (the README first, then the docs pages in the order of mkdocs.yml's nav,
then any page of docs/ the nav does not list) in one scratch folder, with the toy-size options of
the table "Trying the commands at toy sizes" (docs/cli.md) appended; a command shown on several
pages runs once, and a command marked ``# needs: ...`` (files that are not in the repository) is
only parsed. The setup and test commands are what .ci/run runs, and docs/setup.md shows the same.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from headgeom.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SETUP_PAGE = ROOT / "docs" / "setup.md"
TOY_PAGE = ROOT / "docs" / "cli.md"
NOT_RUN_SECTIONS = ("## Setup", "## Tests")  # checked against .ci/run below


@dataclass(frozen=True)
class ShellCommand:
    section: str
    line: str  # continuation lines joined, comment removed
    comment: str
    page: str = "README.md"

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line)

    @property
    def needs(self) -> str | None:
        """What a command marked ``# needs: ...`` needs (it is then only parsed)."""
        m = re.match(r"needs:\s*(.+)", self.comment)
        return m.group(1) if m else None


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for every markdown heading of ``text`` (levels 2 to 4); what comes before the
    first of them has the heading ""."""
    parts = re.split(r"^(#{2,4} .*)$", text, flags=re.M)
    return [("", parts[0]), *zip(parts[1::2], parts[2::2])]


def shell_commands(text: str = README, page: str = "README.md") -> list[ShellCommand]:
    commands = []
    for heading, body in _sections(text):
        for block in re.findall(r"```bash\n(.*?)```", body, flags=re.S):
            for raw in re.sub(r"\s*\\\n\s*", " ", block).splitlines():
                line, _, comment = raw.partition(" #")
                if line.strip():
                    commands.append(ShellCommand(heading, line.strip(), comment.strip(), page))
    return commands


def docs_pages(root: Path = ROOT) -> list[Path]:
    """The pages of docs/ in the order of mkdocs.yml's nav, then those the nav does not list."""
    nav = (root / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    listed = [root / "docs" / name for name in re.findall(r"^\s*- (?:[^:\n]+: )?([\w./-]+\.md)\s*$", nav, flags=re.M)]
    listed = [p for p in listed if p.is_file()]
    return listed + sorted(p for p in (root / "docs").rglob("*.md") if p not in listed)


PAGES = [ROOT / "README.md", *docs_pages()]


def _page_name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def toy_options(text: str | None = None) -> dict[str, list[str]]:
    """``headgeom COMMAND`` -> the options of the toy-size table (docs/cli.md)."""
    text = TOY_PAGE.read_text(encoding="utf-8") if text is None else text
    table = next(body for heading, body in _sections(text) if heading.endswith(" Trying the commands at toy sizes"))
    options = {}
    for names, opts in re.findall(r"^\| (`headgeom .*?`) \| `(.*?)` \|$", table, flags=re.M):
        for name in re.findall(r"`(headgeom \w+)`", names):
            options[name] = shlex.split(opts)
    return options


def _all_commands() -> list[ShellCommand]:
    seen, out = set(), []
    for path in PAGES:
        for c in shell_commands(path.read_text(encoding="utf-8"), _page_name(path)):
            if not c.section.startswith(NOT_RUN_SECTIONS) and c.line not in seen:
                seen.add(c.line)
                out.append(c)
    return out


COMMANDS = _all_commands()
README_COMMANDS = [c for c in shell_commands() if not c.section.startswith(NOT_RUN_SECTIONS)]


def test_the_extraction_finds_the_examples():
    lines = [c.line for c in COMMANDS]
    assert "headgeom --help" in lines and any(line.startswith("headgeom train --method") for line in lines)
    assert all(c.argv[0] == "headgeom" for c in COMMANDS), "a README or docs shell example that is not headgeom: " \
        "teach tests/test_readme.py to run it"
    # the README's three commands, each run (and the same command on a docs page runs once)
    names = {" ".join(c.argv[:2]) for c in README_COMMANDS if not c.needs}
    assert names == {"headgeom hessian", "headgeom train", "headgeom reproduce"}
    assert any("--track-every" in c.argv for c in README_COMMANDS)
    assert {_page_name(p) for p in PAGES} >= {"README.md", "docs/cli.md", "docs/training.md", "docs/reproduce.md",
                                              "docs/analyze.md", "docs/cluster.md", "docs/tracking.md"}
    assert {"headgeom train", "headgeom eval", "headgeom analyze", "headgeom reproduce"} <= set(toy_options())
    joined = shell_commands("## A\n```bash\nheadgeom train --a 1 \\\n    --b 2   # needs: x\n```\n")
    assert joined == [ShellCommand("## A", "headgeom train --a 1 --b 2", "needs: x")] and joined[0].needs == "x"


def test_docs_pages_follow_the_nav_and_miss_none(tmp_path):
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    for name in ("a.md", "b.md", "sub/c.md", "extra.md"):
        (tmp_path / "docs" / name).write_text("# x\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: x\nnav:\n  - Home: b.md\n  - Part:\n      - C: sub/c.md\n"
                                         "  - a.md\n  - Gone: gone.md\n")
    assert [p.relative_to(tmp_path / "docs").as_posix() for p in docs_pages(tmp_path)] == \
        ["b.md", "sub/c.md", "a.md", "extra.md"]


@pytest.mark.parametrize("command", COMMANDS, ids=[f"{c.page}:{c.line[:60]}" for c in COMMANDS])
def test_every_command_parses_with_the_current_option_names(command, capsys):
    try:
        build_parser().parse_args(command.argv[1:])
    except SystemExit as exit_:  # --help prints and exits 0; a parse error exits 2
        assert exit_.code == 0, f"{command.page}: {capsys.readouterr().err}"
    assert "deprecated" not in capsys.readouterr().err, f"{command.page}: {command.line} uses a deprecated option name"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # --help
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.slow
def test_every_command_runs_at_toy_sizes(tmp_path, monkeypatch, capsys):
    """In page order, so `headgeom eval runs/simsiam` finds the run `headgeom train` wrote."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # ~/data, ~/checkpoints inside the scratch folder
    monkeypatch.delenv("HEADGEOM_DATA", raising=False)
    toy = toy_options()
    ran = []
    for command in COMMANDS:
        if command.needs:
            continue
        argv = [Path(a).expanduser().as_posix() if a.startswith("~") else a for a in command.argv[1:]]
        name = " ".join(command.argv[:2])
        code, err = _run([*argv, *toy.get(name, [])], capsys)
        assert code == 0, f"{command.page}: command `{command.line}` failed at toy size (exit {code}):\n{err}"
        ran.append(name)
    assert {"headgeom train", "headgeom eval", "headgeom analyze", "headgeom reproduce", "headgeom theory",
            "headgeom hessian", "headgeom checkpoint"} <= set(ran)
    assert (tmp_path / "runs" / "simsiam" / "eval.json").is_file()
    assert (tmp_path / "analysis" / "simsiam" / "analysis.json").is_file()


PYTHON_PAGES = [p for p in PAGES if "```python\n" in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=[_page_name(p) for p in PYTHON_PAGES])
def test_python_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # whatever an example writes (Lightning's logs) stays in the scratch folder
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    for code in blocks:
        exec(compile(code, _page_name(page), "exec"), {})


def test_the_readme_has_a_python_example_with_the_lightning_callback():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) == 1 and "HeadGeometryCallback(" in blocks[0] and "effective_hessian(" in blocks[0]


def _setup_and_test(text: str) -> tuple[list[str], str]:
    setup_section = re.search(r"## Setup\n(.*?)\n## ", text, flags=re.S).group(1)
    setups = [b.strip() for b in re.findall(r"```bash\n(.*?)\n```", setup_section, flags=re.S)]
    test = re.search(r"## Tests.*?```bash\n(.*?)\n```", text, flags=re.S).group(1).strip()
    return setups, test


def test_ci_runs_the_readme_setup_and_test_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    setups, test = _setup_and_test(README)
    assert len(setups) == 2  # the setup, then the cluster tests' set-up
    for setup in setups:
        assert setup in ci
    assert ci.index(setups[0]) < ci.index(setups[1]) < ci.index(test.split("&&")[-1].strip())
    assert test.split("&&")[-1].strip() in ci


def test_the_docs_show_the_readme_setup_and_test_commands():
    assert _setup_and_test(SETUP_PAGE.read_text(encoding="utf-8")) == _setup_and_test(README)

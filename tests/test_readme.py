"""Every README example runs, so the README cannot drift from the code.

The Python snippets run as written. Every fenced shell command is parsed verbatim by the real
parser, then run in README order in a scratch folder with the toy-size options of the README's
table "Trying the commands at toy sizes" appended; a command marked ``# needs: ...`` (files that
are not in the repository) is only parsed. The setup and test commands are what .ci/run runs.
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
NOT_RUN_SECTIONS = ("## Setup", "## Tests")  # checked against .ci/run below


@dataclass(frozen=True)
class ShellCommand:
    section: str
    line: str  # continuation lines joined, comment removed
    comment: str

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.line)

    @property
    def needs(self) -> str | None:
        """What a command marked ``# needs: ...`` needs (it is then only parsed)."""
        m = re.match(r"needs:\s*(.+)", self.comment)
        return m.group(1) if m else None


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) for every markdown heading of ``text``."""
    parts = re.split(r"^(#{2,4} .*)$", text, flags=re.M)
    return list(zip(parts[1::2], parts[2::2]))


def shell_commands(text: str = README) -> list[ShellCommand]:
    commands = []
    for heading, body in _sections(text):
        for block in re.findall(r"```bash\n(.*?)```", body, flags=re.S):
            for raw in re.sub(r"\s*\\\n\s*", " ", block).splitlines():
                line, _, comment = raw.partition(" #")
                if line.strip():
                    commands.append(ShellCommand(heading, line.strip(), comment.strip()))
    return commands


def toy_options(text: str = README) -> dict[str, list[str]]:
    """``headgeom COMMAND`` -> the options of the README's toy-size table."""
    table = dict(_sections(text))["### Trying the commands at toy sizes"]
    options = {}
    for names, opts in re.findall(r"^\| (`headgeom .*?`) \| `(.*?)` \|$", table, flags=re.M):
        for name in re.findall(r"`(headgeom \w+)`", names):
            options[name] = shlex.split(opts)
    return options


COMMANDS = [c for c in shell_commands() if not c.section.startswith(NOT_RUN_SECTIONS)]


def test_the_readme_extraction_finds_the_examples():
    lines = [c.line for c in COMMANDS]
    assert "headgeom --help" in lines and any(line.startswith("headgeom train --method") for line in lines)
    assert all(c.argv[0] == "headgeom" for c in COMMANDS), "a README shell example that is not headgeom: " \
        "teach tests/test_readme.py to run it"
    assert {"headgeom train", "headgeom eval", "headgeom analyze", "headgeom reproduce"} <= set(toy_options())
    joined = shell_commands("## A\n```bash\nheadgeom train --a 1 \\\n    --b 2   # needs: x\n```\n")
    assert joined == [ShellCommand("## A", "headgeom train --a 1 --b 2", "needs: x")] and joined[0].needs == "x"


@pytest.mark.parametrize("command", COMMANDS, ids=[c.line[:60] for c in COMMANDS])
def test_every_readme_command_parses_with_the_current_option_names(command, capsys):
    try:
        build_parser().parse_args(command.argv[1:])
    except SystemExit as exit_:  # --help prints and exits 0; a parse error exits 2
        assert exit_.code == 0, capsys.readouterr().err
    assert "deprecated" not in capsys.readouterr().err, f"{command.line} uses a deprecated option name"


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # --help
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.slow
def test_every_readme_command_runs_at_toy_sizes(tmp_path, monkeypatch, capsys):
    """In README order, so `headgeom eval runs/simsiam` finds the run `headgeom train` wrote."""
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
        assert code == 0, f"README command `{command.line}` failed at toy size (exit {code}):\n{err}"
        ran.append(name)
    assert {"headgeom train", "headgeom eval", "headgeom analyze", "headgeom reproduce", "headgeom theory",
            "headgeom hessian", "headgeom checkpoint"} <= set(ran)
    assert (tmp_path / "runs" / "simsiam" / "eval.json").is_file()
    assert (tmp_path / "analysis" / "simsiam" / "analysis.json").is_file()


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks, "README has no Python example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_ci_runs_the_readme_setup_and_test_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    setup_section = re.search(r"## Setup\n(.*?)\n## ", README, flags=re.S).group(1)
    setups = [b.strip() for b in re.findall(r"```bash\n(.*?)\n```", setup_section, flags=re.S)]
    test = re.search(r"## Tests.*?```bash\n(.*?)\n```", README, flags=re.S).group(1).strip()
    assert len(setups) == 2  # the setup, then the cluster tests' set-up
    for setup in setups:
        assert setup in ci
    assert ci.index(setups[0]) < ci.index(setups[1]) < ci.index(test.split("&&")[-1].strip())
    assert test.split("&&")[-1].strip() in ci

"""No abbreviated options: ``--epoch 2`` is refused, not read as ``--epochs 2``.

argparse accepts any unique prefix of a long option unless a parser is built with
``allow_abbrev=False``; a mistyped option then silently changes the run (a 45-minute ``--epochs``
run started from ``--epoch 2``). Every parser of ``headgeom`` (walked, sub-commands and their own
sub-commands included) is checked by behaviour, and every ``ArgumentParser(...)`` of the scripts a
user runs (tools/, benchmarks/) is checked in its source.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from headgeom.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SCRIPT_FOLDERS = ("src", "tools", "benchmarks")


Parsers = list[tuple[tuple[str, ...], argparse.ArgumentParser]]


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Parsers:
    """``parser`` and every sub-command parser below it, with the words that reach each."""
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += walk(sub, (*path, name))
    return found


def abbreviations(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(option, a unique prefix of it that is no option itself) for each long option of ``parser``."""
    longs = [o for o in parser._option_string_actions if o.startswith("--")]
    out = []
    for option in longs:
        prefix = option[:-1]
        if len(prefix) > 3 and not any(o.startswith(prefix) for o in longs if o != option):
            out.append((option, prefix))
    return out


def accepts(parser: argparse.ArgumentParser, prefix: str) -> bool:
    """Whether ``parser`` takes ``prefix`` as an abbreviation of one of its options.

    Required options, positionals and sub-commands are made optional first, so that nothing but the
    prefix decides: a refused prefix comes back among the unknown arguments; an accepted one is
    consumed (or errors for its missing value, or prints --help/--version: SystemExit)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.option_strings:
            action.required = False
        elif action.nargs is None:
            action.nargs = "?"
    try:
        _, unknown = parser.parse_known_args([prefix])
    except SystemExit:
        return True
    return prefix not in unknown


PARSERS = walk(build_parser())


def test_the_walk_reaches_every_command_and_sub_command():
    paths = {" ".join(path) for path, _ in PARSERS}
    assert {"", "train", "reproduce", "eval", "analyze", "hessian", "released", "released fetch",
            "released check"} <= paths


@pytest.mark.parametrize("path,parser", PARSERS, ids=[" ".join(("headgeom", *p)) for p, _ in PARSERS])
def test_every_parser_refuses_abbreviated_options(path, parser, capsys):
    assert parser.allow_abbrev is False, f"headgeom {' '.join(path)}: build it with allow_abbrev=False"
    cases = abbreviations(parser)
    assert cases or parser.prog == "headgeom" or path in (("version",), ("released",)), \
        f"headgeom {' '.join(path)}: no long option to abbreviate"
    taken = [f"{prefix} for {option}" for option, prefix in cases if accepts(parser, prefix)]
    capsys.readouterr()
    assert not taken, f"headgeom {' '.join(path)} accepts abbreviations: {taken}"


def test_the_check_sees_an_abbreviation_a_default_parser_accepts():
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("out")
    assert ("--epochs", "--epoch") in abbreviations(p) and accepts(p, "--epoch")


def test_epoch_for_epochs_is_refused_with_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:  # parsed only: were it accepted, nothing trains here
        build_parser().parse_args(["train", "--method", "simclr", "--backbone", "resnet18", "--data", "shapes",
                                   "--epoch", "2", "--out", "run"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.endswith("headgeom: error: unrecognized arguments: --epoch 2\n"), err


def _argument_parsers(path: Path) -> list[tuple[int, bool]]:
    """(line, whether allow_abbrev=False is passed) of every ``ArgumentParser(...)`` call in ``path``."""
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = getattr(node, "func", None) and getattr(node.func, "attr", getattr(node.func, "id", None))
        if isinstance(node, ast.Call) and name == "ArgumentParser":
            off = any(k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
                      for k in node.keywords)
            calls.append((node.lineno, off))
    return calls


def test_every_script_parser_refuses_abbreviations():
    calls = {p: _argument_parsers(p) for folder in SCRIPT_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}
    found = [(p, line) for p, lines in calls.items() for line, _ in lines]
    assert any(p.parent.name == "benchmarks" for p, _ in found) and any(p.parent.name == "tools" for p, _ in found)
    bad = [f"{p.relative_to(ROOT)}:{line}" for p, lines in calls.items() for line, off in lines if not off]
    assert not bad, "ArgumentParser(...) without allow_abbrev=False:\n" + "\n".join(bad)

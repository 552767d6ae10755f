"""Pieces every parser shares: the help layout with examples, option types, deprecated aliases."""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any, Callable, Sequence

__all__ = ["HelpFormatter", "add_command", "deprecated_alias", "examples_epilog", "key_value", "positive"]


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs to the terminal and keeps indented lines (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        prose: list[str] = []

        def flush() -> None:
            if prose:
                out.append(textwrap.fill(" ".join(" ".join(prose).split()), width,
                                         initial_indent=indent, subsequent_indent=indent))
                prose.clear()

        for line in text.splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line.startswith(" "):
                flush()
                out.append(indent + line)
            else:
                prose.append(line)
        flush()
        return "\n".join(out)


def _shell_lines(command: str, width: int = 90) -> list[str]:
    """``command`` split before its options into shell lines of about ``width`` ending in `` \\``."""
    lines = [""]
    for i, word in enumerate(command.split(" --")):
        word = word if i == 0 else "--" + word
        if lines[-1] and len(lines[-1]) + len(word) + 1 > width:
            lines[-1] += " \\"
            lines.append("    ")
        lines[-1] += (" " if lines[-1].strip() else "") + word
    return lines


def examples_epilog(examples: Sequence[str]) -> str:
    """The ``examples:`` section of a help page: command lines (``# comment`` allowed), long ones
    continued over shell lines."""
    return "examples:\n" + "\n".join(f"  {line}" for command in examples for line in _shell_lines(command))


def add_command(subparsers: Any, name: str, *, help: str, description: str, examples: Sequence[str],
                group: bool = False, **kwargs: Any) -> argparse.ArgumentParser:
    """A sub-command whose help page ends with ``examples`` (:func:`examples_epilog`); like every
    headgeom parser it takes no abbreviated option (``--epoch`` is not ``--epochs``). A command
    takes ``--verbose`` (:mod:`.verbosity`); a ``group`` of actions (``released fetch|check``) leaves
    it to them."""
    p = subparsers.add_parser(name, help=help, description=description, epilog=examples_epilog(examples),
                              formatter_class=HelpFormatter, allow_abbrev=False, **kwargs)
    if not group:
        p.add_argument("--verbose", action="store_true",
                       help="also show the INFO messages of the libraries it drives (MLflow, Lightning); "
                       "or set HEADGEOM_VERBOSE=1")
    return p


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (0.5, true, [1,2]), else a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def positive(minimum: int) -> Callable[[str], int]:
    """An int option that must be >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {v}")
        return v
    return parse


class _DeprecatedAlias(argparse.Action):
    """An old option name: prints a one-line note and acts as ``target`` (with ``value`` when given)."""

    def __init__(self, option_strings: list[str], dest: str, target: argparse.Action, new: str,
                 value: Any = None, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.target, self.new, self.value = target, new, value

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: note: {option_string} is deprecated and will be removed in the next release; "
              f"use {self.new}", file=sys.stderr)
        self.target(parser, namespace, self.value if self.value is not None else values, self.new)


def deprecated_alias(parser: argparse.ArgumentParser, old: str, target: argparse.Action,
                     value: str | None = None) -> None:
    """Accept ``old`` as a hidden alias of the option ``target`` (what ``add_argument`` returned).

    ``value``: the old option was a flag standing for ``target``'s option with this value
    (``--l2-input`` for ``--head-input both``); it takes no value itself.
    """
    new = target.option_strings[0]
    if value is not None:
        parser.add_argument(old, action=_DeprecatedAlias, target=target, new=f"{new} {value}", value=value,
                            nargs=0, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        return
    parser.add_argument(old, action=_DeprecatedAlias, target=target, new=new, nargs=target.nargs,
                        type=target.type, choices=target.choices, metavar=target.metavar,
                        dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=argparse.SUPPRESS)

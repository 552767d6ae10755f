"""The logger registry (headgeom.train.loggers.LOGGERS): one file per logger, what the command line
accepts is what the registry holds, and a logger added to the registry is opened with no other edit.

The logger files are read as text (an optional tracker that is not installed cannot be imported);
the registered logger below is a plain in-memory one defined in this file.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from headgeom.cli import build_parser
from headgeom.commands import vocabulary as v
from headgeom.tags import tag
from headgeom.train import TrainConfig
from headgeom.train.loggers import LOGGERS, LoggerBuilder, check_logger, open_loggers, parse_loggers

SRC = Path(__file__).resolve().parents[2] / "src"
METHODS = ("log", "log_params", "log_figure", "log_artifact", "close")  # the Logger protocol


@pytest.mark.parametrize("name", sorted(LOGGERS))
def test_each_logger_is_one_file_with_its_opener_and_a_logger_class(name):
    builder = LOGGERS[name]
    module, _, opener = builder.opener.partition(":")
    path = SRC / Path(*module.split(".")).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert opener in functions, f"{path} has no {opener}()"
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)
               and set(METHODS) <= {f.name for f in n.body if isinstance(f, ast.FunctionDef)}]
    assert len(classes) == 1, f"{path} should hold one logger class with {METHODS}"
    others = [b.module for n, b in LOGGERS.items() if n != name]
    assert module not in others  # one file per logger


def test_the_command_line_accepts_exactly_the_registered_loggers():
    assert tuple(v.LOGGERS) == tuple(LOGGERS)  # the generated vocabulary (tests/commands check it is current)
    assert parse_loggers(",".join(reversed(LOGGERS))) == tuple(LOGGERS)  # jsonl first, registry order
    pages = {a.dest: a for a in build_parser()._actions if a.dest == "command"}
    help_text = " ".join(pages["command"].choices["train"].format_help().split())
    assert ", ".join(LOGGERS) in help_text
    for name in LOGGERS:
        assert TrainConfig(method="simclr", logger=name).logger[-1] == name
    with pytest.raises(ValueError, match=r"unknown logger 'comet'.*choose from " + ", ".join(LOGGERS)):
        parse_loggers("comet")
    assert set(LOGGERS) - {"jsonl"} == {n for n, b in LOGGERS.items() if b.extra}  # every tracker names its extra


class MemoryLogger:
    """A logger that keeps what it is given (a tracker registered by a test)."""

    opened: list["MemoryLogger"] = []

    def __init__(self, first_step: int) -> None:
        self.first_step, self.lines, self.params, self.closed = first_step, [], None, False

    def log(self, step, scalars):
        self.lines.append((step, dict(scalars)))

    def log_params(self, params):
        self.params = params

    def log_figure(self, name, path):
        pass

    def log_artifact(self, path):
        pass

    def close(self):
        self.closed = True


def open_memory(run_dir, first_step, stored):
    logger = MemoryLogger(first_step)
    MemoryLogger.opened.append(logger)
    return logger, {"run_id": f"memory-{len(MemoryLogger.opened)}"}


def test_a_logger_added_to_the_registry_is_opened_with_the_shared_tags(tmp_path, monkeypatch):
    monkeypatch.setitem(LOGGERS, "memory", LoggerBuilder(f"{__name__}:open_memory", "in-memory"))
    MemoryLogger.opened.clear()
    assert check_logger("memory") == ("jsonl", "memory")
    loggers = open_loggers("memory", tmp_path, 0, params={"lr": 0.1})
    loggers.log(1, {"loss": 0.5, "heff_ambient_mean_lambda_min": -1e-3})
    loggers.close()
    (memory,) = MemoryLogger.opened
    assert memory.params == {"lr": 0.1} and memory.closed
    assert memory.lines == [(1, {tag("loss"): 0.5, tag("heff_ambient_mean_lambda_min"): -1e-3})]
    assert json.loads((tmp_path / "metrics.jsonl").read_text()) == {
        "step": 1, "loss": 0.5, "heff_ambient_mean_lambda_min": -1e-3}
    assert json.loads((tmp_path / "loggers.json").read_text()) == {"memory": {"run_id": "memory-1"}}
    monkeypatch.setitem(LOGGERS, "absent", LoggerBuilder("headgeom.train.no_such_logger:open", "Absent"))
    with pytest.raises(RuntimeError, match="this headgeom has no Absent logger"):
        check_logger("absent")

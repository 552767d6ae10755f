"""Third-party INFO logging stays off the console unless asked for (headgeom.commands.verbosity):
MLflow's two INFO lines of a new store do not reach a user's terminal from `headgeom train --logger
mlflow`; `--verbose` lets them through. Warnings always show."""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from headgeom.commands.verbosity import VERBOSE_ENV, third_party_logs, verbose_requested

ROOT = Path(__file__).resolve().parents[2]
TINY = ["train", "--method", "simclr", "--backbone", "resnet18", "--width", "0.125", "--head", "d-16-8", "--data",
        "shapes", "--data-option", "n=16", "--data-option", "size=16", "--batch-size", "8", "--max-steps", "1",
        "--device", "cpu", "--quiet", "--logger", "jsonl,mlflow"]
MLFLOW_INFO = "INFO mlflow.store.db.utils: Creating initial MLflow database tables"


def _library_logger(name: str) -> tuple[logging.Logger, io.StringIO]:
    """A logger set up as MLflow sets up its own: its own handler, level INFO, not propagating."""
    stream = io.StringIO()
    logger = logging.getLogger(name)
    logger.handlers, logger.propagate = [logging.StreamHandler(stream)], False
    logger.setLevel(logging.INFO)
    return logger, stream


def test_info_records_are_dropped_inside_the_block_and_warnings_kept(monkeypatch):
    monkeypatch.delenv("MLFLOW_LOGGING_LEVEL", raising=False)
    logger, stream = _library_logger("headgeom_test.library")
    with third_party_logs(verbose=False):
        logger.info("an info line")
        logger.warning("a warning")
        assert os.environ["MLFLOW_LOGGING_LEVEL"] == "WARNING"  # for the workers a command spawns
    logger.info("after")
    assert stream.getvalue() == "a warning\nafter\n"
    assert "MLFLOW_LOGGING_LEVEL" not in os.environ and logging.root.manager.disable == logging.NOTSET
    with third_party_logs(verbose=True):
        logger.info("asked for")
    assert stream.getvalue().endswith("asked for\n")


def test_a_level_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("MLFLOW_LOGGING_LEVEL", "DEBUG")
    with third_party_logs(verbose=False):
        assert os.environ["MLFLOW_LOGGING_LEVEL"] == "DEBUG"
    assert os.environ["MLFLOW_LOGGING_LEVEL"] == "DEBUG"


@pytest.mark.parametrize("value,verbose", [("", False), ("0", False), ("false", False), ("1", True), ("yes", True)])
def test_the_environment_switch(value, verbose, monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, value)
    assert verbose_requested() is verbose and verbose_requested(True)


def _train(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mlflow", reason='needs the "mlflow" extra')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", VERBOSE_ENV))}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run([sys.executable, "-m", "headgeom", *TINY, *extra], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)


def test_train_with_mlflow_keeps_its_info_lines_off_the_console_unless_verbose(tmp_path):
    quiet = _train(tmp_path, "--out", "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and (tmp_path / "quiet" / "mlflow.db").is_file()
    verbose = _train(tmp_path, "--out", "verbose", "--verbose")
    assert verbose.returncode == 0 and MLFLOW_INFO in verbose.stderr, verbose.stderr

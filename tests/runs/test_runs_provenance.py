"""headgeom.runs.provenance: the code version and environment every run file carries."""
from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import numpy as np
import torch

from headgeom.runs.provenance import environment, git, utc_now


def test_environment_names_this_checkouts_revision_and_the_libraries():
    here = Path(__file__).resolve().parents[1]
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True).stdout.strip()
    env = environment()
    assert env["git_revision"] == (rev or "unknown")
    assert env["git_dirty"] in (True, False, None)
    assert env["versions"]["torch"] == torch.__version__ and env["versions"]["numpy"] == np.__version__
    assert {"headgeom", "scipy", "python"} <= set(env["versions"])
    assert env["torch_threads"] == torch.get_num_threads()


def test_git_returns_none_when_the_command_fails():
    assert git("no-such-git-command") is None


def test_utc_now_is_iso_8601_in_utc_to_the_second():
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    t = dt.datetime.fromisoformat(utc_now())
    after = dt.datetime.now(dt.timezone.utc)
    assert t.utcoffset() == dt.timedelta(0) and t.microsecond == 0
    assert before <= t <= after  # the time of the call, however long the call took

"""Property-based fuzzing of ``headgeom reproduce --set KEY=VALUE`` (headgeom.overrides) with hypothesis.

The property, for any assignment text on any registered experiment: the plan (the resolved config
and its cells, what ``--dry-run`` shows and a run starts from) is built, or a ValueError whose
message is one line names what is wrong; never another exception. Keys are drawn from each
experiment's real keys (nested ones dotted) and at random; values from JSON of every type (NaN and
±Infinity too, which Python's JSON reader accepts) and from raw text. A last target runs the
command line itself (``--dry-run``) on a few examples: exit 0, or exit 2 with one line on stderr.
Small example budgets, the same examples every run (CI time, and a suite that cannot flake);
``HEADGEOM_FUZZ_SCALE=N`` runs N times as many fresh random ones. ``deadline=None`` (a loaded machine
must not fail a slow example), ``database=None`` (nothing written into the checkout).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headgeom.cli import main
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS
from headgeom.experiments.runner import plan_experiments

# CI runs a fixed, small set of examples (derandomized: the same every run, so the suite cannot flake);
# HEADGEOM_FUZZ_SCALE=N runs N times as many, freshly random, for a longer search
SCALE = int(os.environ.get("HEADGEOM_FUZZ_SCALE", "1"))


def budget(examples: int) -> settings:
    return settings(max_examples=examples * SCALE, derandomize=SCALE == 1, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


runner._load()
IDS = sorted(EXPERIMENTS)


def _keys(config, prefix: str = "") -> list[str]:
    """Every field path of a (nested) config dataclass, dotted."""
    keys = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        keys.append(prefix + f.name)
        if dataclasses.is_dataclass(value):
            keys += _keys(value, prefix + f.name + ".")
    return keys


KEYS = {exp_id: _keys(EXPERIMENTS[exp_id].presets["quick"]()) for exp_id in IDS}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
VALUES = st.one_of(JSON.map(json.dumps), st.text(max_size=20),
                   st.sampled_from(["", "[", "{}", "[]", "-1", "0", "1e309", "NaN", "-Infinity", "true", "null"]))


@st.composite
def assignments(draw) -> tuple[str, str]:
    exp_id = draw(st.sampled_from(IDS))
    key = draw(st.one_of(st.sampled_from(KEYS[exp_id]), st.text(max_size=12),
                         st.sampled_from(KEYS[exp_id]).map(lambda k: k + ".x"),
                         st.sampled_from(KEYS[exp_id]).map(lambda k: k.split(".")[-1])))
    text = draw(st.one_of(st.builds(lambda v: f"{key}={v}", VALUES), st.text(max_size=20)))
    return exp_id, text


def _one_line(message: str) -> None:
    assert message and "\n" not in message.strip() and "\r" not in message, message


@budget(120)
@given(assignments())
def test_any_assignment_builds_the_plan_or_fails_in_one_line(case):
    exp_id, text = case
    try:
        plan, _ = plan_experiments([exp_id], "quick", None, overrides=(text,))
    except ValueError as err:
        _one_line(str(err))
        assert str(err).startswith(f"experiment {exp_id}: "), str(err)  # it names the experiment, then what is wrong
        return
    (exp, config, cells, _, _), = plan
    assert exp.id == exp_id and dataclasses.is_dataclass(config)


@budget(8)
@given(assignments())
def test_the_dry_run_of_any_assignment_exits_0_or_2_with_one_line(case):
    exp_id, text = case
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["reproduce", "--only", exp_id, "--preset", "quick", "--dry-run", "--set", text])
    assert code in (0, 2), (code, err.getvalue())
    if code == 2:
        _one_line(err.getvalue())
        assert err.getvalue().startswith("headgeom reproduce: error: "), err.getvalue()

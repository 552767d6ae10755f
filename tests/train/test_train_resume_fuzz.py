"""Property-based fuzzing of a run folder being resumed (``headgeom train --resume``) with hypothesis.

A tiny run (4 steps) is stopped at its step-2 checkpoint; each example then damages the folder as
a crash or a user could: config.json damaged (bytes, or JSON of the wrong shape, type or value),
metrics.jsonl holding the whole lines of steps after the checkpoint and a last line cut anywhere
(a session killed while writing it), or damaged bytes, done.json deleted or damaged; and runs
``headgeom train --resume --max-steps 4`` on it. The property: exit 0, or exit 2 with one line on
stderr and the folder as it was; never a traceback, nothing written outside the run folder; and
when the resume succeeds from crash-shaped damage, every step 1..4 is in metrics.jsonl once, and
with an intact config.json the lines equal the uninterrupted run's. Each example trains, so the
budget is a few examples; ``HEADGEOM_FUZZ_SCALE=N`` runs N times as many (tests/fuzz_inputs.py).
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st

from fuzz_inputs import budget, damaged, listing, one_line
from headgeom.cli import main

TINY = ["--method", "simclr", "--backbone", "resnet18", "--width", "0.125", "--head", "d-16-8", "--data", "shapes",
        "--data-option", "n=16", "--data-option", "size=16", "--batch-size", "8", "--epochs", "2", "--device", "cpu",
        "--quiet"]  # 2 steps per epoch: 4 steps, a checkpoint at the end of each epoch
STEPS = 4


@contextlib.contextmanager
def _quiet_one_thread():
    """One torch thread (the same arithmetic in every run), stdout and stderr captured."""
    before, err = torch.get_num_threads(), io.StringIO()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            yield err
    finally:
        torch.set_num_threads(before)


@functools.cache
def runs() -> tuple[Path, Path]:
    """(the uninterrupted 4-step run, the same run stopped at its step-2 checkpoint), trained once."""
    root = Path(tempfile.mkdtemp(prefix="headgeom-resume-fuzz-"))
    with _quiet_one_thread() as err:
        assert main(["train", *TINY, "--out", str(root / "full")]) == 0, err.getvalue()
        assert main(["train", *TINY, "--max-steps", "2", "--out", str(root / "stopped")]) == 0, err.getvalue()
    return root / "full", root / "stopped"


@pytest.fixture(scope="module", autouse=True)
def _clean_up_the_runs():
    yield
    if runs.cache_info().currsize:
        shutil.rmtree(runs()[0].parent, ignore_errors=True)


def _lines(run: Path) -> list[str]:
    return (run / "metrics.jsonl").read_text().splitlines()


CONFIG_EDITS = st.sampled_from([
    lambda c: {}, lambda c: [], lambda c: "config", lambda c: None, lambda c: {"config": []},
    lambda c: {"config": None}, lambda c: {**c, "config": {k: v for k, v in c["config"].items() if k != "method"}},
    lambda c: {**c, "config": {**c["config"], "lr": "fast"}}, lambda c: {**c, "config": {**c["config"], "epochs": 0}},
    lambda c: {**c, "config": {**c["config"], "epochs": 1}}, lambda c: {**c, "config": {**c["config"], "lr": 0.5}},
    lambda c: {**c, "config": {**c["config"], "head": "d-16-9"}}, lambda c: {**c, "config": {**c["config"], "x": 1}},
    lambda c: {**c, "config": {**c["config"], "method": "nope"}},
    lambda c: {**c, "config": {**c["config"], "batch_size": 4}},
])


@st.composite
def damage(draw) -> dict:
    """What to do to config.json, metrics.jsonl and done.json (applied by :func:`_apply`)."""
    _, stopped = runs()
    good = {name: (stopped / name).read_bytes() for name in ("config.json", "metrics.jsonl", "done.json")}
    return {
        "config": draw(st.one_of(st.just("intact"), st.tuples(st.just("bytes"), damaged(good["config.json"])),
                                 st.tuples(st.just("json"), CONFIG_EDITS)), label="config.json"),
        "metrics": draw(st.one_of(st.just("intact"),
                                  st.tuples(st.just("crash"), st.integers(0, 1), st.floats(0, 1)),
                                  st.tuples(st.just("bytes"), damaged(good["metrics.jsonl"]))), label="metrics.jsonl"),
        "done": draw(st.one_of(st.sampled_from(["intact", "deleted"]), damaged(good["done.json"])), label="done.json"),
    }


def _apply(run: Path, full: Path, what: dict) -> bool:
    """Damage ``run`` as ``what`` says; returns whether its damage is of the kinds a crash leaves
    (config.json intact, metrics.jsonl whole up to a cut last line)."""
    config = run / "config.json"
    if what["config"] != "intact":
        kind, arg = what["config"]
        if kind == "bytes":
            config.write_bytes(arg)
        else:
            config.write_text(json.dumps(arg(json.loads(config.read_text()))))
    metrics = run / "metrics.jsonl"
    if what["metrics"] != "intact":
        if what["metrics"][0] == "crash":  # killed while writing the line of step 3 or 4, after the checkpoint
            _, whole, cut = what["metrics"]
            later = _lines(full)[2:]
            torn = later[whole]
            metrics.write_text(metrics.read_text() + "".join(x + "\n" for x in later[:whole])
                               + torn[:int(cut * len(torn))])
        else:
            metrics.write_bytes(what["metrics"][1])
    done = run / "done.json"
    if what["done"] == "deleted":
        done.unlink()
    elif isinstance(what["done"], bytes):
        done.write_bytes(what["done"])
    return what["config"] == "intact" and what["metrics"] != "intact" and what["metrics"][0] == "crash" or (
        what["config"] == "intact" and what["metrics"] == "intact")


@budget(6)
@given(damage())
def test_a_damaged_run_folder_resumes_exactly_or_fails_in_one_line(what):
    full, stopped = runs()
    with tempfile.TemporaryDirectory() as tmp:
        sandbox = Path(tmp)
        run = sandbox / "run"
        shutil.copytree(stopped, run)
        crash_shaped = _apply(run, full, what)
        before_run, before = {p: (run / p).read_bytes() for p in listing(run)}, listing(sandbox)
        with _quiet_one_thread() as err, contextlib.chdir(sandbox):
            code = main(["train", "--resume", "--max-steps", str(STEPS), "--out", "run"])
        said = err.getvalue()
        assert code in (0, 2), (code, said)
        assert "Traceback" not in said, said
        outside = {k: v for k, v in listing(sandbox).items() if not k.startswith("run/")}
        assert outside == {k: v for k, v in before.items() if not k.startswith("run/")}  # nothing written outside
        if code == 2:
            event("refused")
            assert one_line(said).startswith("headgeom train: error: "), said
            assert {p: (run / p).read_bytes() for p in listing(run)} == before_run  # the folder as it was
            return
        event("resumed")
        assert all(line.startswith("note: ") for line in said.splitlines()), said
        steps = [json.loads(line)["step"] for line in _lines(run)]
        last = json.loads((run / "done.json").read_text())["step"]
        if crash_shaped:
            assert steps == list(range(1, STEPS + 1)), steps  # no step lost or repeated
            assert _lines(run) == _lines(full)  # and the same steps as the uninterrupted run
        else:
            assert len(steps) == len(set(steps)) and steps == sorted(steps), steps  # none repeated
            assert [s for s in steps if s > 2] == list(range(3, last + 1)), steps  # none lost after the checkpoint


# ---- regressions the fuzzing found

@pytest.mark.parametrize("edit, said", [
    (lambda c: {}, 'holds no "config" object'),  # was a KeyError traceback
    (lambda c: [], 'holds no "config" object'),
    (lambda c: {**c, "config": {k: v for k, v in c["config"].items() if k != "method"}}, "cannot use"),
    (lambda c: {**c, "config": {**c["config"], "head": "d-16-9"}}, "head: checkpoint 'd-16-8', config.json 'd-16-9'"),
    (lambda c: {**c, "config": {**c["config"], "lr": 0.5}}, "lr: checkpoint"),  # would resume another run
])
def test_a_damaged_config_json_is_refused_in_one_line_naming_it(tmp_path, edit, said):
    run = tmp_path / "run"
    shutil.copytree(runs()[1], run)
    config = run / "config.json"
    config.write_text(json.dumps(edit(json.loads(config.read_text()))))
    before = {p: (run / p).read_bytes() for p in listing(run)}
    with _quiet_one_thread() as err:
        code = main(["train", "--resume", "--max-steps", str(STEPS), "--out", str(run)])
    line = one_line(err.getvalue())
    assert code == 2 and line.startswith("headgeom train: error: --resume: ") and said in line, line
    assert "config.json" in line and {p: (run / p).read_bytes() for p in listing(run)} == before


def test_config_json_that_is_not_json_names_the_file(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs()[1], run)
    (run / "config.json").write_bytes(b'{"config": {"method": "sim')
    with _quiet_one_thread() as err:
        assert main(["train", "--resume", "--out", str(run)]) == 2
    assert f"{run / 'config.json'} is damaged (not JSON" in one_line(err.getvalue())

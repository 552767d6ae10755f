"""The experiment runner on a fake experiment registered here (and removed afterwards).

The fake experiment's metric is v = scale * (seed + 1); the expected values below are written
from that formula, not read from the runner's output.
"""
import base64
import dataclasses
import json
import math
import os
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from headgeom.cli import main
from headgeom.experiments import runner
from headgeom.claims.row import REQUIRED_KEYS, Row
from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary, measured
from headgeom.report.table import Table
from headgeom.experiments.runner import cell_key, jsonable, run_experiments
from headgeom.runs.cell import log_metrics
from headgeom.runs.metrics import read_metrics
from headgeom.runs import LOCK_NAME, RunLock
from headgeom.claims.robustness import sweep
from headgeom.claims.verdict import VERDICTS, Verdict

FAKE = "FAKE_RUNNER"
CALLS: list[dict] = []


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    scale: float = 1.0
    seeds: int = 2
    fail_seed: int = -1
    floor: float = 0.0  # the convention of the fake rule: supported when every v > floor
    name_conventions: bool = True  # False: its test row names none (an error of its summary)


def _run_cell(config, cell):
    CALLS.append(dict(cell))
    log_metrics(0, {"partial": 0.5 * config.scale})
    if cell["seed"] == config.fail_seed:
        raise RuntimeError(f"fake failure at seed {cell['seed']}")
    return {"v": config.scale * (cell["seed"] + 1), "arr": np.arange(2), "t": torch.tensor(0.25)}


def _summarize(config, results):
    import matplotlib.figure

    vals = [m["v"] for _, m in results]

    def fig():
        f = matplotlib.figure.Figure(figsize=(2, 2))
        f.add_subplot().plot(vals)
        return f

    def rule(floor):
        return Verdict("supported" if min(vals) > floor else "not supported", "v", f"min v against {floor:g}")

    conventions = ({"conventions": ("floor",), "robustness": {"floor": sweep(rule, config.floor, [-1.0, 0.0, 0.5])}}
                   if config.name_conventions else {})
    claim = Row(id=FAKE, statement="v is positive", setting={"objective": "none", "head": "fake"},
                measured={"v": measured(vals)}, verdict=rule(config.floor).outcome,
                criterion="every v > 0", evidence="test", headline="v", **conventions)
    return Summary(claims=[claim], tables=[Table(["v"], [[v] for v in vals], title="values")],
                   figures=[("values", fig)], notes=["fake note"])


def _experiment(exp_id=FAKE, theory=False, **preset_kw):
    small = dataclasses.replace(FakeConfig(), scale=2.0)
    return Experiment(id=exp_id, title="fake experiment", statement="a fake statement", theory=theory,
                      presets={"quick": lambda: dataclasses.replace(FakeConfig(), **preset_kw),
                               "small": lambda: small, "paper": lambda: small},
                      cells=lambda config, seeds: [{"seed": s, "tag": "a/b"} for s in range(seeds)],
                      run_cell=_run_cell, summarize=_summarize)


@pytest.fixture
def fake(request):
    """Register the fake experiment (params via indirect), remove it afterwards."""
    kw = getattr(request, "param", {})
    runner._load()  # import the real experiment modules first, so that they are not imported mid-test
    EXPERIMENTS.pop(FAKE, None)
    exp = _experiment(**kw)
    EXPERIMENTS[FAKE] = exp
    CALLS.clear()
    yield exp
    EXPERIMENTS.pop(FAKE, None)
    CALLS.clear()


def _run(out, **kw):
    return run_experiments([FAKE], out=out, progress=False, **kw)


def _cell_dirs(out):
    return sorted((out / "runs" / FAKE).iterdir())


def test_documented_files_and_structure(fake, tmp_path, capsys):
    out = tmp_path / "o"
    res = _run(out)
    assert res["n_failed"] == 0 and len(CALLS) == 2
    printed = capsys.readouterr().out.splitlines()  # one line per experiment, its verdicts told per claim at the end
    assert [line for line in printed if line.startswith(FAKE)] == [
        line for line in printed if "2 cells (0 reused, 0 failed)" in line
        and f"; rows for claim {FAKE} (1); verdicts per claim at the end" in line]
    assert len([line for line in printed if line.startswith(FAKE)]) == 1

    data = json.loads((out / "results.json").read_text())
    assert {"preset", "seeds", "experiments", "claims", "environment"} <= set(data)
    assert data["preset"] == "quick" and data["seeds"] is None
    e = data["experiments"][FAKE]
    assert {"title", "statement", "config", "n_cells", "n_failed", "elapsed_s", "tables", "notes", "figures"} <= set(e)
    assert e["n_cells"] == 2 and e["n_failed"] == 0 and e["elapsed_s"] >= 0
    assert e["config"] == {"scale": 1.0, "seeds": 2, "fail_seed": -1, "floor": 0.0, "name_conventions": True}
    assert e["notes"][0] == "fake note" and e["tables"][0][0] == "values"
    assert e["notes"] == ["fake note"]  # its test row names its convention and the sweep: no warning
    assert e["errors"] == []
    # one bottom line per claim, by the rule, resting on the row at its index in "claims"
    assert data["bottom_lines"] == [{"claim": FAKE, "conclusion": "holds",
                                     "text": "Holds: 1 of our test rows supports it, robust over floor.",
                                     "rows": [{"row": 0, "name": f"{FAKE} (objective none)", "source": "ours (quick)",
                                               "verdict": "supported", "role": "decides"}]}]
    assert e["figures"] == [f"figures/{FAKE}_values.png"]
    png = out / e["figures"][0]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    (claim,) = data["claims"]
    assert set(REQUIRED_KEYS) <= set(claim) and claim["verdict"] in VERDICTS
    assert e["tables"][0][1].startswith("| v |\n|---|\n| ")  # stored as its markdown
    assert claim["setting"] == {"objective": "none", "head": "fake", "preset": "quick"}
    assert claim["source"] == "ours (quick)"  # every own row says where it comes from (headgeom.claims.sources)
    vals = [1.0, 2.0]  # scale * (seed + 1)
    assert claim["measured"]["v"]["value"] == pytest.approx(statistics.mean(vals))
    assert claim["measured"]["v"]["spread"] == pytest.approx(statistics.stdev(vals))
    assert claim["measured"]["v"]["n"] == 2

    git_rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(runner.__file__).parent,
                             capture_output=True, text=True).stdout.strip() or "unknown"
    dirs = _cell_dirs(out)
    assert len(dirs) == 2
    for d in dirs:
        assert {"config.json", "metrics.jsonl", "done.json"} <= {p.name for p in d.iterdir()}
        cfg = json.loads((d / "config.json").read_text())
        assert cfg["git_revision"] == git_rev and isinstance(cfg["git_dirty"], (bool, type(None)))
        assert cfg["versions"]["torch"] == torch.__version__ and cfg["versions"]["numpy"] == np.__version__
        assert {"headgeom", "scipy", "python"} <= set(cfg["versions"])
        assert cfg["preset"] == "quick" and cfg["config"]["scale"] == 1.0 and "started" in cfg
        # the logged curve in the one metrics.jsonl schema; the cell's result only in done.json
        seed = cfg["cell"]["seed"]
        assert [(r.step, dict(r.values)) for r in read_metrics(d, strict=True)] == [(0, {"partial": 0.5})]
        done = json.loads((d / "done.json").read_text())
        assert done["metrics"] == {"v": seed + 1.0, "arr": [0, 1], "t": 0.25} and done["elapsed_s"] >= 0
        assert d.name == cell_key(cfg["cell"], FakeConfig())

    report = (out / "report.md").read_text()
    assert "| id | statement | setting | measured | evidence | verdict | criterion |" in report
    assert f"| {FAKE} | v is positive |" in report and "1.5 ± 0.7071 (n=2)" in report
    assert f"![{FAKE}_values](figures/{FAKE}_values.png)" in report
    assert report.index("## Summary") < report.index(f"## {FAKE}: ") < report.index(f"### {FAKE}: fake experiment")
    assert f"--only {FAKE}" in report and git_rev in report
    # report.html beside it: the same rows, the figure embedded (headgeom.report.html; in a browser:
    # tests/report/test_report_html_browser.py)
    page = (out / "report.html").read_text()
    assert f'<details class="claim" data-claim="{FAKE}">' in page and "1.5 ± 0.7071 (n=2)" in page
    assert "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode() in page


@pytest.mark.parametrize("fake", [{"name_conventions": False}], indirect=True)
def test_a_test_row_without_its_conventions_is_an_error(fake, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runner, "CONVENTIONS_REQUIRED", True)  # as it is; a warning where it is set False
    res = _run(tmp_path / "strict")
    e = res["experiments"][FAKE]
    assert res["n_failed"] == 1 and e["notes"] == ["fake note"]
    assert e["errors"] == [f"1 test row of {FAKE} without the conventions the verdict depends on "
                           f"(docs/report.md#conventions-and-robustness): {FAKE} (objective none): names no "
                           "conventions"]
    assert len(res["claims"]) == 1  # the row is still reported


def test_rerun_skips_finished_cells_and_deleted_done_reruns_only_that_cell(fake, tmp_path):
    out = tmp_path / "o"
    first = _run(out)
    assert len(CALLS) == 2
    CALLS.clear()
    second = _run(out)
    assert CALLS == [] and second["experiments"][FAKE]["n_reused"] == 2
    assert second["claims"][0]["measured"] == first["claims"][0]["measured"]

    victim = _cell_dirs(out)[1]
    seed = json.loads((victim / "config.json").read_text())["cell"]["seed"]
    (victim / "done.json").unlink()
    _run(out)
    assert [c["seed"] for c in CALLS] == [seed]
    assert (victim / "done.json").exists()


def test_more_seeds_reuse_old_ones_and_changed_config_gets_new_directories(fake, tmp_path):
    out = tmp_path / "o"
    _run(out)
    CALLS.clear()
    res = _run(out, seeds=3)
    assert [c["seed"] for c in CALLS] == [2]  # seeds 0, 1 reused: `seeds` is not part of the cell hash
    assert res["seeds"] == 3 and res["experiments"][FAKE]["config"]["seeds"] == 3
    assert res["claims"][0]["measured"]["v"]["value"] == pytest.approx(2.0)  # mean of 1, 2, 3

    CALLS.clear()
    res = _run(out, preset="small")  # scale 2: a different setting must never reuse scale-1 results
    assert sorted(c["seed"] for c in CALLS) == [0, 1]
    assert res["claims"][0]["measured"]["v"]["value"] == pytest.approx(statistics.mean([2.0, 4.0]))
    assert res["claims"][0]["setting"]["preset"] == "small"
    assert len(_cell_dirs(out)) == 5


def test_a_cell_another_process_runs_is_reported_failed_and_left_alone(fake, tmp_path):
    out = tmp_path / "o"
    _run(out)
    victim = _cell_dirs(out)[0]
    seed = json.loads((victim / "config.json").read_text())["cell"]["seed"]
    (victim / "done.json").unlink()
    before = sorted(p.name for p in victim.iterdir())
    CALLS.clear()
    with RunLock(victim):  # another open file: refused as another process would be
        res = _run(out)
        assert CALLS == [] and sorted(p.name for p in victim.iterdir()) == sorted([*before, LOCK_NAME])
    failed = res["experiments"][FAKE]["failed_cells"]
    assert len(failed) == 1 and "RunLockedError" in failed[0]["error"] and f"pid {os.getpid()}" in failed[0]["error"]
    _run(out)  # once free, the cell runs
    assert [c["seed"] for c in CALLS] == [seed] and (victim / "done.json").exists()


@pytest.mark.parametrize("fake", [{"seeds": 3, "fail_seed": 1}], indirect=True)
def test_failing_cell_writes_error_json_and_others_still_run(fake, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["reproduce", "--only", FAKE, "--out", str(out), "--quiet"]) == 1
    assert sorted(c["seed"] for c in CALLS) == [0, 1, 2]
    by_seed = {json.loads((d / "config.json").read_text())["cell"]["seed"]: d for d in _cell_dirs(out)}
    assert (by_seed[0] / "done.json").exists() and (by_seed[2] / "done.json").exists()
    assert not (by_seed[1] / "done.json").exists()
    err = json.loads((by_seed[1] / "error.json").read_text())
    assert "fake failure at seed 1" in err["error"] and "Traceback" in err["traceback"]
    assert "RuntimeError" in err["traceback"]

    data = json.loads((out / "results.json").read_text())
    e = data["experiments"][FAKE]
    assert e["n_failed"] == 1 and e["failed_cells"][0]["key"] == by_seed[1].name
    assert data["claims"][0]["measured"]["v"]["n"] == 2 and "incomplete" in data["claims"][0]
    report = (out / "report.md").read_text()
    assert "### Failed cells" in report and by_seed[1].name in report and "fake failure at seed 1" in report
    assert "failed" in capsys.readouterr().err


@pytest.mark.parametrize("fake", [{"seeds": 2}], indirect=True)
def test_error_json_is_cleared_when_the_cell_later_succeeds(fake, tmp_path, monkeypatch):
    out = tmp_path / "o"
    state = {"fail": True}
    original = fake.run_cell

    def flaky(config, cell):
        if state["fail"] and cell["seed"] == 0:
            raise ValueError("transient")
        return original(config, cell)

    EXPERIMENTS[FAKE] = dataclasses.replace(fake, run_cell=flaky)
    assert _run(out)["n_failed"] == 1
    (bad,) = [d for d in _cell_dirs(out) if (d / "error.json").exists()]
    state["fail"] = False
    CALLS.clear()
    assert _run(out)["n_failed"] == 0
    assert [c["seed"] for c in CALLS] == [0]
    assert not (bad / "error.json").exists() and (bad / "done.json").exists()


def test_non_json_metrics_fail_the_cell_clearly(fake, tmp_path):
    EXPERIMENTS[FAKE] = dataclasses.replace(fake, run_cell=lambda config, cell: {"obj": object()})
    res = _run(tmp_path / "o")
    assert res["n_failed"] == 2
    assert "cannot be written as JSON" in res["experiments"][FAKE]["failed_cells"][0]["error"]
    assert res["experiments"][FAKE]["notes"] == ["all 2 cells failed: nothing to summarise"]


def test_a_module_that_fails_to_import_does_not_stop_the_others(fake, tmp_path, monkeypatch):
    import importlib
    import pkgutil
    from types import SimpleNamespace

    def broken_load_all():
        raise ImportError("c99_broken is broken")

    real_import = importlib.import_module

    def fake_import(name, *a):
        if name.endswith(".c99_broken"):
            raise SyntaxError("bad syntax in c99_broken")
        return real_import(name, *a)

    monkeypatch.setattr(runner, "load_all", broken_load_all)
    monkeypatch.setattr(pkgutil, "iter_modules", lambda path: [SimpleNamespace(name="c99_broken")])
    monkeypatch.setattr(runner.importlib, "import_module", fake_import)
    res = _run(tmp_path / "a")
    assert res["n_failed"] == 0 and "c99_broken" in res["load_errors"]  # --only: reported, not failed
    assert "c99_broken" in (tmp_path / "a" / "report.md").read_text()
    monkeypatch.setattr(runner, "EXPERIMENTS", {FAKE: fake})
    res = run_experiments(None, out=tmp_path / "b", progress=False)
    assert res["n_failed"] == 1 and res["experiments"][FAKE]["n_failed"] == 0  # everything: it counts


def test_summary_errors_are_reported_not_fatal(fake, tmp_path):
    def bad_summary(config, results):
        return Summary(claims=[{"id": FAKE, "verdict": "maybe"}])

    EXPERIMENTS[FAKE] = dataclasses.replace(fake, summarize=bad_summary)
    res = _run(tmp_path / "o")
    assert res["n_failed"] == 1 and res["claims"] == []
    assert "lacks keys" in res["experiments"][FAKE]["errors"][0]

    def bad_tables(config, results):  # a table that is not one: reported, the rest kept
        return Summary(claims=_summarize(config, results).claims, tables=[("values", "| v |\n|---|")])

    EXPERIMENTS[FAKE] = dataclasses.replace(fake, summarize=bad_tables)
    res = _run(tmp_path / "t")
    assert res["n_failed"] == 1 and len(res["claims"]) == 1 and res["experiments"][FAKE]["tables"] == []
    assert "must hold headgeom.report.table.Table objects; got ['tuple']" in res["experiments"][FAKE]["errors"][0]

    def bad_figures(config, results):
        good = _summarize(config, results)
        return Summary(claims=good.claims, figures=[("//", lambda: None), ("none", lambda: None)])

    EXPERIMENTS[FAKE] = dataclasses.replace(fake, summarize=bad_figures)
    res = _run(tmp_path / "p")
    errors = res["experiments"][FAKE]["errors"]
    assert res["n_failed"] == 2 and len(res["claims"]) == 1 and res["experiments"][FAKE]["figures"] == []
    assert "no usable characters" in errors[0] and "must return a matplotlib Figure" in errors[1]


def test_unknown_id_and_nothing_registered_are_clear_errors(fake, tmp_path, capsys, monkeypatch):
    with pytest.raises(ValueError, match=rf"unknown experiment id 'NOPE'.*{FAKE}"):
        run_experiments(["NOPE"], out=tmp_path / "o", progress=False)
    assert main(["reproduce", "--only", "NOPE", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "NOPE" in err and FAKE in err
    assert not (tmp_path / "o").exists()

    with pytest.raises(ValueError, match="unknown preset"):
        run_experiments([FAKE], preset="huge", out=tmp_path / "o", progress=False)
    with pytest.raises(ValueError, match="positive integer"):
        run_experiments([FAKE], seeds=0, out=tmp_path / "o", progress=False)

    monkeypatch.setattr(runner, "EXPERIMENTS", {})
    monkeypatch.setattr(runner, "_load", lambda: {})
    with pytest.raises(ValueError, match="no experiment is registered"):
        run_experiments(None, out=tmp_path / "o", progress=False)
    assert main(["reproduce", "--out", str(tmp_path / "o")]) == 2
    assert "no experiment is registered" in capsys.readouterr().err


def test_cli_reproduce_and_theory(fake, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["reproduce", "--only", FAKE.lower(), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    # the bottom lines first, then per claim its counts and rows
    assert text.index("Bottom lines") < text.index(f"{FAKE}  Holds: 1 of our test rows supports it")
    assert f"{FAKE}  v is positive\n  ours: tests: 1 supported\n  [test] supported  v: " in text
    assert str(out / "report.md") in text
    assert f"wrote {out / 'report.html'}" in text
    assert (out / "results.json").exists() and (out / "report.md").exists() and (out / "report.html").exists()

    # theory keeps experiments with theory=True only
    assert main(["theory", "--only", FAKE, "--out", str(tmp_path / "t")]) == 2
    assert "not a theory experiment" in capsys.readouterr().err
    EXPERIMENTS[FAKE] = _experiment(theory=True)
    assert main(["theory", "--only", FAKE, "--out", str(tmp_path / "t"), "--seeds", "1", "--quiet"]) == 0
    data = json.loads((tmp_path / "t" / "results.json").read_text())
    assert data["command"].startswith("headgeom theory") and data["experiments"][FAKE]["n_cells"] == 1


def test_cell_key_is_deterministic_safe_and_distinct():
    a = cell_key({"head": "silu", "seed": 0, "path": "x/y z"}, FakeConfig())
    assert a == cell_key({"head": "silu", "seed": 0, "path": "x/y z"}, FakeConfig())
    assert a.startswith("head=silu_seed=0_path=x_y_z-") and all(c.isalnum() or c in "=._+-" for c in a)
    # cells that slugify alike still differ by their hash; so do configs (except `seeds`)
    assert a != cell_key({"head": "silu", "seed": 0, "path": "x_y_z"}, FakeConfig())
    assert a != cell_key({"head": "silu", "seed": 0, "path": "x/y z"}, FakeConfig(scale=2.0))
    assert a == cell_key({"head": "silu", "seed": 0, "path": "x/y z"}, FakeConfig(seeds=9))
    assert len(cell_key({"k": "v" * 500})) < 100


def test_jsonable_and_log_outside_runner():
    assert jsonable({"a": np.float32(0.5), "b": torch.arange(3), "c": (1, float("nan")), "d": float("-inf"),
                     "e": Path("p"), "f": FakeConfig()}) == {
        "a": 0.5, "b": [0, 1, 2], "c": [1, None], "d": "-inf", "e": "p",
        "f": {"scale": 1.0, "seeds": 2, "fail_seed": -1, "floor": 0.0, "name_conventions": True}}
    assert math.isclose(jsonable(np.float64(1.25)), 1.25)
    with pytest.raises(TypeError, match="cannot be written as JSON"):
        jsonable({"x": object()})
    assert log_metrics(1, {"loss": 0.5}) is False


def test_every_listed_experiment_module_registers_an_experiment():
    # a helper module of an experiment must be named in registry.NOT_EXPERIMENTS, so that the
    # runner's "module did not import" accounting only counts experiments
    import importlib

    from headgeom.experiments.registry import EXPERIMENTS, Experiment, experiment_modules

    for name in experiment_modules():
        mod = importlib.import_module(f"headgeom.experiments.{name}")
        exp = getattr(mod, "EXPERIMENT", None)
        assert isinstance(exp, Experiment), f"{name} registers no EXPERIMENT; add it to NOT_EXPERIMENTS"
        assert EXPERIMENTS[exp.id] is exp


def test_a_rank_other_than_0_runs_the_cell_and_writes_nothing(fake, tmp_path, monkeypatch):
    """In a cell of several SLURM tasks, rank 1 runs the cell (its training would join rank 0's DDP
    job) but leaves every file of the cell to rank 0; log_metrics writes nothing there either."""
    config, cell, run_dir = FakeConfig(), {"seed": 0, "tag": "a/b"}, tmp_path / "cell"
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "2")
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    res = runner.run_one_cell(fake, config, cell, run_dir, "quick", {})
    assert res == {"status": "follower"} and CALLS == [cell] and not run_dir.exists()
    monkeypatch.setenv("SLURM_PROCID", "0")  # rank 0 of the same step runs it as usual
    env = runner.environment()
    assert runner.run_one_cell(fake, config, cell, run_dir, "quick", env)["status"] == "done"
    assert (run_dir / "done.json").exists() and len(CALLS) == 2
    monkeypatch.setenv("SLURM_PROCID", "1")  # a finished cell: the follower has nothing to join
    assert runner.run_one_cell(fake, config, cell, run_dir, "quick", env) == {"status": "follower"}
    assert len(CALLS) == 2


@dataclasses.dataclass(frozen=True)
class ThreadedConfig:
    num_threads: int | None = 1
    seeds: int = 1


def test_the_runner_runs_a_cell_with_its_configs_thread_count_and_restores_it(tmp_path):
    """The runner alone applies a cell's ``num_threads`` (experiment modules do not): inside the cell
    torch has that many threads, afterwards as many as before; None or no field leaves torch's setting."""
    seen: list[int] = []

    def run_cell(config, cell):
        seen.append(torch.get_num_threads())
        return {"threads": seen[-1]}

    exp = Experiment(id="THREADS", title="t", statement="s", presets={"quick": ThreadedConfig},
                     cells=lambda config, seeds: [{"seed": 0}], run_cell=run_cell,
                     summarize=lambda config, results: Summary())
    before = torch.get_num_threads()
    want = 2 if before == 1 else 1
    env = runner.environment()
    res = runner.run_one_cell(exp, ThreadedConfig(num_threads=want), {"seed": 0}, tmp_path / "a", "quick", env)
    assert res["status"] == "done" and res["metrics"] == {"threads": want} and res["elapsed_s"] >= 0
    assert torch.get_num_threads() == before
    runner.run_one_cell(exp, ThreadedConfig(num_threads=None), {"seed": 0}, tmp_path / "b", "quick", env)
    runner.run_one_cell(exp, FakeConfig(), {"seed": 0}, tmp_path / "c", "quick", env)
    assert seen[1:] == [before, before] and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="thread counts must be a positive int"):
        runner.call_cell(exp, ThreadedConfig(num_threads=0), {"seed": 0})

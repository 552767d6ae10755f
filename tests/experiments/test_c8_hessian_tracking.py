"""C8 experiment: registration, cells, documented keys and robust facts on a tiny training run,
and the verdict rule (and the dead-head rule) on fabricated metrics.

No test asserts the paper's numbers or a verdict on real measurements."""
import dataclasses
import json
import math

import pytest

from headgeom.experiments.c8_hessian_tracking import (
    RUNS, TRAIN, C8Config, cells, estimator_disagreement, run_cell, summarize, train_config)
from headgeom.claims.training_verdicts import dead_head, escape, negative_fraction
from claim_rows import rows_json, tables_md
from headgeom.claims.row import Row
from headgeom.claims.verdict import VERDICTS

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

TINY = C8Config(train=dataclasses.replace(TRAIN, data_options={"n": 24, "size": 16}, batch_size=8, epochs=1, max_steps=2,
                                          track_every=1, probe_size=8),
                hidden=16, out_dim=16, pred_hidden=16, block_samples=3, seeds=1)
SCALARS = ("activation", "pseudo_collapse", "final_loss", "spread_initial", "spread_final", "spread_ratio",
           "escaped", "dead_head")


@pytest.fixture(scope="module")
def tiny():
    return {run: run_cell(TINY, {"run": run, "seed": 0}) for run in ("normal-silu", "collapsed-silu", "offset-linear")}


def test_registered_with_three_documented_presets():
    import headgeom.experiments.c8_hessian_tracking as mod

    exp = mod.EXPERIMENT
    assert exp.id == "C8" and not exp.theory and set(exp.presets) == {"quick", "small", "paper"}
    for name, preset in exp.presets.items():
        cfg = preset()
        assert cfg.preset == name and "headgeom reproduce --only C8" in preset.__doc__ and "Runtime" in preset.__doc__
    paper = exp.config("paper")
    assert (paper.train.backbone_options["width"], paper.hidden, paper.out_dim, paper.pred_hidden,
            paper.train.batch_size, paper.train.lr, paper.train.epochs) == (1.0, 2048, 2048, 512, 256, 0.05, 100)
    tc = train_config(paper, "offset-relu", 0)  # the induced collapse: x0.1 cannot collapse a bias-free ReLU head
    assert tc.head == "d-2048-2048:relu:nobias" and tc.pseudo_collapse is None and tc.weight_decay == 0.0
    assert tc.collapse == paper.collapse_depth == 0.02
    tc = train_config(paper, "collapsed-silu", 0)
    assert (tc.pseudo_collapse, tc.collapse) == (0.1, None)


def test_cells_and_validation():
    assert cells(TINY, 3) == [{"run": r, "seed": s} for r in RUNS for s in range(3)]
    with pytest.raises(ValueError, match="unknown entries"):
        cells(dataclasses.replace(TINY, runs=("collapsed-gelu",)))
    with pytest.raises(ValueError, match="at least one seed"):
        cells(TINY, 0)


def test_tiny_run_keys_and_robust_facts(tiny):
    for run, m in tiny.items():
        json.dumps(m)
        assert set(SCALARS) <= set(m)
        assert m["steps"] == [0, 1, 2]  # step 0 = initialisation, then every track_every steps
        for r in TINY.readings:
            assert len(m[f"lambda_min[{r}]"]) == 3 and 0 <= m[f"frac_points_negative[{r}]"] <= 1
            assert all(lo <= hi for lo, hi in zip(m[f"lambda_min[{r}]"], m[f"lambda_max[{r}]"]))
            # the floor is relative to the result or to G's operands, whichever is larger
            assert all(s > 0 for s in m[f"operand_scale[{r}]"])
            assert m[f"floor[{r}]"] == pytest.approx([TINY.rel_floor * max(abs(lo), abs(hi), s) for lo, hi, s in
                                                     zip(m[f"lambda_min[{r}]"], m[f"lambda_max[{r}]"],
                                                         m[f"operand_scale[{r}]"])])
        assert all(s > 0 for s in m["spread_projector"]) and not m["dead_head"]
    lin, silu = tiny["offset-linear"], tiny["normal-silu"]
    # a linear head has no interaction term: M = 0 to round-off in every tracked block
    for r in TINY.readings:
        assert all(v is not None and v <= 1e-12 for v in lin[f"M_ratio_fro[{r}]"])
        assert all(v is not None and v > 1e-6 for v in silu[f"M_ratio_fro[{r}]"])
    # the induced collapse puts the linear head at the stated spread, under its own at normal init
    assert lin["spread_initial"] * math.sqrt(TINY.out_dim) == pytest.approx(TINY.collapse_depth, rel=1e-4)
    assert lin["spread_initial"] < lin["spread_reference"] and lin["collapse"] == TINY.collapse_depth
    # the x0.1 pseudo-collapse of a SiLU head changes its geometry; the other runs have no x0.1 to compare
    assert set(tiny["collapsed-silu"]["pseudo_collapse_gap"]) == set(TINY.readings)
    assert not tiny["collapsed-silu"]["inert_pseudo_collapse"]
    assert min(tiny["collapsed-silu"]["pseudo_collapse_gap"].values()) > 1e-3
    assert "pseudo_collapse_gap" not in silu and "pseudo_collapse_gap" not in lin
    # one level for every head: collapse_fraction / sqrt(k)
    assert all(m["collapse_level"] == pytest.approx(TINY.collapse_fraction / math.sqrt(16)) for m in tiny.values())


def test_tiny_run_power_iteration_column(tiny):
    """The paper's estimator is a Rayleigh quotient of the same blocks: never below the exact λ_min
    (beyond float32 round-off) nor above λ_max; its disagreement count follows the stated rule."""
    for m in tiny.values():
        for r in TINY.readings:
            est, lo, hi, floor = (m[f"{k}[{r}]"] for k in ("power_lambda_min", "lambda_min", "lambda_max", "floor"))
            assert len(est) == len(lo) == 3
            for e, a, b in zip(est, lo, hi):
                scale = max(abs(a), abs(b))
                assert a - 1e-4 * scale <= e <= b + 1e-4 * scale
            sign = sum((a < -f) != (e < -f) for a, f, e in zip(lo, floor, est))
            value = sum(abs(e - a) > TINY.power_rel_tol * max(abs(a), abs(b)) for e, a, b in zip(est, lo, hi))
            got = m[f"power_disagreement[{r}]"]
            assert got["points"] == 3 and got["sign"] == sign and got["value"] == value
            assert max(sign, value) <= got["either"] <= sign + value


def test_estimator_disagreement_rule():
    lo, hi, floor = [-1.0, -1.0, 0.5, None], [10.0, 10.0, 10.0, 1.0], [1e-9, 1e-9, 1e-9, 1e-9]
    got = estimator_disagreement(lo, hi, floor, [-0.995, 0.2, 0.5, 1.0], rel_tol=1e-3)
    # point 0: |diff| 0.005 <= 0.01, same sign; point 1: sign and value; point 2: exact; point 3: undefined
    assert got == {"sign": 1, "value": 1, "either": 1, "points": 3}
    got = estimator_disagreement(lo[:1], hi[:1], floor[:1], [-0.5], rel_tol=1e-3)
    assert got == {"sign": 0, "value": 1, "either": 1, "points": 1}


def test_disagreements_reach_the_claim_and_the_table():
    runs = {"normal-silu": [_fake(0.8)] * 2, "collapsed-silu": [_fake(0.6, True)] * 2,
            "offset-relu": [_fake(0.0)] * 2, "offset-linear": [_fake(0.1)] * 2}
    for ms in runs.values():
        for i, m in enumerate(ms):
            ms[i] = {**m, **{f"power_disagreement[{r}]": {"sign": 1, "value": 2, "either": 2, "points": 4} for r in READ}}
    s = summarize(dataclasses.replace(TINY, readings=READ, seeds=2),
                  [({"run": r, "seed": i}, m) for r, ms in runs.items() for i, m in enumerate(ms)])
    assert rows_json(s)[0]["measured"]["power_estimator_disagrees[offset-relu]"]["value"] == pytest.approx(0.5)
    assert "4/8 (sign 2)" in tables_md(s)[0][1]


def _fake(frac_neg, escaped=False, dead=False, ambient=None, collapsed=True, m_ratio=0.1, past=None, lam=-1.0):
    """frac_neg under every reading (``ambient`` overrides the ambient one): that share of 10 tracking points has
    lambda_min = ``lam`` (< -floor = -1e-10), the others +1; collapsed: spread at step 0 under the level
    (k = 16: uniform spread 0.25, level 0.125 at fraction 0.5), escaped: ends at 0.3 (x6); past: lambda_min at
    every point negative or not (the C4 row's collapsed points, G PSD there)."""
    start = 0.05 if collapsed else 0.15
    end = 0.3 if escaped else start
    m = {"steps": [0, 1], "spread_projector": [start, end], "spread_z": [0.1, 0.1], "out_dim": 16,
         "spread_initial": start, "spread_final": end, "spread_ratio": end / start, "grew": escaped,
         "spread_reference": 0.2, "collapse_level": 0.125, "collapsed_initially": collapsed, "diverged": None,
         "escaped": escaped, "dead_head": dead, "final_loss": -0.5, "train_budget": {"steps": 100, "batch": 32}}
    for r in READ:
        f = ambient if (r == "ambient" and ambient is not None) else frac_neg
        lmin = [lam if (past if past is not None else i < round(10 * f)) else 1.0 for i in range(10)]
        m.update({f"frac_points_negative[{r}]": f, f"lambda_min_min[{r}]": min(lmin),
                  f"lambda_min[{r}]": lmin, f"floor[{r}]": [1e-10] * 10, f"lambda_min_G[{r}]": [0.5] * 10,
                  f"threshold_ratio[{r}]": [2.0 if v < 0 else 0.5 for v in lmin], f"M_ratio_fro[{r}]": [m_ratio] * 10})
    return m


READ = ("ambient", "tangential")
GOOD = {"normal-silu": [_fake(0.8, collapsed=False)] * 5, "collapsed-silu": [_fake(0.6, True)] * 5,
        "offset-relu": [_fake(0.0, m_ratio=0.0)] * 5, "offset-linear": [_fake(0.1, m_ratio=0.0)] * 5}


def _rows(per_run):
    cfg = dataclasses.replace(TINY, readings=READ, seeds=len(next(iter(per_run.values()))))
    results = [({"run": run, "seed": s}, m) for run, ms in per_run.items() for s, m in enumerate(ms)]
    s = summarize(cfg, results)
    for c in rows_json(s):
        Row.from_json(c)
        assert c["verdict"] in VERDICTS and c["criterion"] and c["budget"]["steps"] == 100
    json.dumps(rows_json(s))
    return {(c["id"], c["setting"]["part"], c["setting"]["reading"], c["evidence"]): c for c in rows_json(s)}


def _verdicts(per_run):
    rows = _rows(per_run)
    return {k: c["verdict"] for k, c in rows.items()}


CURV_T = ("C8", "curvature", "tangential", "test")
CURV_A = ("C8", "curvature", "ambient", "diagnostic")
IDENT = ("C8", "curvature, ReLU/linear half", "tangential", "identity")
ESC = ("C8", "escape", "n/a (spread)", "test")


def test_each_reading_has_its_own_row_and_the_tangential_relu_linear_half_is_an_identity():
    rows = _rows(GOOD)
    # C4 at the collapsed states: a test under the tangential reading, a diagnostic under the ambient one (its G
    # is indefinite by the reading: claims/collapsed_states.py)
    assert set(rows) == {CURV_A, CURV_T, IDENT, ESC, ("C4", "collapsed states", "ambient", "diagnostic"),
                         ("C4", "collapsed states", "tangential", "test")}
    assert all(c["headline"] in c["measured"] for c in rows.values())
    assert "ambient Hessian of a cosine loss is indefinite" in rows[CURV_A]["criterion"]
    assert rows[CURV_A]["criterion"].startswith("diagnostic, not counted")  # the reading fixes its outcome
    assert {k: c["verdict"] for k, c in rows.items() if k[0] == "C8"} == {
        CURV_A: "supported", CURV_T: "supported", IDENT: "supported", ESC: "supported"}
    # every test row names its conventions and carries its verdict over a range of each
    assert rows[CURV_T]["conventions"] == ["negative_points", "rel_floor", "majority"] == list(rows[CURV_T]["robustness"])
    assert rows[ESC]["conventions"] == ["collapse_fraction", "growth", "majority"] == list(rows[ESC]["robustness"])
    assert "robustness" not in rows[CURV_A] and "robustness" not in rows[IDENT]


def test_escape_row_names_a_headline_without_a_smooth_collapsed_run():
    rows = _rows({"normal-silu": GOOD["normal-silu"], "offset-relu": GOOD["offset-relu"]})
    assert rows[ESC]["verdict"] == "inconclusive" and rows[ESC]["headline"] == "escaped[offset-relu]"
    assert all(c["headline"] in c["measured"] for c in rows.values())


def test_escape_row_without_a_collapsed_run_names_its_conventions_and_what_would_decide_it():
    row = _rows({"normal-silu": GOOD["normal-silu"]})[ESC]
    assert row["verdict"] == "inconclusive" and row["conventions"] == ["collapse_fraction", "growth", "majority"]
    assert "robustness" not in row and "What would decide it" in row["criterion"]


def test_verdict_follows_the_stated_criterion():
    # a ReLU run negative at most points in every seed: the ambient contrast fails; under the tangential reading
    # its half is an identity (M = 0 holds), so the smooth test is untouched
    v = _verdicts({**GOOD, "offset-relu": [_fake(0.9, True, m_ratio=0.0)] * 5})
    assert (v[CURV_A], v[CURV_T], v[IDENT]) == ("not supported", "supported", "supported")
    # a smooth run with negative curvature in 3 of 5 seeds: below the 80% majority
    mixed = [_fake(0.8, collapsed=False)] * 3 + [_fake(0.2, collapsed=False)] * 2
    assert _verdicts({**GOOD, "normal-silu": mixed})[CURV_T] == "inconclusive"
    # smooth never negative
    v = _verdicts({**GOOD, "collapsed-silu": [_fake(0.0, True)] * 5})
    assert (v[CURV_A], v[CURV_T]) == ("not supported", "not supported")
    # a ReLU head with M != 0 breaks the identity: a bug
    assert _verdicts({**GOOD, "offset-relu": [_fake(0.0, m_ratio=1e-3)] * 5})[IDENT] == "not supported"
    # dead ReLU seeds are left out of the contrast: all dead -> no usable seed -> inconclusive
    assert _verdicts({**GOOD, "offset-relu": [_fake(0.0, dead=True, m_ratio=0.0)] * 5})[CURV_A] == "inconclusive"


def test_the_tangential_test_row_is_re_judged_over_its_conventions():
    """Re-judged from the stored lambda_min and floor series: a smooth run negative at 60 % of its points holds up
    to the share 0.5 and flips beyond; negatives 10x the floor flip once the floor is raised 100x."""
    rob = _rows({**GOOD, "normal-silu": [_fake(0.6, collapsed=False)] * 5})[CURV_T]["robustness"]
    assert rob["negative_points"]["status"] == "flips at 0.75, 0.9" and rob["majority"]["status"] == "robust"
    small = {**GOOD, **{r: [_fake(0.8, lam=-1e-9)] * 5 for r in ("normal-silu", "collapsed-silu")}}
    rob = _rows(small)[CURV_T]["robustness"]["rel_floor"]
    assert rob["values"] == [1e-12, 1e-10, 1e-08, 1e-06] and rob["status"] == "flips at 1e-08, 1e-06"
    # majority: 3 of 5 seeds negative at 0.8 are a supported row only under a 60 % majority
    mixed = [_fake(0.8, collapsed=False)] * 3 + [_fake(0.2, collapsed=False)] * 2
    rob = _rows({**GOOD, "normal-silu": mixed})[CURV_T]["robustness"]["majority"]
    assert rob["verdicts"] == ["supported", "inconclusive", "inconclusive"]


def test_a_linear_head_negative_only_under_the_ambient_reading_fails_that_row_alone():
    v = _verdicts({**GOOD, "offset-linear": [_fake(0.0, ambient=0.9, m_ratio=0.0)] * 5})
    assert (v[CURV_A], v[CURV_T], v[IDENT]) == ("not supported", "supported", "supported")


def test_escape_is_judged_on_seeds_collapsed_at_step_0_with_one_rule_for_every_run():
    # ReLU/linear never under the level at step 0: left out and counted; the contrast has no "not expected" side
    never = {**GOOD, "offset-relu": [_fake(0.0, collapsed=False, m_ratio=0.0)] * 5,
             "offset-linear": [_fake(0.1, collapsed=False, m_ratio=0.0)] * 5}
    rows = _rows(never)
    assert rows[ESC]["verdict"] == "inconclusive"
    assert rows[ESC]["measured"]["collapsed_at_start_seeds[offset-relu]"]["value"] == 0
    # a smooth side that never escapes fails, whatever the other side holds (no "inconclusive" first)
    stuck = {**never, "collapsed-silu": [_fake(0.6, escaped=False)] * 5}
    assert _rows(stuck)[ESC]["verdict"] == "not supported"
    # ReLU collapsed and escaping in every seed: the contrast fails
    assert _verdicts({**GOOD, "offset-relu": [_fake(0.0, escaped=True, m_ratio=0.0)] * 5})[ESC] == "not supported"
    # normal-silu (not collapsed by construction) is reported beside, not judged
    assert "escaped[normal-silu]" not in rows[ESC]["measured"] and "spread_ratio[normal-silu]" in rows[ESC]["measured"]


def test_c4_at_the_collapsed_states_training_reaches():
    key = ("C4", "collapsed states", "tangential", "test")
    # collapsed-silu collapsed at both points with G PSD and lambda_min < -floor: past its threshold
    assert _verdicts(GOOD)[key] == "supported"
    # not past at its collapsed points
    assert _verdicts({**GOOD, "collapsed-silu": [_fake(0.6, past=False)] * 5})[key] == "not supported"
    # no smooth run ever collapsed: nothing to judge
    none = {**GOOD, "collapsed-silu": [_fake(0.6, True, collapsed=False)] * 5}
    for m in none["collapsed-silu"]:
        m["spread_projector"] = [0.15, 0.15]
    assert _verdicts(none)[key] == "inconclusive"


def test_rules_on_constructed_trajectories():
    assert negative_fraction([-1.0, -1e-12, 0.5, None], [1e-10, 1e-10, 1e-10, 1e-10]) == pytest.approx(1 / 3)
    assert negative_fraction([None], [None]) is None
    e = escape([0.01, None, 0.05], 16, 0.5)  # level 0.5 / sqrt(16) = 0.125
    assert not e["escaped"] and e["collapsed_initially"] and e["spread_ratio"] == pytest.approx(5.0) and e["grew"]
    assert e["collapse_level"] == pytest.approx(0.125)
    e = escape([0.01, 0.2], 16, 0.5)
    assert e["escaped"] and e["collapsed_initially"]
    never = escape([0.2, 0.13], 16, 0.5)  # above the level at step 0: never collapsed, whatever follows
    assert never["escaped"] and not never["collapsed_initially"]
    assert escape([0.01, 0.2], None, 0.5)["escaped"] is None  # no width: undecided, not guessed
    with pytest.raises(ValueError, match="collapse_fraction"):
        escape([0.01], 16, 1.5)
    assert dead_head([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.3, 0.2, 0.1, 0.1])
    assert not dead_head([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.3, 0.2, 0.1, 0.2])  # variance moves
    assert not dead_head([0.0, -1e-9], [0.0, 1e-8], [0.1, 0.1])  # curvature present


def test_through_the_runner_the_training_run_lives_in_the_trained_model_store(tmp_path, monkeypatch):
    """headgeom reproduce: the cell's headgeom-train run sits in the run's trained-model store, named by the
    cell's trained.json (resumable, evaluable), its metrics.jsonl is written once (by the loop: each tracked
    step one line, nothing copied into the cell's own directory), the cell's series are read back from it,
    and a re-run reuses the finished cell."""
    from headgeom.experiments.runner import run_experiments
    import headgeom.experiments.c8_hessian_tracking as mod

    cfg = dataclasses.replace(TINY, runs=("offset-linear",), readings=("tangential",), power_iterations=None)
    monkeypatch.setitem(mod.EXPERIMENT.presets, "quick", lambda: cfg)
    out = run_experiments(["C8"], "quick", tmp_path, progress=False)
    assert out["n_failed"] == 0 and {c["id"] for c in out["claims"]} == {"C8", "C4"}  # C4 at its collapsed states
    (cell_dir,) = (tmp_path / "runs" / "C8").iterdir()
    (model,) = json.loads((cell_dir / "trained.json").read_text())["models"]
    train_dir = (cell_dir / model["folder"]).resolve()
    assert train_dir.parent.parent == tmp_path / "runs" / "trained" and model["how"] == "trained"
    assert (train_dir / "config.json").exists() and (train_dir / "checkpoints" / "last.pt").exists()
    assert not (cell_dir / "metrics.jsonl").exists()  # no second copy under another schema
    lines = [json.loads(x) for x in (train_dir / "metrics.jsonl").read_text().splitlines()]
    tracked = [x for x in lines if "heff_tangential_mean_lambda_min" in x]
    assert [x["step"] for x in tracked] == [0, 1, 2] and len({x["step"] for x in lines}) == len(lines)
    done = json.loads((cell_dir / "done.json").read_text())["metrics"]
    assert done["steps"] == [0, 1, 2]
    assert done["lambda_min[tangential]"] == [x["heff_tangential_mean_lambda_min"] for x in tracked]
    assert done["loss"] == [x.get("loss") for x in tracked] and done["loss"][0] is None
    again = run_experiments(["C8"], "quick", tmp_path, progress=False)
    assert again["experiments"]["C8"]["n_reused"] == 1


def test_gradient_norm_series_and_figure(tiny):
    """The head's and backbone's parameter-gradient norms at each tracking point (none at step 0, before
    any gradient), drawn head beside backbone on one log y range, one line per run."""
    for m in tiny.values():
        for key in ("grad_norm_head", "grad_norm_backbone"):
            assert m[key][0] is None and all(v is not None and v > 0 for v in m[key][1:]), (key, m[key])
    summary = summarize(TINY, [({"run": run, "seed": 0}, m) for run, m in tiny.items()])
    fig = dict(summary.figures)["grad_norm"]()
    head_ax, backbone_ax = fig.axes[:2]
    assert head_ax.get_yscale() == backbone_ax.get_yscale() == "log"
    assert head_ax.get_ylim() == backbone_ax.get_ylim()  # one range: head and backbone compare directly
    for ax, key in ((head_ax, "grad_norm_head"), (backbone_ax, "grad_norm_backbone")):
        drawn = {ln.get_label(): list(ln.get_ydata()) for ln in ax.get_lines()}
        assert drawn == {run: m[key][1:] for run, m in tiny.items()}


def test_negatives_tiny_against_lambda_max_are_named():
    good = {"normal-silu": [_fake(0.8)] * 2, "collapsed-silu": [_fake(0.6, True)] * 2,
            "offset-linear": [_fake(0.1)] * 2}
    tiny = {**_fake(0.9), "lambda_min[tangential]": [-1e-19, 1e-20], "lambda_max[tangential]": [2e-11, 2e-11],
            "floor[tangential]": [2e-21, 2e-21]}
    real = {**_fake(0.9), "lambda_min[tangential]": [-1e-3, -1e-19], "lambda_max[tangential]": [1.0, 2e-11],
            "floor[tangential]": [1e-10, 2e-21]}
    cfg = dataclasses.replace(TINY, readings=READ, seeds=2)

    def notes(relu):
        s = summarize(cfg, [({"run": r, "seed": i}, m) for r, ms in {**good, "offset-relu": relu}.items()
                            for i, m in enumerate(ms)])
        return [n for n in s.notes if "every negative point" in n]

    # recorded before the operand floor (no operand_scale series): their floor was the result's alone
    flagged = notes([tiny, tiny])
    assert len(flagged) == 1 and flagged[0].startswith("offset-relu under the tangential reading")
    assert "5.0e-09 * lambda_max (2 points over 2 seeds)" in flagged[0]
    assert "2 of the seeds were recorded before the operand-relative floor" in flagged[0]
    assert notes([tiny, real]) == []  # one clearly negative point (1e-3 of λ_max) is named nowhere
    # with the operand floor recorded, a tiny point that still passes it is counted and named as small
    passed = {**tiny, "operand_scale[tangential]": [1e-11, 1e-11]}
    flagged = notes([passed, passed])
    assert len(flagged) == 1 and "counted as negative, but it is small" in flagged[0]
    assert "recorded before" not in flagged[0]

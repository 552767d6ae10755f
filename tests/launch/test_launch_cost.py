"""The cost model of a cell (headgeom.launch.cost) and the FLOPs it reads (headgeom.launch.flops).

Expected values are written from the formulas in the module docstrings (steps, makespan, ratios of sums),
not read from a run; the ordering tests use the cells the real quick presets build."""
import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from headgeom.experiments.runner import config_dict, plan_experiments
from headgeom.launch.cost import (CELL_S, EVAL_S_PER_IMAGE, PROBE_S_PER_IMAGE, TRACK_S, TRAIN_FLOPS_PER_S, TRAINING_OVERHEAD_S,
                                  CellWork, Record, after_shared, calibrate, cell_work, folder_records, makespan,
                                  prior_seconds, training_steps)
from headgeom.backbones import get_backbone
from headgeom.launch.flops import backbone_flops, forward_flops, image_side, layer_flops

RESNET = {"method": "simclr_oneway", "backbone": "resnet18", "backbone_options": {"width": 0.125},
          "head": "d-256-128:relu:nobias", "data": "shapes", "data_options": {"n": 1024}, "epochs": 4,
          "max_steps": None, "batch_size": 32, "track_every": 0}


def _works(exp_id, overrides=()):
    """(cell, CellWork) of every cell the quick preset of ``exp_id`` builds."""
    plan, _ = plan_experiments([exp_id], "quick", None, overrides=tuple(overrides))
    exp, config, cells, _, _ = plan[0]
    out = []
    for cell in cells:
        train = exp.train_config(config, cell).to_dict() if exp.train_config else None
        out.append((cell, cell_work(exp.id, config_dict(config), train, forward_flops)))
    return out


# ----------------------------------------------------------------------------- steps and the prior
@pytest.mark.parametrize("epochs,max_steps,want", [(4, None, 4 * (1024 // 32)), (4, 100, 100), (1, 500, 1024 // 32)])
def test_training_steps_are_epochs_times_full_batches_capped_by_max_steps(epochs, max_steps, want):
    assert training_steps({**RESNET, "epochs": epochs, "max_steps": max_steps}) == want


def test_training_steps_of_cifar_and_of_an_unknown_dataset():
    cifar = {**RESNET, "data": "cifar10", "data_options": {}, "batch_size": 256, "epochs": 2}
    assert training_steps(cifar) == 2 * (50_000 // 256)
    assert training_steps({**cifar, "data": "imagefolder", "max_steps": 70}) == 70


def test_the_prior_of_a_training_cell_is_its_formula():
    train = {**RESNET, "max_steps": 50, "track_every": 10}
    work = cell_work("X", {"eval_train": 100, "eval_test": 20}, train, lambda t: 1e6)
    assert (work.group, work.samples, work.eval_images, work.track_points) == ("X/resnet18", 50 * 32 * 2, 120, 6)
    want = 3 * 50 * 32 * 2 * 1e6 / TRAIN_FLOPS_PER_S + 120 * EVAL_S_PER_IMAGE + 6 * TRACK_S + TRAINING_OVERHEAD_S
    assert prior_seconds(work) == pytest.approx(want, rel=1e-12)
    probed = cell_work("X", {"eval_train": 100, "eval_test": 20, "probe_max_iter": 1000}, train, lambda t: 1e6)
    assert probed.probe_images == 120
    assert prior_seconds(probed) == pytest.approx(want + 120 * PROBE_S_PER_IMAGE, rel=1e-12)
    assert prior_seconds(cell_work("T", {}, None, forward_flops)) == CELL_S
    assert prior_seconds(cell_work("P", {}, train, lambda t: 1e6, declared_s=900.0)) == 900.0


def test_more_steps_cost_more_on_the_cells_c8_builds():
    base = _works("C8")
    longer = _works("C8", ["train.epochs=8", "train.max_steps=200"])  # 100 steps -> 200
    assert [c for c, _ in base] == [c for c, _ in longer]
    for (_, a), (_, b) in zip(base, longer):
        assert b.samples == 2 * a.samples and prior_seconds(b) > prior_seconds(a)


def test_built_cells_are_ordered_training_above_theory_and_deeper_heads_above_shallower():
    c4 = _works("C4")
    c11 = _works("C11")
    c9 = dict((c["backbone"] + str(c["seed"]), w) for c, w in _works("C9"))
    assert max(prior_seconds(w) for _, w in c4) < min(prior_seconds(w) for _, w in c11)
    # deeper heads: more head FLOPs at equal steps
    by_depth = {c["depth"]: prior_seconds(w) for c, w in c11 if c["seed"] == 0}
    assert by_depth[1] < by_depth[2] < by_depth[3]
    assert c9["vit_tiny0"].group == "C9/vit_tiny" and c9["resnet180"].group == "C9/resnet18"


# ----------------------------------------------------------------------------- FLOPs
def test_forward_flops_of_a_deeper_head_add_its_linear_layer():
    # one more Linear(256 -> 256) without bias: 2 * 256 * 256 FLOPs per image (multiply and add)
    a = forward_flops({**RESNET, "head": "d-256-128:relu:nobias"})
    b = forward_flops({**RESNET, "head": "d-256-256-128:relu:nobias"})
    assert b - a == 2 * 256 * 256


def test_forward_flops_of_a_wider_resnet_grow_as_the_width_squared():
    # a conv's multiply-adds are c_in * c_out * k * k per output pixel: twice the width, four times the
    # FLOPs, except the stem (3 input channels: twice) and the head, which is the same in both
    a = forward_flops({**RESNET, "backbone_options": {"width": 0.25}, "head": "d-8:linear"})
    b = forward_flops({**RESNET, "backbone_options": {"width": 0.5}, "head": "d-8:linear"})
    assert 3.5 < b / a <= 4.0


@pytest.mark.parametrize("name,options", [("resnet18", {"width": 0.125}), ("resnet50", {"width": 0.25})])
def test_layer_flops_agree_with_torchs_flop_counter(name, options):
    # the independent reference: torch.utils.flop_counter counts the aten convolutions and matrix products
    backbone = get_backbone(name, **options).eval()
    x = torch.zeros(1, 3, 32, 32)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        backbone(x)
    assert layer_flops(backbone, x) == counter.get_total_flops()
    assert backbone_flops(name, json.dumps(options), 32) == (counter.get_total_flops(), backbone.feature_dim)


def test_forward_flops_follow_the_image_side_and_fail_soft():
    assert image_side({**RESNET, "image_size": 64}) == 64
    assert image_side({**RESNET, "data": "cifar10"}) == 32 and image_side({"data": "imagefolder"}) == 224
    small = forward_flops({**RESNET, "head": "d-8:linear"})
    big = forward_flops({**RESNET, "head": "d-8:linear", "image_size": 64})
    assert 3.5 < big / small <= 4.0  # convolutions: four times the pixels
    assert forward_flops({**RESNET, "method": "no_such_method"}) is None
    assert forward_flops({**RESNET, "backbone": "no_such_backbone"}) is None
    assert cell_work("X", {}, {**RESNET, "method": "no_such_method"}, forward_flops).flops > 0  # the default


# ----------------------------------------------------------------------------- calibration
def _w(exp, group, training=True, declared=10.0):
    return CellWork(exp, group, training, declared_s=declared)


def test_calibration_is_the_ratio_of_sums_at_the_first_level_with_records():
    records = [Record(_w("A", "A/r"), 30.0), Record(_w("A", "A/r"), 10.0), Record(_w("B", "B/r", declared=5.0), 5.0),
               Record(_w("T", "T", training=False, declared=2.0), 1.0)]
    cal = calibrate(records)
    assert cal.factor(_w("A", "A/r")) == pytest.approx(40.0 / 20.0)
    assert cal.factor(_w("A", "A/vit")) == pytest.approx(40.0 / 20.0)  # its experiment
    assert cal.factor(_w("C", "C/r")) == pytest.approx((40.0 + 5.0) / (20.0 + 5.0))  # training cells
    assert cal.factor(_w("U", "U", training=False)) == pytest.approx(0.5)  # cells that train nothing
    assert calibrate([]).factor(_w("A", "A/r")) == 1.0
    assert cal.seconds(_w("A", "A/r", declared=7.0)) == pytest.approx(14.0)


def test_a_refined_estimate_follows_the_recorded_times():
    # the cells of one experiment recorded at three times their prior: the others are estimated at three times too
    works = [w for _, w in _works("C11")]
    cal = calibrate([Record(w, 3 * prior_seconds(w)) for w in works[:2]])
    for w in works[2:]:
        assert cal.seconds(w) == pytest.approx(3 * prior_seconds(w), rel=1e-9)


def test_records_that_are_not_a_time_are_left_out():
    cal = calibrate([Record(_w("A", "A/r"), 0.0), Record(_w("A", "A/r"), float("nan")), Record(_w("A", "A/r"), 20.0)])
    assert cal.factor(_w("A", "A/r")) == pytest.approx(2.0)


# ----------------------------------------------------------------------------- makespan
@pytest.mark.parametrize("pending,running,jobs,want", [
    ([4, 3, 2, 1], [], 1, 10),
    ([4, 3, 2, 1], [], 2, 5),  # 4 | 3, then 2 after the 3 and 1 after the 4
    ([1, 1], [5], 2, 5),
    ([6], [5, 1], 2, 7),
    ([], [2, 9], 2, 9),
    ([], [], 3, 0),
    ([10, 1, 1, 1, 1], [], 4, 10),
])
def test_makespan_is_the_greedy_schedule_written_out(pending, running, jobs, want):
    assert makespan(pending, running, jobs) == want


def test_makespan_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        makespan([1.0], [], 0)


# ----------------------------------------------------------------------------- records in a run folder
def test_folder_records_read_done_json_with_their_config(tmp_path):
    def cell(exp, key, elapsed, train=None, done=True):
        d = tmp_path / "runs" / exp / key
        (d / "train").mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"experiment": exp, "preset": "quick", "config": {"eval_train": 7}}))
        if done:
            (d / "done.json").write_text(json.dumps({"metrics": {}, "elapsed_s": elapsed}))
        if train is not None:
            (d / "train" / "config.json").write_text(json.dumps({"config": train}))
        return d

    a = cell("C9", "a-1", 12.5, train=RESNET)
    b = cell("C4", "b-2", 0.25)
    cell("C4", "c-3", 1.0, done=False)  # running or failed: no record
    cell("NOPE", "d-4", 3.0)  # an experiment the caller does not know
    seen = []

    def work_of(exp, record, train):
        seen.append((exp, record["preset"], record["config"], train))
        return None if exp == "NOPE" else cell_work(exp, record["config"], train, lambda t: 1e6)

    found = folder_records(tmp_path / "runs", work_of)
    assert set(found) == {a, b}
    assert found[a].seconds == 12.5 and found[a].work.group == "C9/resnet18" and found[a].work.eval_images == 7
    assert found[b].seconds == 0.25 and not found[b].work.training
    assert ("C9", "quick", {"eval_train": 7}, RESNET) in seen
    assert folder_records(tmp_path / "nothing", work_of) == {}


def test_a_cell_that_reuses_or_continues_a_stored_model_is_weighed_by_the_steps_it_trains(tmp_path):
    """The trained-model store: a cell's trained.json says how it got its model; reused, it trained no
    step (only its measurements are left of the prior), continued from a shorter stop, the rest."""
    train = {**RESNET, "max_steps": 120}
    full = cell_work("C9", {}, train, lambda t: 1e6)
    steps = training_steps(train)
    for how, trained in (("trained", steps), ("resumed", steps), ("continued from steps-000100", steps - 100),
                         ("reused", 0)):
        d = tmp_path / how.replace(" ", "_") / "runs" / "C9" / "cell-1"
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"experiment": "C9", "preset": "quick", "config": {}}))
        (d / "done.json").write_text(json.dumps({"metrics": {}, "elapsed_s": 1.0}))
        (d / "trained.json").write_text(json.dumps({"models": [{"config": train, "how": how}]}))
        (rec,) = folder_records(d.parents[2] / "runs", lambda e, r, t: cell_work(e, r["config"], t, lambda x: 1e6)).values()
        assert rec.work.samples == full.samples * trained // steps, how
    assert after_shared(full, train, 0) == full and after_shared(full, train, steps).samples == 0

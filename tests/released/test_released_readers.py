"""Every reader of headgeom.released on a synthetic copy of the authors' layout (always) and on the
real copy at $HEADGEOM_RELEASED (skipped with a message when it is unset)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from released_copy import write_copy
from headgeom.released import (DEPTHS, HESSIAN_RUNS, MANIFEST, PROBE_RUNS, check_copy, read_collapse, read_curvature,
                               read_depth, read_file, read_guillotine, read_hessian, read_log, read_orbits)
from headgeom.released.collapse import LR_LABELS

RELEASED = os.environ.get("HEADGEOM_RELEASED", "")
needs_copy = pytest.mark.skipif(
    not RELEASED, reason="HEADGEOM_RELEASED is unset: the readers are tested on the real released results only "
    "when it points at a copy (`headgeom released fetch DIR`); the synthetic-layout tests ran")


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return write_copy(tmp_path_factory.mktemp("released"))


# ------------------------------------------------------------------ synthetic layout
def test_collapse_grid_keeps_every_run_seed_and_epoch(copy):
    for d, b in PROBE_RUNS:
        grid = read_collapse(copy.root, d, b, copy.manifest)
        want = copy.expected[("collapse", d, b)]
        assert grid.keys == tuple(want) and grid.sha256 == copy.manifest.entry(f"results/{d}/{b}/collapse_results.npy").sha256
        for run in grid.runs:
            np.testing.assert_array_equal(run.spread, want[run.key]["raw"])
            np.testing.assert_array_equal(run.spread_mean, want[run.key]["mean"])
            assert run.seeds == 3 and run.epochs == want[run.key]["raw"].shape[1]
            assert sorted(run.series) == sorted(k[:-4] for k in want[run.key] if k.endswith("_raw") and k != "raw")
            for name, series in run.series.items():
                np.testing.assert_array_equal(series, want[run.key][f"{name}_raw"])
    grid = read_collapse(copy.root, "cifar10", "resnet18", copy.manifest)
    run = grid.run("relu", bn=True, lr="small")
    assert (run.key, run.lr_value) == ("relu_bn_True_lr_small", LR_LABELS["small"])
    assert grid.run("linear", False, "base").bn is False
    plain = read_collapse(copy.root, "cifar100", "resnet18", copy.manifest).run("relu")
    assert (plain.bn, plain.lr, plain.lr_value) == (None, None, None)
    with pytest.raises(KeyError, match="no run activation='gelu'"):
        grid.run("gelu", False, "base")


def test_hessian_tracks(copy):
    for run in HESSIAN_RUNS:
        t = read_hessian(copy.root, run, copy.manifest)
        want = copy.expected[("hessian", run)]
        np.testing.assert_array_equal(t.epochs, want["epochs"])
        np.testing.assert_array_equal(t.lambda_min, want["min_eigenvalues"])
        np.testing.assert_array_equal(t.variance, want["variances"])
        np.testing.assert_array_equal(t.condition, want["condition_numbers"])
        assert (t.init, t.activation) == tuple(run.split("_")) and "float32" in t.estimator


def test_orbits_come_back_as_images_by_angles_whatever_the_row_order(copy):
    for b in ("resnet18", "vit_tiny"):
        o = read_orbits(copy.root, b, copy.manifest)
        want = copy.expected[("orbits", b)]
        np.testing.assert_array_equal(o.grid.z, want["z"])
        np.testing.assert_array_equal(o.grid.h, want["h"])
        np.testing.assert_array_equal(o.grid.labels, want["labels"])
        np.testing.assert_array_equal(o.grid.angles, want["angles"])
        assert o.class_names == ("airplane", "bird", "truck") and o.class_ids == (0, 2, 9)


def test_depth_ablations(copy):
    for depth in DEPTHS:
        a = read_depth(copy.root, depth, copy.manifest)
        want = copy.expected[("depth", depth)]
        np.testing.assert_array_equal(a.grid.z, want["z"])
        np.testing.assert_array_equal(a.grid.h, want["h"])
        assert a.depth == depth and a.acc_backbone_linear == 0.5
        assert a.acc_head_linear == pytest.approx(0.5 - 0.05 * depth) and a.curvatures_z.shape == (9,)


def test_guillotine_curvature_and_log(copy):
    for d, b in PROBE_RUNS:
        g = read_guillotine(copy.root, d, b, copy.manifest)
        acc = copy.expected[("guillotine", d, b)]
        assert (g.backbone_linear, g.head_linear, g.backbone_mlp, g.head_mlp) == (
            acc["backbone_acc_linear"], acc["head_acc_linear"], acc["backbone_acc_mlp"], acc["head_acc_mlp"])
        c = read_curvature(copy.root, d, b, copy.manifest)
        cz, ch = copy.expected[("curvature", d, b)]
        np.testing.assert_allclose(c.curvature_z, cz)
        np.testing.assert_allclose(c.ratio, ch / cz, rtol=1e-6)
        log = read_log(copy.root, d, b, copy.manifest)
        (s,) = log.sessions
        assert (s.device, s.dataset, s.batch_size, s.seeds, s.collapse_epochs, s.guillotine_epochs) == (
            "cuda", d, 512, 3, 20, 50)
        assert (s.lr_collapse, s.lr_guillotine, s.runtime_minutes) == (0.05, 0.001, 291.66)
        assert s.collapse_runs == (("relu", 0), ("relu", 1))
        assert s.probe_accuracies == {"backbone_linear": g.backbone_linear, "backbone_mlp": g.backbone_mlp,
                                      "head_linear": g.head_linear, "head_mlp": g.head_mlp}


def test_check_copy_reads_every_pinned_path(copy):
    checks = check_copy(copy.root, copy.manifest)
    assert [c.path for c in checks] == list(MANIFEST.paths)
    assert all(c.status == "ok" for c in checks), [c for c in checks if c.status != "ok"]


# ------------------------------------------------------------------ the real copy
@pytest.fixture(scope="module")
def real() -> Path:
    return Path(RELEASED)


@needs_copy
def test_the_packaged_manifest_is_the_copys_manifest(real):
    upstream = json.loads((real / "MANIFEST.json").read_text())
    assert (MANIFEST.source, MANIFEST.commit) == (upstream["source"], upstream["commit"])
    assert [(e.path, e.bytes, e.sha256) for e in MANIFEST.files] == [
        (f["path"], f["bytes"], f["sha256"]) for f in upstream["files"]]


@needs_copy
def test_every_real_file_passes_its_check(real):
    bad = [c for c in check_copy(real) if c.status != "ok"]
    assert not bad, bad


@needs_copy
def test_real_collapse_grids(real):
    grid = read_collapse(real, "cifar10", "resnet18")
    assert len(grid.runs) == 14 and {r.activation for r in grid.runs} == {"linear", "relu", "gelu", "swish"}
    for run in grid.runs:
        assert (run.seeds, run.epochs) == (3, 50)
        # the file's own summaries are over the seed axis: the reader kept (seeds, epochs) the right way round
        np.testing.assert_allclose(run.spread_mean, run.spread.mean(axis=0), rtol=1e-12)
    assert {(r.seeds, r.epochs) for r in read_collapse(real, "cifar100", "resnet18").runs} == {(3, 20)}
    assert "grad_norms" in read_collapse(real, "cifar10", "vit_tiny").runs[0].series


@needs_copy
def test_real_orbits_and_depths_share_the_grid_of_the_log(real):
    for b in ("resnet18", "vit_tiny"):
        o = read_orbits(real, b)
        assert o.grid.z.shape[:2] == (15, 12) and o.grid.h.shape == (15, 12, 2048)
        np.testing.assert_array_equal(o.grid.angles, np.arange(12) * 30.0)
        assert o.class_names == ("airplane", "bird", "deer", "frog", "truck")
    for depth in DEPTHS:
        a = read_depth(real, depth)
        assert a.grid.z.shape == (15, 12, 512) and a.depth == depth and a.curvatures_z.shape == (100,)


@needs_copy
def test_real_logs_agree_with_the_probe_files(real):
    for d, b in PROBE_RUNS:
        log, g = read_log(real, d, b), read_guillotine(real, d, b)
        printed = [s.probe_accuracies for s in log.sessions if s.probe_accuracies]
        assert printed == [{"backbone_linear": g.backbone_linear, "backbone_mlp": g.backbone_mlp,
                            "head_linear": g.head_linear, "head_mlp": g.head_mlp}]
        assert log.values("device") == ("cuda",) and log.values("batch_size") == (512,)
        assert log.values("seeds") == (3,)


@needs_copy
def test_real_hessian_tracks(real):
    for run in HESSIAN_RUNS:
        t = read_hessian(real, run)
        np.testing.assert_array_equal(t.epochs, np.arange(100))
        assert np.isfinite(t.lambda_min).all()


@needs_copy
def test_read_file_dispatches_every_pinned_path(real):
    kinds = {type(read_file(real, p)).__name__ for p in MANIFEST.paths}
    assert kinds == {"CollapseGrid", "HessianTrack", "Orbits", "DepthAblation", "Guillotine", "Curvature",
                     "ExperimentLog"}

"""C9, C11 and C12 from the released records, against computations written separately here in
numpy float64 (not against typed numbers): the paper's spread and compression, the global spread and
selectivity, D_intra, D_inter and the class/orbit ratio."""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

from released_copy import write_copy
from headgeom.released import DEPTHS, ORBIT_BACKBONES, read_depth, read_guillotine, read_orbits
from headgeom.released.measures import depth_trend, guillotine_gaps, orbit_measures
from headgeom.released.orbits import OrbitGrid

RELEASED = os.environ.get("HEADGEOM_RELEASED", "")
needs_copy = pytest.mark.skipif(
    not RELEASED, reason="HEADGEOM_RELEASED is unset: C9/C11 on the real released orbits run only when it points "
    "at a copy (`headgeom released fetch DIR`); the synthetic tests ran")


def _unit(f):
    f = np.asarray(f, dtype=np.float64)
    return f / np.linalg.norm(f, axis=-1, keepdims=True)


def reference(z, h, labels) -> dict[str, float]:
    """The measures as docs/paper.md §3.6 and headgeom.orbits.compression define them, from scratch."""
    out = {}
    parts = {}
    for name, f in (("z", z), ("h", h)):
        u = _unit(f)
        n, k, _ = u.shape
        spread = np.mean([np.sum((u[i] - u[i].mean(0)) ** 2) / k for i in range(n)])
        points = u.reshape(n * k, -1)
        glob = np.mean(np.sum((points - points.mean(0)) ** 2, axis=1))
        d_intra = np.mean([np.mean([np.linalg.norm(u[i, a] - u[i, b]) for a, b in itertools.combinations(range(k), 2)])
                           for i in range(n)])
        classes = sorted(set(labels.tolist()))
        cent = {c: u[labels == c].reshape(-1, u.shape[-1]).mean(0) for c in classes}
        d_inter = np.mean([np.linalg.norm(cent[a] - cent[b]) for a, b in itertools.combinations(classes, 2)])
        parts[name] = (spread, glob, d_inter / d_intra)
    out["compression"] = parts["z"][0] / parts["h"][0]
    out["global_ratio"] = parts["z"][1] / parts["h"][1]
    out["selectivity"] = out["compression"] / out["global_ratio"]
    out["class_orbit_z"], out["class_orbit_h"] = parts["z"][2], parts["h"][2]
    out["class_orbit_change"] = parts["h"][2] / parts["z"][2]
    return out


def _check(measures, want, rtol=1e-9):
    for name, value in want.items():
        est = measures[name]
        assert est["value"] == pytest.approx(value, rel=rtol), name
        lo, hi = est["ci"]
        if est.get("ci_undefined"):  # a bias-dominated bootstrap: no interval could hold the estimate (BCa)
            assert np.isnan([lo, hi]).all() and "bias-dominated" in est["ci_undefined"], name
        else:
            assert np.isfinite([lo, hi]).all() and lo <= est["value"] <= hi, name


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return write_copy(tmp_path_factory.mktemp("released"))


def test_c9_orbit_measures_match_the_reference(copy):
    for b in ORBIT_BACKBONES:
        o = read_orbits(copy.root, b, copy.manifest)
        m = orbit_measures(o, n_boot=200, seed=3)
        _check(m, reference(o.grid.z, o.grid.h, o.grid.labels))
        assert m["selectivity"]["n_boot"] == 200


def test_selectivity_tells_orbit_shrinkage_from_global_shrinkage():
    """A head that shrinks orbits only is selective; one that shrinks the whole cloud alike is not."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(12, 1, 16))
    z = centres + 0.3 * rng.normal(size=(12, 6, 16))
    labels = np.repeat(np.arange(3), 4)
    orbit_only = centres + 0.1 * (z - centres)  # orbits 10x tighter around unchanged centres
    grid = OrbitGrid(z=z, h=orbit_only, labels=labels, angles=np.arange(6.0))
    sel = orbit_measures(grid, n_boot=200)["selectivity"]
    assert sel["ci"][0] > 1 and sel["value"] == pytest.approx(reference(z, orbit_only, labels)["selectivity"])
    every = orbit_measures(OrbitGrid(z=z, h=3.0 * z, labels=labels, angles=np.arange(6.0)), n_boot=50)
    assert every["selectivity"]["value"] == pytest.approx(1.0) and every["compression"]["value"] == pytest.approx(1.0)


def test_c11_depth_trend_and_c12_gaps(copy):
    rows = depth_trend([read_depth(copy.root, d, copy.manifest) for d in reversed(DEPTHS)], n_boot=100)
    assert [r.depth for r in rows] == list(DEPTHS)
    for r in rows:
        a = read_depth(copy.root, r.depth, copy.manifest)
        _check(r.measures, reference(a.grid.z, a.grid.h, a.grid.labels))
        assert r.compression is r.measures["compression"] and r.selectivity is r.measures["selectivity"]
        assert (r.acc_backbone_linear, r.acc_head_linear) == (a.acc_backbone_linear, a.acc_head_linear)
    g = read_guillotine(copy.root, "cifar10", "vit_tiny", copy.manifest)
    linear, mlp = guillotine_gaps(g)
    assert (linear.probe, linear.gap) == ("linear", pytest.approx(g.backbone_linear - g.head_linear))
    assert (mlp.probe, mlp.gap) == ("mlp", pytest.approx(g.backbone_mlp - g.head_mlp))


@needs_copy
def test_real_c9_and_c11_match_the_reference():
    for b in ORBIT_BACKBONES:
        o = read_orbits(RELEASED, b)
        _check(orbit_measures(o, n_boot=100), reference(o.grid.z, o.grid.h, o.grid.labels), rtol=1e-7)
    for r in depth_trend([read_depth(RELEASED, d) for d in DEPTHS], n_boot=100):
        a = read_depth(RELEASED, r.depth)
        _check(r.measures, reference(a.grid.z, a.grid.h, a.grid.labels), rtol=1e-7)

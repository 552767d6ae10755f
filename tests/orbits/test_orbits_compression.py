"""The orbit-compression measures (headgeom.orbits.compression) against a direct recomputation,
replicate by replicate, on synthetic orbits."""
import pytest
import torch

from bootstrap_reference import bca_by_hand
from headgeom.orbits import metrics as M
from headgeom.orbits.bootstrap import bootstrap_counts, bootstrap_indices
from headgeom.orbits.compression import compression_measures, interval_side

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny problems: thread hand-offs dominate

def _synthetic(n=8, k=5, d=6, dh=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    centres = torch.randn(2, d, generator=g, dtype=torch.float64) * 3
    z = centres[labels][:, None] + torch.randn(n, k, d, generator=g, dtype=torch.float64)
    w = torch.randn(d, dh, generator=g, dtype=torch.float64)
    h = torch.tanh(z @ w * 0.3)  # some nonlinear map, orbits and cloud shrink differently
    return {"z": z, "head.1": h}, labels


def _global_direct(f):
    u = M.l2_normalise(f).reshape(-1, f.shape[-1])
    return float((u - u.mean(dim=0)).pow(2).sum(dim=1).mean())


def _centred_direct(f):
    """The paper's spread after subtracting the mean of every orbit point."""
    return float(M.orbit_spread(f - f.reshape(-1, f.shape[-1]).mean(dim=0)).mean())


def _direct(feats, labels, p):
    z, h = feats["z"], feats[p]
    comp = float(M.orbit_spread(z).mean() / M.orbit_spread(h).mean())
    cor = [float(M.class_centroid_distance(f, labels) / M.d_intra(f).mean()) for f in (z, h)]
    return {"compression": comp, "class_orbit_change": cor[1] / cor[0],
            "d_inter_ratio": float(M.class_centroid_distance(z, labels) / M.class_centroid_distance(h, labels)),
            "selectivity": comp / (_global_direct(z) / _global_direct(h)),
            "compression_centred": _centred_direct(z) / _centred_direct(h)}


def test_compression_measures_values_replicates_and_intervals_match_direct_computation():
    feats, labels = _synthetic()
    ctrl_feats, _ = _synthetic(seed=1)
    idx = bootstrap_indices(8, 200, 0, strata=labels)
    out = compression_measures(feats, labels, bootstrap_counts(idx, 8), "head.1", {"fresh_head": ctrl_feats}, 0.9)
    ref = _direct(feats, labels, "head.1")
    for k, v in ref.items():
        assert out[k]["value"] == pytest.approx(v, rel=1e-10), k
    assert out["per_dim_ratio"]["value"] == pytest.approx(ref["compression"] * 10 / 6, rel=1e-12)
    ctrl = _direct(ctrl_feats, labels, "head.1")["compression"]
    assert out["fresh_head_compression"]["value"] == pytest.approx(ctrl, rel=1e-10)
    assert out["vs_fresh_head"]["value"] == pytest.approx(ref["compression"] / ctrl, rel=1e-10)
    ctrl_sel = _direct(ctrl_feats, labels, "head.1")["selectivity"]
    assert out["fresh_head_selectivity"]["value"] == pytest.approx(ctrl_sel, rel=1e-10)
    assert out["vs_fresh_head_selectivity"]["value"] == pytest.approx(ref["selectivity"] / ctrl_sel, rel=1e-10)
    # BCa intervals of replicates and leave-one-out values recomputed image set by image set
    # (numerator and denominator jointly), the acceleration's jackknife within each class
    keys = ("compression", "selectivity", "compression_centred", "class_orbit_change", "vs_fresh_head_selectivity")
    reps, jack = {k: [] for k in keys}, {k: [] for k in keys}
    sets = [(reps, idx[b]) for b in range(200)] + [(jack, torch.arange(8)[torch.arange(8) != j]) for j in range(8)]
    for into, rows in sets:
        r = _direct({p: f[rows] for p, f in feats.items()}, labels[rows], "head.1")
        r["vs_fresh_head_selectivity"] = r["selectivity"] / _direct(
            {p: f[rows] for p, f in ctrl_feats.items()}, labels[rows], "head.1")["selectivity"]
        for k in keys:
            into[k].append(r[k])
    for k in keys:
        want, z0, a = bca_by_hand(ref[k] if k in ref else out[k]["value"], reps[k], jack[k], labels.numpy(), 0.9)
        assert out[k]["ci"] == pytest.approx(want, rel=1e-9, nan_ok=True), k
        assert out[k]["z0"] == pytest.approx(z0, rel=1e-9) and out[k]["acceleration"] == pytest.approx(a, rel=1e-7), k
    with pytest.raises(KeyError, match="head.9"):
        compression_measures(feats, labels, bootstrap_counts(idx, 8), "head.9")


def test_interval_side():
    assert [interval_side({"ci": ci}) for ci in ([1.1, 2], [0.2, 0.9], [0.9, 1.2], [None, 2], ["inf", "inf"])] == [
        "above", "below", "straddles", "undefined", "above"]

"""C9's measures of orbit compression, every one a ratio with a joint bootstrap CI (docs/paper.md §3
"Orbits", Tables 1 and 5; §4 pitfalls 4-5).

Pure computation on stored orbit features (headgeom.orbits.extract): point name -> (N, K, D).
Every measure of one family is resampled with ONE (B, N) matrix of image multiplicities, so the
numerator and denominator of each ratio, and a trained head against its controls, move
together in every replicate, and the same holds for the leave-one-out samples that give the BCa
acceleration (BCa intervals, headgeom.orbits.bootstrap; NaN with the reason in ``ci_undefined``
when the bootstrap is bias-dominated).

For the head output h (raw z into the head, or the paper's z/‖z‖) against z, all on
L2-normalised features u = f/‖f‖ unless said otherwise:

- ``compression``: spread(z) / spread(h), the paper's ratio (spread = (1/K) Σ_k ‖u_k − ū‖²);
  it equals the trace ratio of the within-orbit covariances (dimension-fair, pitfall 4);
- ``per_dim_ratio``: compression · D_h / D_z, the per-dimension variance ratio of the paper's
  pretrained analysis (grows with D_h / D_z for the same geometry);
- ``trace_ratio_raw``: the same on unnormalised features (depends on the two spaces' scales);
- ``d_intra_ratio``: D_intra(z) / D_intra(h);
- ``class_orbit_z``, ``class_orbit_h``, ``class_orbit_change`` = class_orbit_h / class_orbit_z
  (class/orbit = D_inter / D_intra; the paper: 2.04 → 2.50 for ResNet-18);
- ``d_inter_ratio``: D_inter(z) / D_inter(h) (the paper: 56× for ViT-Tiny);
- ``global_ratio``: global spread(z) / global spread(h), global spread = the mean squared
  distance of every orbit point of every image to the mean of all of them: how much the head
  shrinks the whole cloud (near-global collapse shows as a large global ratio);
- ``selectivity``: compression / global_ratio = [spread/global](z) / [spread/global](h): how
  much more the head shrinks orbits than the cloud they live in (> 1: selective);
- ``compression_centred``: the compression of features centred on the mean of all orbit points
  before normalising; ``mean_pairwise_cosine_h``: mean cosine between orbit points at h.
  These three are measured by headgeom.orbits.selective (through
  headgeom.orbits.analyze.point_replicates), their one home;
- ``<control>_compression`` and ``vs_<control>`` = compression / control compression for the
  fresh head of the same architecture and for random-direction orbits of equal size
  (headgeom.orbits.controls);
- ``<control>_selectivity`` and ``vs_<control>_selectivity`` = selectivity / control
  selectivity: the same comparison with each side's global shrinkage divided out (a trained
  head fed z/‖z‖ shrinks the whole cloud, which ``vs_fresh_head`` would count as compression).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from torch import Tensor

from headgeom.orbits.analyze import point_replicates
from headgeom.orbits.bootstrap import Resamples
from headgeom.claims.orbit_verdicts import interval_side  # re-exported: C9's reading of an interval

__all__ = ["DEFINITIONS", "compression_measures", "interval_side"]

DEFINITIONS = {
    "compression": "spread(z) / spread(h) on L2-normalised features (the paper's ratio; equals "
                   "the trace ratio of the within-orbit covariances, dimension-fair)",
    "per_dim_ratio": "per-dimension within-orbit variance ratio = compression · D_h / D_z",
    "trace_ratio_raw": "within-orbit trace ratio on unnormalised features (scale-dependent)",
    "d_intra_ratio": "D_intra(z) / D_intra(h)",
    "class_orbit_z": "D_inter / D_intra at z",
    "class_orbit_h": "D_inter / D_intra at h",
    "class_orbit_change": "class_orbit_h / class_orbit_z",
    "d_inter_ratio": "D_inter(z) / D_inter(h)",
    "global_ratio": "global spread(z) / global spread(h); global spread = mean squared distance of "
                    "all orbit points of all images to their common mean (L2-normalised)",
    "selectivity": "compression / global_ratio (> 1: orbits shrink more than the whole cloud)",
    "compression_centred": "spread(z) / spread(h) of features centred on the mean of all orbit "
                           "points before normalising",
    "mean_pairwise_cosine_h": "mean cosine between distinct orbit points of all images at h",
    "fresh_head_compression": "compression of a freshly initialised head of the same architecture",
    "vs_fresh_head": "compression / fresh_head_compression",
    "random_directions_compression": "compression of z orbits replaced by isotropic random "
                                     "displacements of equal within-orbit size",
    "vs_random_directions": "compression / random_directions_compression",
    "fresh_head_selectivity": "selectivity of the freshly initialised head",
    "vs_fresh_head_selectivity": "selectivity / fresh_head_selectivity (> 1: training made the head more "
                                 "selective than its architecture alone)",
    "random_directions_selectivity": "selectivity of the head on the random-direction orbits",
    "vs_random_directions_selectivity": "selectivity / random_directions_selectivity (> 1: augmentation "
                                        "orbits shrink more, relative to the cloud, than random ones)",
}


class _Stats:
    """Values and replicates of every point metric (headgeom.orbits.analyze), per feature set."""

    def __init__(self, labels: Tensor, rs: Resamples) -> None:
        self.labels, self.rs = labels, rs
        self.vals: dict[tuple[str, str], dict[str, float]] = {}
        self.reps: dict[tuple[str, str], dict[str, Tensor]] = {}

    def add(self, key: tuple[str, str], f: Tensor) -> None:
        if key in self.vals:
            return
        vals, reps, _ = point_replicates(f, None, self.labels, self.rs.weights)
        self.vals[key], self.reps[key] = vals, reps

    def ratio(self, a: tuple[str, str], b: tuple[str, str], metric: str) -> tuple[float, Tensor]:
        return self.vals[a][metric] / self.vals[b][metric], self.reps[a][metric] / self.reps[b][metric]


def compression_measures(features: Mapping[str, Tensor], labels: Tensor, counts: Tensor, head_point: str,
                         controls: Mapping[str, Mapping[str, Tensor]] | None = None,
                         level: float = 0.95, levels: tuple[float, ...] = ()) -> dict[str, dict]:
    """Every C9 measure of the module docstring for the head output ``head_point`` against "z".

    features: point -> (N, K, D) orbits of the trained model; labels: (N,) class ids (>= 2
    classes); counts: (B, N) bootstrap multiplicities (drawn within ``labels``) shared by
    everything here, with the N leave-one-out samples (:class:`Resamples`); controls:
    name -> features of the control (its own "z" and ``head_point``), e.g. "fresh_head",
    "random_directions". Returns measure -> estimate {value, ci, level, n_boot, ...}, with the
    intervals also at ``levels`` (``ci_at``) when given.
    """
    for p in ("z", head_point):
        if p not in features:
            raise KeyError(f"feature point {p!r} missing; have {sorted(features)}")
    rs = Resamples(counts, labels)
    st = _Stats(labels, rs)
    z, h = ("model", "z"), ("model", head_point)
    st.add(z, features["z"])
    st.add(h, features[head_point])
    d_z, d_h = features["z"].shape[-1], features[head_point].shape[-1]
    out: dict[str, dict] = {}

    def put(name: str, pair: tuple[float, Tensor]) -> None:
        out[name] = rs.estimate(pair[0], pair[1], level, levels)

    comp = st.ratio(z, h, "spread")
    put("compression", comp)
    put("per_dim_ratio", (comp[0] * d_h / d_z, comp[1] * d_h / d_z))
    put("trace_ratio_raw", st.ratio(z, h, "trace_raw"))
    put("d_intra_ratio", st.ratio(z, h, "d_intra"))
    for key, p in ((z, "z"), (h, "h")):
        put(f"class_orbit_{p}", (st.vals[key]["class_orbit_ratio"], st.reps[key]["class_orbit_ratio"]))
    put("class_orbit_change", st.ratio(h, z, "class_orbit_ratio"))
    put("d_inter_ratio", st.ratio(z, h, "d_inter"))
    glob = st.ratio(z, h, "global_spread")
    put("global_ratio", glob)
    sel = (comp[0] / glob[0], comp[1] / glob[1])
    put("selectivity", sel)
    put("compression_centred", st.ratio(z, h, "spread_centred"))
    out["global_spread_z"] = {"value": st.vals[z]["global_spread"]}
    out["global_spread_h"] = {"value": st.vals[h]["global_spread"]}
    out["mean_pairwise_cosine_h"] = rs.estimate(st.vals[h]["mean_pairwise_cosine"],
                                             st.reps[h]["mean_pairwise_cosine"], level, levels)
    for name, feats in (controls or {}).items():
        cz, ch = (name, "z"), (name, head_point)
        st.add(cz, feats["z"])
        st.add(ch, feats[head_point])
        ctrl = st.ratio(cz, ch, "spread")
        put(f"{name}_compression", ctrl)
        put(f"vs_{name}", (comp[0] / ctrl[0], comp[1] / ctrl[1]))
        ctrl_glob = st.ratio(cz, ch, "global_spread")
        ctrl_sel = (ctrl[0] / ctrl_glob[0], ctrl[1] / ctrl_glob[1])
        put(f"{name}_selectivity", ctrl_sel)
        put(f"vs_{name}_selectivity", (sel[0] / ctrl_sel[0], sel[1] / ctrl_sel[1]))
    return out

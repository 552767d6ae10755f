"""Orbit analysis: every metric of headgeom.orbits.metrics with bootstrap CIs, per family and
per feature point, plus the two controls (docs/paper.md §3 "Orbits" and "Pretrained"; claims C9-C11).
Beside the paper's compression every point gets the selective metrics of
headgeom.orbits.selective: the global ratio, selectivity = compression / global ratio, and the
compression of centred features.

``analyze_orbits`` extracts (headgeom.orbits.extract) and then calls ``analyze_orbit_features``,
which is pure computation on stored features and returns a JSON-able dict. The PCA
panels are computed in headgeom.orbits.pca and drawn in headgeom.report.plots.orbits.

Layout of the result::

    {"protocol": {...how it was measured...}, "definitions": {metric: text},
     "families": {family: {"xi": [...], "units": ..., "anchor": ..., "dims": {point: D},
                           "points": {point: {metric: estimate}},
                           "ratios": {point: {ratio: estimate}},          # "z" over the point
                           "alignment_profile": {point: [mean cos per step]},
                           "out_of_distribution": {...},   # heads fed z/‖z‖, trained on raw z
                           "controls": {"fresh_head": {...}, "random_directions": {...}}}}}

An estimate is {"value", "ci": [lo, hi], "level", "n_boot", "n_boot_undefined", "method", "z0",
"acceleration"} (BCa, headgeom.orbits.bootstrap; "ci_undefined" says why when ci is NaN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from headgeom.augment.families import get_family
from headgeom.eval.features import Heads, as_head_chain
from headgeom.orbits import metrics as M
from headgeom.orbits import selective as S
from headgeom.orbits.bootstrap import METHOD, Resamples, bootstrap_counts, bootstrap_indices, replicate_means
from headgeom.orbits.controls import fresh_heads, head_points_on, random_direction_orbits
from headgeom.orbits.extract import OrbitFeatures, extract_orbits, torch_threads

__all__ = ["DEFINITIONS", "analyze_orbit_features", "analyze_orbits", "orbit_protocol",
           "out_of_distribution", "point_replicates"]

DEFINITIONS = {
    "spread": "the paper's spread: mean over images of (1/K) Σ_k ‖u_ik − ū_i‖², u = f/‖f‖",
    "trace_l2": "trace of the within-orbit covariance (unbiased, 1/(K−1)) of u = f/‖f‖, mean "
                "over images (= K/(K−1) · spread)",
    "per_dim_var_l2": "trace_l2 / D: mean per-dimension within-orbit variance of u",
    "trace_raw": "trace of the within-orbit covariance of the raw features f",
    "per_dim_var_raw": "trace_raw / D (the paper's pretrained per-dimension variance)",
    "d_intra": "mean pairwise distance ‖u_ik − u_il‖ within an orbit, mean over images",
    "d_inter": "mean distance between class centroids of u over class pairs (a distance between "
               "noisy centroids is biased upward, and more so in resamples with repeated images: "
               "with few images per class the bootstrap can be bias-dominated: its interval is then "
               "undefined, see headgeom.orbits.bootstrap)",
    "class_orbit_ratio": "d_inter / d_intra",
    "orbit_effective_rank": "exp(entropy of the normalised eigenvalues of each orbit's "
                            "covariance of u), mean over images (at most K − 1)",
    "curvature_raw": "the paper's mean_k ‖u_{k+1} − 2u_k + u_{k−1}‖",
    "curvature_arc": "mean_k ‖t_k − t_{k−1}‖ / mean adjacent chord (1/r on a circle of radius r)",
    "curvature_arc_scaled": "curvature_arc × the orbit's arc length (dimensionless)",
    "alignment": "mean_k cos(f_ik, f(x_i)) to the anchor at the family's identity value",
    "global_spread": "mean squared distance of every orbit point of every image to the mean of "
                     "all of them, u = f/‖f‖ (the spread of the whole cloud, normalised as spread)",
    "mean_pairwise_cosine": "mean cos(u_a, u_b) over pairs of distinct orbit points of all images "
                            "(near 1: every input maps near one direction)",
    "spread_centred": "the paper's spread of (f − μ)/‖f − μ‖, μ the mean of all orbit points of "
                      "the images (recomputed in every bootstrap resample)",
    "norm": "mean ‖f‖ over the orbit points (raw features; at z, the scale a head trained on raw "
            "z saw)",
    "compression": "spread(z) / spread(point): the paper's compression ratio",
    "global_ratio": "global_spread(z) / global_spread(point): how much the point shrinks the "
                    "whole cloud",
    "selectivity": "compression / global_ratio: > 1 when orbits shrink more than the whole cloud "
                   "(selective), about 1 when everything shrinks alike (global)",
    "compression_centred": "spread_centred(z) / spread_centred(point): compression once each "
                           "space is centred (a non-centred z cone against a centred head output "
                           "otherwise reads centring as expansion)",
    "trace_ratio": "trace_l2(z) / trace_l2(point): dimension-fair (equals compression)",
    "per_dim_ratio": "per_dim_var_l2(z) / per_dim_var_l2(point) = trace_ratio · D_point / D_z",
    "trace_ratio_raw": "trace_raw(z) / trace_raw(point)",
    "per_dim_ratio_raw": "per_dim_var_raw(z) / per_dim_var_raw(point) = trace_ratio_raw · D_point / D_z",
    "d_intra_ratio": "d_intra(z) / d_intra(point)",
    "class_orbit_change": "class_orbit_ratio(point) / class_orbit_ratio(z)",
}

_MEAN_METRICS = ("spread", "trace_l2", "per_dim_var_l2", "trace_raw", "per_dim_var_raw",
                 "d_intra", "orbit_effective_rank", "curvature_raw", "curvature_arc",
                 "curvature_arc_scaled", "alignment", "norm")
_RATIOS = {"compression": "spread", "global_ratio": "global_spread",
           "compression_centred": "spread_centred", "trace_ratio": "trace_l2",
           "per_dim_ratio": "per_dim_var_l2", "trace_ratio_raw": "trace_raw",
           "per_dim_ratio_raw": "per_dim_var_raw", "d_intra_ratio": "d_intra"}
_RATIO_ORDER = ("compression", "global_ratio", "selectivity", "compression_centred", "trace_ratio",
                "per_dim_ratio", "trace_ratio_raw", "per_dim_ratio_raw", "d_intra_ratio")


def _div(a: float, b: float) -> float:
    """a / b as IEEE floats (x/0 = ±inf, 0/0 = nan), like the replicates' tensor division."""
    return float(torch.tensor(a, dtype=torch.float64) / b)


def point_replicates(f: Tensor, anchor: Tensor | None, labels: Tensor | None,
                     counts: Tensor) -> tuple[dict[str, float], dict[str, Tensor], dict]:
    """(values, replicates (R,), per-image extras) of every metric at one point.

    Values are the statistics of all images (the means of per-image values, NaN images left
    out); replicates are the same statistics at each row of ``counts`` (R, N): bootstrap
    multiplicities, or :attr:`headgeom.orbits.bootstrap.Resamples.weights` (bootstrap and
    leave-one-out rows).
    """
    per = M.per_image_metrics(f, anchor)
    values, reps = {}, {}
    for name in _MEAN_METRICS:
        if name in per:
            values[name] = float(torch.nanmean(per[name]))
            reps[name] = replicate_means(per[name], counts)
    rows = torch.cat([torch.ones(1, counts.shape[1], dtype=torch.float64), counts.to(torch.float64)])
    glob = S.global_spread_from_parts(per["spread"], per["orbit_means"], rows)
    cos = S.mean_pairwise_cosine(glob, per["unit_fraction"], int(f.shape[1]), rows)
    centred, centred_reps = S.centred_spread(f, counts)
    for name, v, r in (("global_spread", glob[0], glob[1:]), ("mean_pairwise_cosine", cos[0], cos[1:]),
                       ("spread_centred", centred.mean(), centred_reps)):
        values[name], reps[name] = float(v), r
    if labels is not None:
        means = per["orbit_means"]
        # the estimate (unit weights) and the replicates in one call: one N×N Gram of the means
        ones = torch.ones(1, counts.shape[1], dtype=counts.dtype)
        both = M.centroid_distance_from_means(means, labels, torch.cat([ones, counts]))
        values["d_inter"], reps["d_inter"] = float(both[0]), both[1:]
        values["class_orbit_ratio"] = _div(values["d_inter"], values["d_intra"])
        reps["class_orbit_ratio"] = reps["d_inter"] / reps["d_intra"]
    return values, reps, per


def _analyze_points(features: dict[str, Tensor], anchors: dict[str, Tensor] | None,
                    labels: Tensor | None, rs: Resamples, level: float, ref: str = "z",
                    threads: int | None = 1) -> dict:
    with torch_threads(threads):
        return _analyze_points_now(features, anchors, labels, rs, level, ref)


def _analyze_points_now(features: dict[str, Tensor], anchors: dict[str, Tensor] | None,
                        labels: Tensor | None, rs: Resamples, level: float, ref: str) -> dict:
    vals, reps, profile = {}, {}, {}
    for p, f in features.items():
        vals[p], reps[p], per = point_replicates(f, None if anchors is None else anchors[p],
                                                 labels, rs.weights)
        if "alignment_steps" in per:
            profile[p] = per["alignment_steps"].mean(dim=0).tolist()
    res = {"dims": {p: int(f.shape[-1]) for p, f in features.items()},
           "points": {p: {m: rs.estimate(vals[p][m], reps[p][m], level) for m in vals[p]}
                      for p in features},
           "ratios": {}}
    for p in features:
        if p == ref:
            continue
        ratio = {name: (_div(vals[ref][m], vals[p][m]), reps[ref][m] / reps[p][m])
                 for name, m in _RATIOS.items()}
        (c, c_reps), (g, g_reps) = ratio["compression"], ratio["global_ratio"]
        ratio["selectivity"] = (_div(c, g), c_reps / g_reps)  # the same resamples: jointly
        r = {name: rs.estimate(*ratio[name], level) for name in _RATIO_ORDER}
        if labels is not None:
            m = "class_orbit_ratio"
            r["class_orbit_change"] = rs.estimate(_div(vals[p][m], vals[ref][m]),
                                               reps[p][m] / reps[ref][m], level)
        res["ratios"][p] = r
    if profile:
        res["alignment_profile"] = profile
    return res


def out_of_distribution(res: dict, points: Sequence[str]) -> dict | None:
    """The flag for ``points`` of heads fed z/‖z‖ although trained on raw z (docs/paper.md §4 pitfall 5).

    ``res`` is one family's analysis (its "points"); returns None when no point is flagged, else
    {"why", "z_norm", "points": {point: {"mean_pairwise_cosine", "raw_input_point",
    "raw_input_mean_pairwise_cosine"}}}, the raw-input entries for the same layer fed raw z
    (``l2z/head.3`` -> ``head.3``) when it was measured.
    """
    pts = res["points"]
    flagged = [p for p in points if p in pts]
    if not flagged:
        return None
    z_norm = pts["z"].get("norm")
    out = {"why": "these heads were trained on raw z but are fed z/‖z‖ here (the paper's protocol): "
                  "their first layer and BatchNorm running statistics see inputs at another scale "
                  f"(mean ‖z‖ {z_norm['value']:.4g} over these orbits), so they are out of "
                  "distribution; read mean_pairwise_cosine (near 1: every input maps near one "
                  "direction) and prefer the raw-input reading",
           "z_norm": z_norm, "points": {}}
    for p in flagged:
        raw = p.removeprefix("l2z/")
        out["points"][p] = {"mean_pairwise_cosine": pts[p]["mean_pairwise_cosine"],
                            "raw_input_point": raw if raw in pts and raw != p else None,
                            "raw_input_mean_pairwise_cosine":
                                pts[raw]["mean_pairwise_cosine"] if raw in pts and raw != p else None}
    return out


def analyze_orbit_features(of: OrbitFeatures, labels: Tensor | None = None, *,
                           heads: Heads | Callable | None = None, n_boot: int = 1000,
                           seed: int = 0, level: float = 0.95, controls: bool = True,
                           device: torch.device | str = "cpu", metric_threads: int | None = 1,
                           l2_fed_points: Sequence[str] | None = None) -> dict:
    """All metrics with CIs for one family's extracted orbit features (JSON-able dict).

    ``heads`` (the chain used for extraction) is needed only for the controls; labels (N,)
    enable D_inter and the class/orbit ratio and stratify the bootstrap by class.
    ``metric_threads``: intra-op threads for the metric computation (see :func:`torch_threads`;
    None keeps torch's setting); the control heads run with torch's setting.
    ``l2_fed_points``: points of heads fed z/‖z‖ although trained on raw z, flagged as out of
    distribution (:func:`out_of_distribution`); default every ``l2z/`` point, since every head
    headgeom trains or loads was trained on raw z.
    """
    n = next(iter(of.features.values())).shape[0]
    if labels is not None:
        labels = M._labels(labels, n)
    rs = Resamples(bootstrap_counts(bootstrap_indices(n, n_boot, seed, strata=labels), n), labels)
    anchor = ("orbit step %d" % of.anchor_step if of.anchor_step is not None
              else "clean image (identity not on the grid)" if of.anchors
              else "none given (alignment not computed)")
    res = {"xi": of.xi, "units": of.units, "identity_value": of.identity_value, "anchor": anchor}
    res.update(_analyze_points(of.features, of.anchors or None, labels, rs, level,
                               threads=metric_threads))
    if l2_fed_points is None:
        l2_fed_points = [p for p in of.features if p.startswith("l2z/")]
    ood = out_of_distribution(res, l2_fed_points)
    if ood is not None:
        res["out_of_distribution"] = ood
    chain = as_head_chain(heads)
    if controls and chain:
        variants = of.meta.get("head_input", ["raw"])
        z = of.features["z"]
        fresh = head_points_on(z, fresh_heads(chain, seed), variants, device=device)
        rnd_z = random_direction_orbits(z, seed)
        rnd = head_points_on(rnd_z, chain, variants, device=device)
        res["controls"] = {
            "fresh_head": {"what": f"freshly initialised heads of the same architecture (seed {seed})",
                           **_analyze_points(fresh, None, labels, rs, level,
                                             threads=metric_threads)},
            "random_directions": {"what": "z orbits replaced by isotropic random displacements with "
                                          "each orbit's mean and within-orbit sum of squares kept "
                                          f"(seed {seed}); ratios are z̃ over h(z̃)",
                                  **_analyze_points(rnd, None, labels, rs, level,
                                                    threads=metric_threads)},
        }
    return res


def orbit_protocol(n_images: int, steps: int, families: Sequence[str], head_input: str | Sequence[str],
                   n_boot: int, seed: int, level: float, *, stratified: bool,
                   mean: Sequence[float] | None, std: Sequence[float] | None) -> dict[str, Any]:
    """The protocol record of an orbit analysis (``analyze_orbits``, ``headgeom analyze``)."""
    return {"n_images": n_images, "steps": steps, "families": list(families),
            "head_input": [head_input] if isinstance(head_input, str) else list(head_input),
            "n_boot": n_boot, "seed": seed, "level": level,
            "bootstrap": f"{METHOD}, over images" + (", stratified by class" if stratified else ""),
            "normalisation": {"mean": None if mean is None else list(mean),
                              "std": None if std is None else list(std),
                              "order": "augment on [0, 1] pixels, then normalise"},
            "precision": "features float32, metrics float64"}


def analyze_orbits(backbone: Callable[[Tensor], Tensor], head: Heads | Callable | None,
                   images: Tensor, labels: Tensor | None, families: Sequence[str],
                   steps: int = 12, *, head_input: str | Sequence[str] = "raw",
                   value_ranges: dict[str, tuple[float, float]] | None = None,
                   n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                   controls: bool = True, batch_size: int = 256,
                   device: torch.device | str = "cpu", mean: Sequence[float] | None = None,
                   std: Sequence[float] | None = None, metric_threads: int | None = 1,
                   aux_threads: int | None = 1) -> dict:
    """Orbit analysis of ``images`` (uint8 or [0, 1] float, (N, 3, H, W)) for each family.

    Returns {"protocol", "definitions", "families": {name: analyze_orbit_features(...)}}.
    """
    if isinstance(families, str):
        families = [f.strip() for f in families.split(",") if f.strip()]
    if not families:
        raise ValueError("give at least one augmentation family, e.g. ['rotation', 'hue']")
    families = [get_family(f).name for f in families]  # unknown names fail before any forward pass
    value_ranges = dict(value_ranges or {})
    unknown = sorted(set(value_ranges) - set(families))
    if unknown:
        raise ValueError(f"value_ranges names families {unknown} that are not analysed ({families})")
    out = {"protocol": orbit_protocol(int(images.shape[0]), steps, families, head_input, n_boot, seed, level,
                                      stratified=labels is not None, mean=mean, std=std),
           "definitions": DEFINITIONS, "families": {}}
    for fam in families:
        of = extract_orbits(backbone, images, fam, steps, head, head_input=head_input,
                            value_range=value_ranges.get(fam), batch_size=batch_size,
                            device=device, mean=mean, std=std, aux_threads=aux_threads)
        out["families"][fam] = analyze_orbit_features(of, labels, heads=head, n_boot=n_boot,
                                                      seed=seed, level=level, controls=controls,
                                                      device=device, metric_threads=metric_threads)
    return out

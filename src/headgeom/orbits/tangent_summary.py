"""Summaries of Rayleigh quotients and Fisher ranks for the tangent-metric analysis (docs/paper.md §2
C6, C7). Pure functions of per-image tensors -> JSON-able dicts (floats, None for
undefined values, never NaN), and the layout of the whole result (:func:`assemble_result`).

Quotients arrive as q_tangent (N,) (one augmentation tangent per image) and q_random (N, m) (m
random directions per image); NaN marks an undefined quotient (a zero-norm tangent). Everything
is computed on |q| (the loss-curvature metric can be indefinite) and its log10; a zero quotient
(an exactly invariant direction) has log10 = -inf, so quantiles are order statistics
(``inverted_cdf``: the lower median, as torch.median), which stay defined with -inf values.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import Tensor

from headgeom.geometry.invariance.fisher import GaussianObservation, numerical_rank
from headgeom.geometry.invariance.tangents import quotient_contrast
from headgeom.orbits.bootstrap import METHOD, bootstrap_indices, estimate

__all__ = ["DEFINITIONS", "assemble_result", "json_float", "log10_abs", "quotient_summary", "rank_summary",
           "ratio_of_medians_ci"]

METRICS = ("head_G", "head_loss", "backbone", "end_to_end")
MOSTLY = 0.5  # a direction is "mostly" in a subspace when more than half its squared norm lies there

DEFINITIONS = {
    "head_G": "q = ‖J_h v‖²/‖v‖² at z = f(n(t_ξ0(x))), v in R^d: the tangent t vs random unit v",
    "head_loss": "q = (J_h v)ᵀ ∇²_u L (J_h v)/‖v‖², ∇²_u L the exact (ambient) Hessian of the per-sample "
                 "analysis loss at u = h(z) with a fixed target (see protocol.loss)",
    "backbone": "q = ‖J_b v‖²/‖v‖², b = f∘n on [0, 1] pixels at t_ξ0(x): the pixel tangent u "
                "(q = ‖t‖²/‖u‖²) vs random unit pixel directions",
    "end_to_end": "q = ‖J_h J_b v‖²/‖v‖² on the same pixel directions as backbone",
    "tangent": "distribution over images of log10|q| of the augmentation tangent (n_zero: q = 0 "
               "exactly, log10 = -inf; zero-norm tangents are undefined and left out)",
    "random": "distribution over images × n_random of log10|q| of random unit directions",
    "ratio_of_medians": "median|q_tangent| / median|q_random| (lower medians); < 1: the metric "
                        "suppresses the tangent",
    "ratio_ci": f"95% {METHOD} bootstrap over images (1000 replicates) of ratio_of_medians",
    "p_below": "P(|q_tangent| < |q_random|) over all pairs, ties ½ (0.5 like random, 1 suppressed)",
    "frac_tangent_below_random_median": "fraction of tangents with |q| below the random median",
    "fisher.head.rank": "numerical rank of I_h(z) = J_hᵀJ_h/σ² (d × d): eigenvalues above tol · λ_max",
    "fisher.head.null_space": "‖P_null v‖²/‖v‖² for P_null the eigenvectors of I_h(z) at or below "
                              "tol · λ_max; mostly_null: the fraction of directions with more than "
                              "half their squared norm there",
    "fisher.eigen_floor": "d · eps(dtype): the relative resolution of the eigenvalues of I_h(z) (eigh of the "
                          "formed matrix); ranks at tolerances near it are not meaningful",
    "fisher.chart": "ranks of I_z(θ) and I_h(θ) on the chart θ = (ξ, r_1..r_m) (module docstring); "
                    "bound_holds: fraction of images with rank I_h(θ) ≤ rank I_z(θ) − 1 (Thm 5.3)",
    "tangent_check": "‖t_jvp − t_fd‖/‖t_fd‖ per image, t_fd the central difference of f(n(t_ξ(x))) "
                     "with step fd_step = sqrt(eps(dtype)) × the family's range; n_undefined: images "
                     "whose difference is 0",
}


def json_float(x: float | Tensor | None) -> float | None:
    """A finite float, or None for NaN/±inf/None (JSON has no NaN)."""
    if x is None:
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def log10_abs(q: Tensor) -> Tensor:
    """log10 |q| in float64 (0 -> -inf, NaN stays NaN)."""
    return q.detach().double().abs().log10()


def _distribution(q: Tensor) -> dict:
    """Order-statistic quartiles and the mean of log10|q| over the defined values of q."""
    v = q.detach().double().flatten().cpu()
    v = v[~torch.isnan(v)]
    out = {"n": int(v.numel()), "n_zero": int((v == 0).sum()), "frac_negative": None,
           "median_log10": None, "q25_log10": None, "q75_log10": None, "mean_log10": None}
    if v.numel() == 0:
        return out
    lg = log10_abs(v).numpy()
    q25, q50, q75 = np.quantile(lg, [0.25, 0.5, 0.75], method="inverted_cdf")
    out.update(frac_negative=float((v < 0).double().mean()), median_log10=json_float(q50),
               q25_log10=json_float(q25), q75_log10=json_float(q75), mean_log10=json_float(lg.mean()))
    return out


def ratio_of_medians_ci(q_tangent: Tensor, q_random: Tensor, n_boot: int = 1000, seed: int = 0,
                        level: float = 0.95) -> dict:
    """median|q_t| / median|q_r| with a BCa bootstrap CI over images (N,), (N, m).

    Each replicate draws N images with replacement and takes both medians (lower medians,
    NaN left out) over the drawn images' tangents and all their random directions; the
    acceleration comes from the same ratio with each image left out (headgeom.orbits.bootstrap).
    """
    t = q_tangent.detach().double().abs().cpu()
    r = q_random.detach().double().abs().cpu()
    n = t.shape[0]
    idx = bootstrap_indices(n, n_boot, seed)
    mt = torch.nanmedian(t[idx], dim=1).values
    mr = torch.nanmedian(r[idx].flatten(1), dim=1).values
    value = float(torch.nanmedian(t) / torch.nanmedian(r))
    keep = ~torch.eye(n, dtype=torch.bool)
    jack = torch.stack([torch.nanmedian(t[keep[j]]) / torch.nanmedian(r[keep[j]]) for j in range(n)]) \
        if n > 1 else torch.full((n,), float("nan"), dtype=torch.float64)
    est = estimate(value, mt / mr, level, jackknife=jack)
    est["value"] = json_float(est["value"])
    est["ci"] = [json_float(c) for c in est["ci"]]
    return est


def quotient_summary(q_tangent: Tensor, q_random: Tensor, *, n_boot: int = 1000, seed: int = 0,
                     keep_values: bool = True) -> dict:
    """Tangent against random-direction quotients of one metric and family.

    Returns {"tangent": dist, "random": dist, "ratio_of_medians", "ratio_ci", "p_below",
    "frac_tangent_below_random_median", "log10_tangent", "log10_random"} where dist holds n,
    n_zero, frac_negative and median/q25/q75/mean of log10|q|; p_below is
    P(|q_t| < |q_r|) over all pairs (ties ½; 0.5 = like random, 1 = suppressed).
    """
    if q_tangent.ndim != 1 or q_random.ndim != 2 or q_random.shape[0] != q_tangent.shape[0]:
        raise ValueError(f"quotients must be (N,) tangents and (N, m) random directions; got "
                         f"{tuple(q_tangent.shape)} and {tuple(q_random.shape)}")
    t = q_tangent.detach().double().cpu()
    r = q_random.detach().double().cpu()
    out: dict = {"tangent": _distribution(t), "random": _distribution(r), "ratio_of_medians": None,
                 "ratio_ci": None, "p_below": None, "frac_tangent_below_random_median": None}
    tv, rv = t[~torch.isnan(t)], r.flatten()[~torch.isnan(r.flatten())]
    if tv.numel() and rv.numel():
        c = quotient_contrast(tv, rv)
        out["ratio_of_medians"] = json_float(c["ratio"])
        out["p_below"] = json_float(c["p_below"])
        out["frac_tangent_below_random_median"] = float((tv.abs() < c["median_control"]).double().mean())
        out["ratio_ci"] = ratio_of_medians_ci(t, r, n_boot=n_boot, seed=seed)
    if keep_values:
        out["log10_tangent"] = [json_float(v) for v in log10_abs(t).tolist()]
        out["log10_random"] = [json_float(v) for v in log10_abs(r).flatten().tolist()]
    return out


def rank_summary(ranks: Tensor) -> dict:
    """{median, min, max, mean} of per-image integer ranks (N,)."""
    r = ranks.detach().double().flatten().cpu()
    if r.numel() == 0:
        return {"median": None, "min": None, "max": None, "mean": None}
    return {"median": float(r.median()), "min": float(r.min()), "max": float(r.max()),
            "mean": float(r.mean())}


def _ranks(values: Tensor, tols: Sequence[float]) -> dict[str, Tensor]:
    return {f"{t:g}": numerical_rank(values, t) for t in tols}


def _cat(acc: dict, key: str) -> Tensor:
    return torch.cat(acc[key])


def assemble_result(acc: dict[str, dict[str, list[Tensor]]], settings: dict) -> dict:
    """The JSON-able result of tangent_metric_analysis from per-family lists of per-batch tensors
    (acc[family][key]) and the run's settings (see the caller)."""
    loss, tols = settings["loss"], settings["tols"]
    target = ("c = h(f(n(x))) of the un-augmented image, detached (at ξ0 = identity u = c, so the "
              "ambient −cos Hessian is the tangential projector (I − ûûᵀ)/‖u‖², PSD)")
    protocol = {
        "claims": ["C6", "C7"],
        "n_images": settings["n_images"], "image_shape": settings["image_shape"],
        "families": settings["families"],
        "xi0": settings["xi0"],
        "xi0_rule": "each family's tangent point: its identity value (blur: σ = 1, where the tangent is non-zero)",
        "n_random": settings["n_random"], "random_directions": "Gaussian, unit norm (quotients are scale-free); "
        "independent draws in z-space (head_G, head_loss) and pixel space (backbone, end_to_end), one set "
        "per image shared by all families; families whose t_ξ0 is the identity (within 64·eps) share "
        "the clean image as base point",
        "seed": settings["seed"], "dtype": str(settings["dtype"]).replace("torch.", ""),
        "batch_size": settings["batch_size"],
        "normalisation": None if settings["mean"] is None else {"mean": list(map(float, settings["mean"])),
                                                               "std": list(map(float, settings["std"]))},
        "normalisation_order": "augmentation on [0, 1] pixels, then (x − mean)/std (docs/paper.md §4 pitfall 6)",
        "d": settings["d"], "k": settings["k"], "head": settings["head"],
        "loss": {"name": loss, "reading": "ambient (exact Hessian in u)",
                 "reduction": "per sample (the batch mean's Hessian blocks times N)",
                 "target": target if loss == "negative_cosine" else target.split(" (")[0]},
        "fisher": {"observation_model": GaussianObservation(1.0).describe("g(theta)") +
                   " with g = h at theta = z (I_h(z)), and g = f∘x, h∘f∘x on the chart theta (I_z, I_h)",
                   "rel_tol": settings["rel_tol"], "tol_sweep": list(tols),
                   "rank_rule": "eigenvalues of I above tol · λ_max(I); I_h(z) by eigh of the formed "
                                "d × d matrix, the chart's I(θ) from singular values of J",
                   "eigen_floor": (settings["d"] or 0) * torch.finfo(settings["dtype"]).eps,
                   "mostly_null": f"‖P_null v‖²/‖v‖² > {MOSTLY}"},
        "bootstrap": {"n_boot": 1000, "level": 0.95, "unit": "image"},
    }
    out = {}
    for i, name in enumerate(settings["families"]):
        a = acc[name]
        fd = _cat(a, "fd_err")
        ok = fd[~fd.isnan()]
        entry: dict = {"xi0": settings["xi0"][name], "units": settings["units"][name],
                       "tangent_check": {"fd_step": settings["fd_step"][name],
                                         "rel_err_median": json_float(ok.median()) if ok.numel() else None,
                                         "rel_err_max": json_float(ok.max()) if ok.numel() else None,
                                         "n_undefined": int(fd.numel() - ok.numel())}}
        seed = settings["seed"] + i
        for metric in METRICS:
            if f"{metric}_t" in a:
                entry[metric] = quotient_summary(_cat(a, f"{metric}_t"), _cat(a, f"{metric}_r"), seed=seed)
            else:
                entry[metric] = None
        lam_z = _cat(a, "chart_lam_z")
        chart: dict = {"dim_theta": int(lam_z.shape[1]), "dim_v_aug": 1,
                       "rank_z": {t: rank_summary(r) for t, r in _ranks(lam_z, tols).items()},
                       "rank_h": None, "bound_holds": None}
        fisher: dict = {"chart": chart, "head": None}
        if settings["head"] is not None:
            lam_h = _cat(a, "chart_lam_h")
            rz, rh = _ranks(lam_z, tols), _ranks(lam_h, tols)
            chart["rank_h"] = {t: rank_summary(r) for t, r in rh.items()}
            chart["bound_holds"] = {t: float((rh[t] <= rz[t] - 1).double().mean()) for t in rz}
            lam = _cat(a, "head_lam")
            m = settings["n_random"]
            null = {}
            for t in tols:
                fr = _cat(a, f"null_{t:g}")
                null[f"{t:g}"] = {"tangent_mean": json_float(torch.nanmean(fr[:, 0])),
                                  "random_mean": json_float(torch.nanmean(fr[:, 1:1 + m])),
                                  "tangent_mostly_null": float((fr[:, 0] > MOSTLY).double().mean()),
                                  "random_mostly_null": float((fr[:, 1:1 + m] > MOSTLY).double().mean())}
            fisher["head"] = {"d": settings["d"], "k": settings["k"],
                              "rank": {t: rank_summary(r) for t, r in _ranks(lam, tols).items()},
                              "rank_at_rel_tol": rank_summary(numerical_rank(lam, settings["rel_tol"])),
                              "null_space": null}
        entry["fisher"] = fisher
        out[name] = entry
    return {"protocol": protocol, "definitions": dict(DEFINITIONS), "families": out}

"""Summaries of Rayleigh quotients and Fisher ranks for the tangent-metric analysis (PAPER.md §2
C6, C7; issue 5 §2-3). Pure functions of per-image tensors -> JSON-able dicts (floats, None for
undefined values, never NaN).

Quotients arrive as q_tangent (N,) (one augmentation tangent per image) and q_random (N, m) (m
random directions per image); NaN marks an undefined quotient (a zero-norm tangent). Everything
is computed on |q| (the loss-curvature metric can be indefinite) and its log10; a zero quotient
(an exactly invariant direction) has log10 = -inf, so quantiles are order statistics
(``inverted_cdf``: the lower median, as torch.median), which stay defined with -inf values.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from headgeom.geometry.tangents import quotient_contrast
from headgeom.orbits.bootstrap import bootstrap_indices, estimate

__all__ = ["json_float", "log10_abs", "quotient_summary", "rank_summary", "ratio_of_medians_ci"]


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
    """median|q_t| / median|q_r| with a percentile bootstrap CI over images (N,), (N, m).

    Each replicate draws N images with replacement and takes both medians (lower medians,
    NaN left out) over the drawn images' tangents and all their random directions.
    """
    t = q_tangent.detach().double().abs().cpu()
    r = q_random.detach().double().abs().cpu()
    n = t.shape[0]
    idx = bootstrap_indices(n, n_boot, seed)
    mt = torch.nanmedian(t[idx], dim=1).values
    mr = torch.nanmedian(r[idx].flatten(1), dim=1).values
    value = float(torch.nanmedian(t) / torch.nanmedian(r))
    est = estimate(value, mt / mr, level)
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

"""Selective orbit metrics: does a head shrink augmentation orbits more than the whole cloud
they live in, and how do spreads read once features are centred (docs/paper.md §2 C9-C11,
§4 pitfalls 4-5)?

Every function here is a statistic of *weighted images*: it takes image weights ``w`` of shape
(B, N) (bootstrap multiplicities from :func:`headgeom.orbits.bootstrap.bootstrap_counts`; a
row of ones gives the estimate) and returns (B,) float64, the statistic of the multiset of
images each row describes, exactly as if the repeated images had been stacked and the
statistic recomputed. So a ratio of two of them, taken row by row, resamples its numerator and
denominator jointly.

Definitions (u = f / ‖f‖ row-wise, a zero row stays zero, as in headgeom.orbits.metrics;
m_i = (1/K) Σ_k u_ik; W = Σ_i w_i):

- global spread: the mean squared distance of every orbit point of every image to the mean of
  all of them, (1/(WK)) Σ_i w_i Σ_k ‖u_ik − ū‖², ū = Σ_i w_i m_i / W. It is computed as the
  mean within-orbit spread plus the weighted variance of the orbit means (a shift-free
  decomposition, so a collapsed cloud keeps its relative precision). global ratio =
  global(z) / global(point); selectivity = compression / global ratio: > 1 when the point
  shrinks orbits more than the whole cloud, 1 when it only shrinks (or grows) everything alike.
- mean pairwise cosine: the mean of cos(u_a, u_b) over pairs a ≠ b of all W·K orbit points,
  = S − global · M / (M − 1) with M = W·K and S the mean ‖u_ik‖² (1 without zero rows). Near 1:
  every input maps near one direction (e.g. a BatchNorm head fed inputs at another scale).
- centred spread: the paper's spread of ũ = (f − μ) / ‖f − μ‖ with μ the mean of all raw orbit
  points of the (weighted) images, recomputed for every row of ``w``. A non-centred feature
  cloud (post-ReLU z, a cone) has small angular spreads that centring removes; comparing spreads
  of a centred and a non-centred space (BN-centred head output against raw z) otherwise reads
  centring as expansion. compression (centred) = centred spread(z) / centred spread(point).

The centred spread of orbit i under a row α = w / W is evaluated without forming ũ: with
x_k = f_ik − μ, n_k = ‖x_k‖, ‖ũ_k − ũ_l‖² = (‖f_ik − f_il‖² − (n_k − n_l)²) / (n_k n_l), where
n_k − n_l = (t_k − t_l) / (n_k + n_l), t_k = n_k² − ‖m_i − μ‖² = ‖e_k‖² + 2 e_k·(m_i − μ) and
e_k = f_ik − m_i (m_i here the raw orbit mean). Every term is a difference of orbit-sized
quantities, and μ enters only through m_j·e_ik, one (N, K, N) array per point: O(N²KD) once,
then O(BNK²).
"""

from __future__ import annotations

import torch
from torch import Tensor

from headgeom.orbits.metrics import _orbits

__all__ = ["centred_spread", "global_spread", "global_spread_from_parts", "mean_pairwise_cosine"]

_CHUNK = 1 << 19  # elements of one (rows, N, K, K) block of the centred spread


def _weights(weights: Tensor | None, n: int) -> Tensor:
    """(B, n) float64 non-negative weights with a positive sum per row (ones when None)."""
    w = torch.ones(1, n, dtype=torch.float64) if weights is None else \
        torch.as_tensor(weights, dtype=torch.float64)
    w = w.reshape(-1, n) if w.ndim == 1 else w
    if w.ndim != 2 or w.shape[1] != n:
        raise ValueError(f"image weights must have shape (B, {n}) (one column per image), got "
                         f"{tuple(w.shape)}")
    if bool((w < 0).any()) or bool((w.sum(dim=1) <= 0).any()):
        raise ValueError("image weights must be non-negative multiplicities with a positive sum "
                         "per row")
    return w


def _weighted_variance(x: Tensor, w: Tensor) -> Tensor:
    """Σ_i w_i ‖x_i − x̄_w‖² / W per row of w (B, N), x (N, D), from the N×N Gram of x centred
    at its unweighted mean (the shift keeps the Gram's entries at the cloud's own size)."""
    xc = x - x.mean(dim=0)
    gram = xc @ xc.T
    tot = w.sum(dim=1)
    return ((w @ gram.diagonal()) / tot - ((w @ gram) * w).sum(dim=1) / tot.pow(2)).clamp_min(0.0)


def global_spread_from_parts(spread: Tensor, means: Tensor, weights: Tensor | None = None) -> Tensor:
    """Global spread (B,) from per-image orbit spreads (N,) and orbit means (N, D) of u.

    ``spread`` and ``means`` are :func:`headgeom.orbits.metrics.per_image_metrics`' "spread" and
    "orbit_means"; weights (B, N) as in the module docstring (None: one row of ones).
    """
    spread = torch.as_tensor(spread, dtype=torch.float64).reshape(-1)
    means = torch.as_tensor(means, dtype=torch.float64)
    n = spread.shape[0]
    if means.ndim != 2 or means.shape[0] != n:
        raise ValueError(f"orbit means must have shape ({n}, D) to match the {n} spreads, got "
                         f"{tuple(means.shape)}")
    w = _weights(weights, n)
    return (w @ spread) / w.sum(dim=1) + _weighted_variance(means, w)


def global_spread(f: Tensor, weights: Tensor | None = None) -> Tensor:
    """Global spread (B,) of L2-normalised orbit features f (N, K, D) under image weights."""
    u = _unit(_orbits(f))
    m = u.mean(dim=1)
    spread = (u - m[:, None]).pow(2).sum(dim=(1, 2)) / u.shape[1]
    return global_spread_from_parts(spread, m, weights)


def _unit(f: Tensor) -> Tensor:
    norm = f.norm(dim=-1, keepdim=True)
    return torch.where(norm > 0, f / norm.clamp_min(torch.finfo(f.dtype).tiny), torch.zeros_like(f))


def mean_pairwise_cosine(global_: Tensor, unit_fraction: Tensor, steps: int,
                         weights: Tensor | None = None) -> Tensor:
    """Mean cos(u_a, u_b) over pairs a ≠ b of all orbit points (B,), from the global spread (B,).

    unit_fraction (N,): per image, the fraction of its K points with a nonzero feature vector
    (1 unless a layer outputs exact zeros); steps: K.
    """
    frac = torch.as_tensor(unit_fraction, dtype=torch.float64).reshape(-1)
    w = _weights(weights, frac.shape[0])
    tot = w.sum(dim=1)
    s = (w @ frac) / tot  # mean ‖u‖² over all points
    m = tot * steps
    return s - torch.as_tensor(global_, dtype=torch.float64) * m / (m - 1)


def _pairwise(dist: Tensor, t: Tensor, norm: Tensor) -> Tensor:
    """Σ_{k<l} ‖ũ_k − ũ_l‖² per (row, image) pair by pair; a zero vector ũ at a point exactly at μ
    (‖0 − ũ‖² = 1, ‖0 − 0‖² = 0). dist (N, K, K), t and norm (b, N, K) -> (b, N)."""
    k = t.shape[-1]
    iu = torch.triu_indices(k, k, offset=1)
    nk, nl = norm[..., iu[0]], norm[..., iu[1]]
    tiny = torch.finfo(torch.float64).tiny
    delta = (t[..., iu[0]] - t[..., iu[1]]) / (nk + nl).clamp_min(tiny)
    pair = (dist[:, iu[0], iu[1]][None] - delta.pow(2)).clamp_min(0.0) / (nk * nl).clamp_min(tiny)
    zk, zl = nk == 0, nl == 0
    return torch.where(zk | zl, (zk ^ zl).to(torch.float64), pair.clamp(max=4.0)).sum(dim=-1)


def _separable(dist: Tensor, t: Tensor, norm: Tensor) -> Tensor:
    """The same sum for nonzero norms without pairs: with v = 1/n and d_k = n_k − n_0 (from t,
    without cancellation), Σ_{k<l} D_kl v_k v_l − Σ_{k<l} (d_k − d_l)² v_k v_l
    = ½ vᵀDv − [(Σv)(Σ v d²) − (Σ v d)²]: one batched matmul, the rest O(K)."""
    v = norm.reciprocal()
    quad = 0.5 * (torch.bmm(v.transpose(0, 1), dist) * v.transpose(0, 1)).sum(dim=-1).T  # (b, N)
    d = (t - t[..., :1]) / (norm + norm[..., :1])
    sv, svd, svd2 = v.sum(dim=-1), (v * d).sum(dim=-1), (v * d * d).sum(dim=-1)
    return (quad - (sv * svd2 - svd.pow(2))).clamp_min(0.0)


def centred_spread(f: Tensor, weights: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Centred spread: (per-image spreads at unit weights (N,), weighted means (B,)).

    f: raw orbit features (N, K, D); weights (B, N) as in the module docstring. The centre μ of
    each row is the mean of all orbit points of that row's images (Σ_i w_i m_i / W). A point at
    exactly μ has no direction: it counts as a zero vector (as headgeom.orbits.metrics does).
    Cost: one (N, K, N) product O(N²KD), then O(N K²) per row as batched matmuls.
    """
    f = _orbits(f)
    n, k, _ = f.shape
    w = _weights(weights, n)
    m = f.mean(dim=1)  # raw orbit means (N, D)
    e = f - m[:, None]  # (N, K, D): deviations from the own orbit mean
    mt = m - m.mean(dim=0)  # means about their unweighted centre: small numbers for a tight cloud
    h = mt @ mt.T  # (N, N)
    g = e @ e.transpose(1, 2)  # (N, K, K) orbit Grams of the deviations
    ee = g.diagonal(dim1=1, dim2=2)  # ‖e_ik‖²
    dist = (ee[:, :, None] + ee[:, None, :] - 2 * g).clamp_min(0.0)  # ‖f_ik − f_il‖²
    q = (e.reshape(n * k, -1) @ mt.T).reshape(n, k, n)  # e_ik · m̃_j
    q_self = q.diagonal(dim1=0, dim2=2).T  # (N, K): e_ik · m̃_i
    rows = torch.cat([torch.full((1, n), 1.0 / n, dtype=torch.float64), w / w.sum(dim=1, keepdim=True)])
    per = torch.empty(rows.shape[0], n, dtype=torch.float64)
    step = max(1, _CHUNK // max(1, n * k * k))
    for s in range(0, rows.shape[0], step):
        a = rows[s:s + step]  # (b, N): μ̃ = Σ_j a_j m̃_j
        ha = a @ h
        r = (h.diagonal()[None] - 2 * ha + (ha * a).sum(dim=1, keepdim=True)).clamp_min(0.0)
        qa = (q.reshape(n * k, n) @ a.T).T.reshape(-1, n, k)  # e_ik · μ̃
        t = ee[None] + 2 * (q_self[None] - qa)  # n_k² − ‖m̃_i − μ̃‖²
        norm = (r[:, :, None] + t).clamp_min(0.0).sqrt()  # (b, N, K)
        pairs = _separable(dist, t, norm) if bool((norm > 0).all()) else _pairwise(dist, t, norm)
        per[s:s + step] = pairs / (k * k)
    return per[0], (per[1:] * w).sum(dim=1) / w.sum(dim=1)

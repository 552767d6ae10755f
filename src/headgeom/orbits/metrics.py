"""Orbit metrics: pure functions on orbit features f of shape (N images, K steps, D) (docs/paper.md §3).

An orbit is the curve k -> f(t_{ξ_k}(x_i)) over K parameter steps ξ_k of one augmentation
family. Every per-image metric returns a (N,) tensor whose mean over images is the reported
number, so the bootstrap (:mod:`headgeom.orbits.bootstrap`) resamples images and every ratio
resamples numerator and denominator jointly. Everything is computed in float64.

Definitions (u = f / ‖f‖ row-wise where ``normalise=True``; m_i = (1/K) Σ_k f_ik):

- spread (the paper's, on L2-normalised features): (1/K) Σ_k ‖u_ik − ū_i‖²; compression ratio
  = spread_z / spread_h.
- within-orbit trace: tr C_i with C_i = (1/(K−1)) Σ_k (f_ik − m_i)(f_ik − m_i)ᵀ, the orbit's
  unbiased covariance; its mean over images is the trace of the pooled within-orbit covariance.
  On normalised features it equals K/(K−1) · spread, so its ratio equals the compression ratio.
  The trace ratio tr_z / tr_h is dimension-fair (docs/paper.md §4 pitfall 4).
- per-dimension variance (the paper's pretrained analysis): tr C_i / D. Its backbone/head ratio is
  the trace ratio times D_h / D_z exactly.
- D_intra: mean over pairs k < l of ‖u_ik − u_il‖; D_inter: mean over class pairs of the distance
  between class centroids (the mean of all orbit points of a class); class/orbit = D_inter/D_intra.
- effective rank (Roy & Vetterli 2007) of a covariance with eigenvalues λ ≥ 0:
  exp(−Σ p_j log p_j), p = λ / Σλ; 0 for a zero covariance. ``orbit_effective_rank`` takes it of
  each orbit's covariance C_i (≤ K − 1): how many directions one orbit spans.
- curvature: the paper's raw second difference mean_k ‖f_{k+1} − 2 f_k + f_{k−1}‖ (scales with
  the orbit's size); the arc-length curvature mean_k ‖t_k − t_{k−1}‖ / ((ℓ_k + ℓ_{k−1}) / 2) with
  chords ℓ_k = ‖f_{k+1} − f_k‖ and unit tangents t_k (exactly 1/r on a circle of radius r at any
  step, so normalised by step); and that times the orbit's arc length L = Σ ℓ_k (normalised by
  arc length: dimensionless, unchanged when the orbit is scaled). Orbits with a zero chord have
  no tangent there and give NaN.
- alignment: cos(f_ik, a_i) to the orbit's anchor a_i = f(x_i) at the family's identity (ξ = 0
  for rotation and hue).

:func:`per_image_metrics` (what the analysis uses) takes the per-orbit quantities from K×K
Grams of vectors formed in feature space (the centred orbit, the chords), so a squared distance
g_kk + g_ll − 2 g_kl is resolved to about 1e-16 of the orbit's (or the chords') squared size in
float64 however small the orbit. The single-metric functions compute spread, trace and the raw
curvature directly and serve as its cross-check. Features read in float32 carry ~1e-7 relative
noise, which sets the floor of every spread and makes the curvature of an orbit that barely
moves (chords near that floor) meaningless.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["anchor_alignment", "centroid_distance_from_means", "class_centroid_distance",
           "curvature_arc", "curvature_arc_scaled", "curvature_raw", "d_intra", "effective_rank",
           "effective_rank_from_eigenvalues", "l2_normalise", "orbit_effective_rank", "orbit_gram",
           "orbit_spread", "per_dim_variance", "per_image_metrics", "within_orbit_trace"]

_TINY = torch.finfo(torch.float64).tiny


def _orbits(f: Tensor, min_steps: int = 2, name: str = "orbit features") -> Tensor:
    """Validated float64 copy of orbit features (N, K, D)."""
    if not isinstance(f, Tensor) or f.ndim != 3:
        shape = tuple(f.shape) if isinstance(f, Tensor) else type(f).__name__
        raise ValueError(f"{name} must be a tensor of shape (N images, K steps, D), got {shape}")
    n, k, d = f.shape
    if n < 1 or d < 1:
        raise ValueError(f"{name} need N >= 1 images and D >= 1 dims, got shape {tuple(f.shape)}")
    if k < min_steps:
        raise ValueError(f"{name} need at least {min_steps} steps per orbit for this metric, got "
                         f"K = {k}; extract with more steps")
    f = f.detach().to(torch.float64)
    if not bool(torch.isfinite(f).all()):
        raise ValueError(f"{name} contain NaN/inf; the model produced non-finite outputs")
    return f


def l2_normalise(f: Tensor) -> Tensor:
    """f / ‖f‖ along the last dim (float64; a zero row stays zero)."""
    f = f.detach().to(torch.float64)
    return f / f.norm(dim=-1, keepdim=True).clamp_min(_TINY)


def _prep(f: Tensor, normalise: bool, min_steps: int = 2) -> Tensor:
    f = _orbits(f, min_steps)
    return l2_normalise(f) if normalise else f


# ---- kernels on the centred Gram G_i = A_i A_iᵀ (K×K), A_i = U_i − ū_i: one matmul per orbit,
# then every per-orbit metric is a function of K×K numbers (distances do not depend on centring).

def _centred_gram(u: Tensor) -> Tensor:
    a = u - u.mean(dim=1, keepdim=True)
    return a @ a.transpose(1, 2)


def _sum_sq(g: Tensor) -> Tensor:
    return g.diagonal(dim1=1, dim2=2).sum(dim=1)  # Σ_k ‖u_k − ū‖²


def _sq_dist(g: Tensor) -> Tensor:
    diag = g.diagonal(dim1=1, dim2=2)
    return (diag[:, :, None] + diag[:, None, :] - 2 * g).clamp_min(0.0)


def _d_intra_g(g: Tensor) -> Tensor:
    k = g.shape[1]
    iu = torch.triu_indices(k, k, offset=1)
    return _sq_dist(g)[:, iu[0], iu[1]].sqrt().mean(dim=1)


def _curvatures_s(s: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(raw second difference, arc-length curvature, × arc length) per orbit from the chord
    Gram S_kl = <s_k, s_l> of the first differences s_k = f_{k+1} − f_k, (N, K−1, K−1)."""
    ell = s.diagonal(dim1=1, dim2=2).clamp_min(0.0).sqrt()  # (N, K-1) chord lengths
    off = s.diagonal(offset=-1, dim1=1, dim2=2)  # <s_k, s_{k-1}>
    sq = s.diagonal(dim1=1, dim2=2)
    raw = (sq[:, 1:] + sq[:, :-1] - 2 * off).clamp_min(0.0).sqrt().mean(dim=1)  # ‖s_k − s_{k−1}‖
    cos = off / (ell[:, 1:] * ell[:, :-1])  # NaN at a zero chord
    turn = (2.0 - 2.0 * cos.clamp(-1.0, 1.0)).sqrt()  # ‖t_k − t_{k−1}‖
    arc = (turn / (0.5 * (ell[:, 1:] + ell[:, :-1]))).mean(dim=1)
    return raw, arc, arc * ell.sum(dim=1)


def _chord_gram(u: Tensor) -> Tensor:
    d = u[:, 1:] - u[:, :-1]  # differences in feature space: no cancellation for small orbits
    return d @ d.transpose(1, 2)


def _erank_g(g: Tensor) -> Tensor:
    return effective_rank_from_eigenvalues(torch.linalg.eigvalsh(g / (g.shape[1] - 1)))


# ---- public per-image metrics: (N, K, D) -> (N,)

def orbit_gram(f: Tensor, normalise: bool = True) -> Tensor:
    """Centred Gram of each orbit, G_i = (U_i − ū_i)(U_i − ū_i)ᵀ. (N, K, D) -> (N, K, K)."""
    return _centred_gram(_prep(f, normalise))


def orbit_spread(f: Tensor, normalise: bool = True) -> Tensor:
    """The paper's spread per orbit: (1/K) Σ_k ‖u_ik − ū_i‖². (N, K, D) -> (N,)."""
    u = _prep(f, normalise)
    return (u - u.mean(dim=1, keepdim=True)).pow(2).sum(dim=(1, 2)) / u.shape[1]


def within_orbit_trace(f: Tensor, normalise: bool = True) -> Tensor:
    """Trace of each orbit's unbiased covariance, (1/(K−1)) Σ_k ‖f_ik − m_i‖². (N, K, D) -> (N,)."""
    u = _prep(f, normalise)
    return (u - u.mean(dim=1, keepdim=True)).pow(2).sum(dim=(1, 2)) / (u.shape[1] - 1)


def per_dim_variance(f: Tensor, normalise: bool = True) -> Tensor:
    """Mean per-dimension within-orbit variance, tr C_i / D (the paper's pretrained metric)."""
    return within_orbit_trace(f, normalise) / f.shape[-1]


def d_intra(f: Tensor, normalise: bool = True) -> Tensor:
    """Mean pairwise distance within each orbit, over the K(K−1)/2 pairs k < l. -> (N,)."""
    return _d_intra_g(orbit_gram(f, normalise))


def orbit_effective_rank(f: Tensor, normalise: bool = True) -> Tensor:
    """Effective rank of each orbit's covariance C_i (from its K×K Gram). (N, K, D) -> (N,)."""
    return _erank_g(orbit_gram(f, normalise))


def curvature_raw(f: Tensor, normalise: bool = True) -> Tensor:
    """The paper's curvature: mean_k ‖f_{k+1} − 2 f_k + f_{k−1}‖ over interior steps. -> (N,)."""
    u = _prep(f, normalise, min_steps=3)
    return (u[:, 2:] - 2 * u[:, 1:-1] + u[:, :-2]).norm(dim=-1).mean(dim=1)


def curvature_arc(f: Tensor, normalise: bool = True) -> Tensor:
    """Arc-length curvature mean_k ‖t_k − t_{k−1}‖ / ((ℓ_k + ℓ_{k−1}) / 2). -> (N,); 1/r on a circle."""
    return _curvatures_s(_chord_gram(_prep(f, normalise, min_steps=3)))[1]


def curvature_arc_scaled(f: Tensor, normalise: bool = True) -> Tensor:
    """:func:`curvature_arc` times the orbit's arc length Σ_k ℓ_k: dimensionless. -> (N,)."""
    return _curvatures_s(_chord_gram(_prep(f, normalise, min_steps=3)))[2]


def anchor_alignment(f: Tensor, anchor: Tensor) -> Tensor:
    """cos(f_ik, a_i) of each orbit point to its anchor a_i. f (N, K, D), anchor (N, D) -> (N, K)."""
    return _alignment(_orbits(f, min_steps=1), anchor)


def _alignment(f: Tensor, anchor: Tensor) -> Tensor:
    if not isinstance(anchor, Tensor) or tuple(anchor.shape) != (f.shape[0], f.shape[2]):
        shape = tuple(anchor.shape) if isinstance(anchor, Tensor) else type(anchor).__name__
        raise ValueError(f"anchor must have shape (N, D) = {(f.shape[0], f.shape[2])} to match "
                         f"the orbits, got {shape}")
    a = l2_normalise(anchor.to(f.device))
    return torch.einsum("nkd,nd->nk", l2_normalise(f), a)


def _centre_gram(g: Tensor) -> Tensor:
    """H G H with H = I − 11ᵀ/K: the Gram of the centred orbit from the uncentred one."""
    return (g - g.mean(dim=1, keepdim=True) - g.mean(dim=2, keepdim=True)
            + g.mean(dim=(1, 2), keepdim=True))


def per_image_metrics(f: Tensor, anchor: Tensor | None = None) -> dict[str, Tensor]:
    """Every per-image metric of orbits f (N, K, D), from a few K×K Grams per orbit.

    Returns name -> (N,) float64: spread, trace_l2, per_dim_var_l2, trace_raw, per_dim_var_raw,
    d_intra, orbit_effective_rank, (K ≥ 3) curvature_raw, curvature_arc, curvature_arc_scaled,
    (with an anchor) alignment, norm (the mean ‖f_ik‖ of the raw features), plus
    alignment_steps (N, K), orbit_means (N, D) of u and unit_fraction (N,), the fraction of each
    orbit's points with a nonzero feature vector.
    Grams: raw G = f fᵀ (norms, and the raw trace as a sum of squares), the centred Gram of
    u (centred in feature space, so small orbits keep their relative precision), and the chord
    Gram of u's first differences (curvatures). About nine passes over (N, K, D) in all.
    """
    if not isinstance(f, Tensor) or f.ndim != 3 or f.shape[1] < 2 or 0 in f.shape:
        _orbits(f)  # raises the shape error
    f = f.detach().to(torch.float64)
    n, k, d = f.shape
    g = f @ f.transpose(1, 2)
    sq = g.diagonal(dim1=1, dim2=2)  # ‖f_ik‖²: NaN/inf anywhere in f shows here
    if not bool(torch.isfinite(sq).all()):
        raise ValueError("orbit features contain NaN/inf; the model produced non-finite outputs")
    inv = sq.sqrt().clamp_min(_TINY).reciprocal()  # (N, K)
    u = f * inv[..., None]
    means = u.mean(dim=1)
    centred = u - means[:, None]
    gu = centred @ centred.transpose(1, 2)
    ss = _sum_sq(gu)
    raw_ss = _sum_sq(_centre_gram(g))
    out = {"spread": ss / k, "trace_l2": ss / (k - 1), "per_dim_var_l2": ss / (k - 1) / d,
           "trace_raw": raw_ss / (k - 1), "per_dim_var_raw": raw_ss / (k - 1) / d,
           "d_intra": _d_intra_g(gu), "orbit_effective_rank": _erank_g(gu)}
    if k >= 3:
        out["curvature_raw"], out["curvature_arc"], out["curvature_arc_scaled"] = \
            _curvatures_s(_chord_gram(u))
    if anchor is not None:
        if not isinstance(anchor, Tensor) or tuple(anchor.shape) != (n, d):
            _alignment(f, anchor)  # raises the shape error
        a = anchor.detach().to(torch.float64).to(f.device)
        a = a / a.norm(dim=1, keepdim=True).clamp_min(_TINY)
        cos = torch.einsum("nkd,nd->nk", u, a)
        out["alignment"] = cos.mean(dim=1)
        out["alignment_steps"] = cos
    out["orbit_means"] = means
    out["norm"] = sq.sqrt().mean(dim=1)
    out["unit_fraction"] = (sq > 0).to(torch.float64).mean(dim=1)
    return out


# ---- class structure

def _labels(labels: Tensor, n: int) -> Tensor:
    labels = torch.as_tensor(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},) (one per image), got {tuple(labels.shape)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"labels must be integer class ids, got dtype {labels.dtype}")
    return labels.to(torch.int64)


def centroid_distance_from_means(means: Tensor, labels: Tensor, weights: Tensor | None = None) -> Tensor:
    """D_inter from per-image orbit means (N, D): mean over class pairs of ‖c_a − c_b‖.

    c_a = Σ_{n∈a} w_n m_n / Σ_{n∈a} w_n. ``weights`` (N,) or (B, N) non-negative multiplicities
    (bootstrap counts) give one value per row; a class with zero weight in a row sits out of that
    row's pairs (NaN when fewer than 2 classes remain). Distances come from the N×N Gram of the
    means, ‖c_a − c_b‖² = α_aᵀGα_a + α_bᵀGα_b − 2α_aᵀGα_b, so replicates cost O(B·N²), not O(B·N·D).
    """
    means = means.detach().to(torch.float64)
    n = means.shape[0]
    y = _labels(labels, n).to(means.device)
    classes = torch.unique(y)
    if classes.numel() < 2:
        raise ValueError(f"D_inter needs at least 2 classes, got labels {classes.tolist()}")
    w = torch.ones(n, dtype=torch.float64) if weights is None else \
        torch.as_tensor(weights, dtype=torch.float64)
    single = w.ndim == 1
    w = w.reshape(-1, n).to(means.device)
    if bool((w < 0).any()):
        raise ValueError("image weights must be non-negative multiplicities")
    order = torch.argsort(y, stable=True)  # classes contiguous: slices instead of gathers
    sizes = torch.unique_consecutive(y[order], return_counts=True)[1].tolist()
    bounds = [0] + torch.cumsum(torch.tensor(sizes), 0).tolist()
    ms, w = means[order], w[:, order]
    gram = ms @ ms.T
    mass = torch.stack([w[:, s:e].sum(dim=1) for s, e in zip(bounds[:-1], bounds[1:])], dim=1)
    alpha = w / torch.repeat_interleave(mass.clamp_min(_TINY), torch.tensor(sizes), dim=1)
    onehot = torch.repeat_interleave(torch.eye(len(sizes), dtype=torch.float64), torch.tensor(sizes),
                                     dim=0).to(means.device)  # (N, C)
    q = torch.empty(w.shape[0], len(sizes), len(sizes), dtype=torch.float64, device=means.device)
    for c, (s, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        proj = alpha[:, s:e].contiguous() @ gram[s:e]  # (B, N): α_cᵀ G over class c's rows only
        q[:, c] = (proj * alpha) @ onehot  # α_cᵀ G α_b for every class b
    diag = q.diagonal(dim1=1, dim2=2)
    dist = (diag[:, :, None] + diag[:, None, :] - 2 * q).clamp_min(0.0).sqrt()
    c = classes.numel()
    iu = torch.triu_indices(c, c, offset=1)
    present = mass > 0
    ok = (present[:, iu[0]] & present[:, iu[1]]).to(torch.float64)
    out = (dist[:, iu[0], iu[1]] * ok).sum(dim=1) / ok.sum(dim=1)
    return out[0] if single else out


def class_centroid_distance(f: Tensor, labels: Tensor, normalise: bool = True,
                            weights: Tensor | None = None) -> Tensor:
    """D_inter: mean distance between class centroids (mean of all orbit points of a class).

    f (N, K, D), labels (N,); see :func:`centroid_distance_from_means` for ``weights``. With equal
    K per orbit the centroid of a class's points is the mean of its images' orbit means.
    """
    u = _prep(f, normalise, min_steps=1)
    return centroid_distance_from_means(u.mean(dim=1), labels, weights)


# ---- effective rank

def effective_rank_from_eigenvalues(lam: Tensor) -> Tensor:
    """exp(−Σ p log p) with p = λ⁺ / Σλ⁺ over the last dim (λ⁺ = max(λ, 0)); 0 where Σλ⁺ = 0."""
    lam = lam.to(torch.float64).clamp_min(0.0)
    total = lam.sum(dim=-1, keepdim=True)
    p = lam / total.clamp_min(_TINY)
    ent = -(torch.where(p > 0, p * p.log(), torch.zeros_like(p))).sum(dim=-1)
    return torch.where(total.squeeze(-1) > 0, ent.exp(), torch.zeros_like(ent))


def effective_rank(x: Tensor) -> float:
    """Effective rank of the sample covariance of the rows of x (M, D), M ≥ 2."""
    if not isinstance(x, Tensor) or x.ndim != 2 or x.shape[0] < 2:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"effective_rank needs a (M >= 2, D) feature matrix, got {shape}")
    x = x.detach().to(torch.float64)
    if not bool(torch.isfinite(x).all()):
        raise ValueError("features contain NaN/inf; the model produced non-finite outputs")
    xc = x - x.mean(dim=0)
    m, d = xc.shape  # the nonzero eigenvalues of XᵀX and XXᵀ agree: use the smaller
    gram = xc @ xc.T if m <= d else xc.T @ xc
    return float(effective_rank_from_eigenvalues(torch.linalg.eigvalsh(gram / (m - 1))))

"""Orbit metrics: pure functions on orbit features f of shape (N images, K steps, D) (PAPER.md §3).

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
  The trace ratio tr_z / tr_h is dimension-fair (PAPER.md §4 pitfall 4).
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
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["anchor_alignment", "class_centroid_distance", "curvature_arc", "curvature_arc_scaled",
           "curvature_raw", "d_intra", "effective_rank", "effective_rank_from_eigenvalues",
           "l2_normalise", "orbit_effective_rank", "orbit_spread", "per_dim_variance",
           "within_orbit_trace"]


def _orbits(f: Tensor, min_steps: int = 2, name: str = "orbit features") -> Tensor:
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
    return f / f.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)


def _prep(f: Tensor, normalise: bool, min_steps: int = 2) -> Tensor:
    f = _orbits(f, min_steps)
    return l2_normalise(f) if normalise else f


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
    u = _prep(f, normalise)
    k = u.shape[1]
    dist = torch.cdist(u, u)  # (N, K, K)
    iu = torch.triu_indices(k, k, offset=1)
    return dist[:, iu[0], iu[1]].mean(dim=1)


def _labels(labels: Tensor, n: int) -> Tensor:
    labels = torch.as_tensor(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},) (one per image), got {tuple(labels.shape)}")
    if labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise ValueError(f"labels must be integer class ids, got dtype {labels.dtype}")
    return labels.to(torch.int64)


def class_centroid_distance(f: Tensor, labels: Tensor, normalise: bool = True,
                            weights: Tensor | None = None) -> Tensor:
    """D_inter: mean distance between class centroids over the class pairs.

    f (N, K, D), labels (N,). ``weights`` (N,) or (B, N) non-negative image multiplicities
    (bootstrap counts) give one value per row; a class with zero weight in a row is left out
    of that row's pairs. Returns a 0-d tensor, or (B,) for 2-D weights. Needs ≥ 2 classes.
    """
    u = _prep(f, normalise, min_steps=1)
    y = _labels(labels, u.shape[0])
    classes = torch.unique(y)
    if classes.numel() < 2:
        raise ValueError(f"D_inter needs at least 2 classes, got labels {classes.tolist()}")
    means = u.mean(dim=1)  # (N, D): each image's orbit mean; equal K makes this the point mean
    w = torch.ones(u.shape[0], dtype=torch.float64) if weights is None else \
        torch.as_tensor(weights, dtype=torch.float64)
    single = w.ndim == 1
    w = w.reshape(-1, u.shape[0]).to(means.device)
    if bool((w < 0).any()):
        raise ValueError("image weights must be non-negative multiplicities")
    # Centroid c_a = Σ_n α_an m_n over class a's members; distances from the Gram G = M Mᵀ
    # (‖c_a − c_b‖² = α_aᵀGα_a + α_bᵀGα_b − 2 α_aᵀGα_b), so the cost does not grow with D.
    gram = means @ means.T
    members = [torch.nonzero(y == c).reshape(-1).to(means.device) for c in classes]
    mass = torch.stack([w[:, mem].sum(dim=1) for mem in members], dim=1)  # (B, C)
    alpha = [w[:, mem] / mass[:, a:a + 1].clamp_min(1e-300) for a, mem in enumerate(members)]
    proj = [alpha[a] @ gram[mem] for a, mem in enumerate(members)]  # (B, N) each
    q_self = [(proj[a][:, mem] * alpha[a]).sum(dim=1) for a, mem in enumerate(members)]
    c = len(members)
    total = torch.zeros(w.shape[0], dtype=torch.float64, device=means.device)
    n_pairs = torch.zeros_like(total)
    for a in range(c):
        for b in range(a + 1, c):
            q_ab = (proj[a][:, members[b]] * alpha[b]).sum(dim=1)
            ok = (mass[:, a] > 0) & (mass[:, b] > 0)  # a class absent from a replicate sits out
            dist = (q_self[a] + q_self[b] - 2 * q_ab).clamp_min(0.0).sqrt()
            total = total + torch.where(ok, dist, torch.zeros_like(dist))
            n_pairs = n_pairs + ok.to(torch.float64)
    out = total / n_pairs  # NaN when fewer than 2 classes are present
    return out[0] if single else out


def effective_rank_from_eigenvalues(lam: Tensor) -> Tensor:
    """exp(−Σ p log p) with p = λ⁺ / Σλ⁺ over the last dim (λ⁺ = max(λ, 0)); 0 where Σλ⁺ = 0."""
    lam = lam.to(torch.float64).clamp_min(0.0)
    total = lam.sum(dim=-1, keepdim=True)
    p = lam / total.clamp_min(torch.finfo(torch.float64).tiny)
    ent = -(torch.where(p > 0, p * p.log(), torch.zeros_like(p))).sum(dim=-1)
    return torch.where(total.squeeze(-1) > 0, ent.exp(), torch.zeros_like(ent))


def _centred_gram_eigenvalues(x: Tensor) -> Tensor:
    """Eigenvalues of the unbiased covariance of the rows of x (..., M, D), via the smaller Gram."""
    xc = x - x.mean(dim=-2, keepdim=True)
    m, d = xc.shape[-2:]
    gram = xc @ xc.transpose(-1, -2) if m <= d else xc.transpose(-1, -2) @ xc
    return torch.linalg.eigvalsh(gram / max(m - 1, 1))


def effective_rank(x: Tensor) -> float:
    """Effective rank of the sample covariance of the rows of x (M, D), M ≥ 2."""
    if not isinstance(x, Tensor) or x.ndim != 2 or x.shape[0] < 2:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"effective_rank needs a (M >= 2, D) feature matrix, got {shape}")
    x = x.detach().to(torch.float64)
    if not bool(torch.isfinite(x).all()):
        raise ValueError("features contain NaN/inf; the model produced non-finite outputs")
    return float(effective_rank_from_eigenvalues(_centred_gram_eigenvalues(x)))


def orbit_effective_rank(f: Tensor, normalise: bool = True) -> Tensor:
    """Effective rank of each orbit's covariance C_i (from its K×K Gram). (N, K, D) -> (N,)."""
    u = _prep(f, normalise)
    return effective_rank_from_eigenvalues(_centred_gram_eigenvalues(u))


def curvature_raw(f: Tensor, normalise: bool = True) -> Tensor:
    """The paper's curvature: mean_k ‖f_{k+1} − 2 f_k + f_{k−1}‖ over interior steps. -> (N,)."""
    u = _prep(f, normalise, min_steps=3)
    return (u[:, 2:] - 2 * u[:, 1:-1] + u[:, :-2]).norm(dim=-1).mean(dim=1)


def _chords(u: Tensor) -> tuple[Tensor, Tensor]:
    step = u[:, 1:] - u[:, :-1]  # (N, K-1, D)
    length = step.norm(dim=-1)  # (N, K-1)
    tangent = step / length.unsqueeze(-1)  # NaN where a chord is zero: no tangent there
    return tangent, length


def curvature_arc(f: Tensor, normalise: bool = True) -> Tensor:
    """Arc-length curvature mean_k ‖t_k − t_{k−1}‖ / ((ℓ_k + ℓ_{k−1}) / 2). -> (N,); 1/r on a circle."""
    u = _prep(f, normalise, min_steps=3)
    t, ell = _chords(u)
    kappa = (t[:, 1:] - t[:, :-1]).norm(dim=-1) / (0.5 * (ell[:, 1:] + ell[:, :-1]))
    return kappa.mean(dim=1)


def curvature_arc_scaled(f: Tensor, normalise: bool = True) -> Tensor:
    """:func:`curvature_arc` times the orbit's arc length Σ_k ℓ_k: dimensionless. -> (N,)."""
    u = _prep(f, normalise, min_steps=3)
    _, ell = _chords(u)
    return curvature_arc(u, normalise=False) * ell.sum(dim=1)


def anchor_alignment(f: Tensor, anchor: Tensor) -> Tensor:
    """cos(f_ik, a_i) of each orbit point to its anchor a_i. f (N, K, D), anchor (N, D) -> (N, K)."""
    f = _orbits(f, min_steps=1)
    if not isinstance(anchor, Tensor) or tuple(anchor.shape) != (f.shape[0], f.shape[2]):
        shape = tuple(anchor.shape) if isinstance(anchor, Tensor) else type(anchor).__name__
        raise ValueError(f"anchor must have shape (N, D) = {(f.shape[0], f.shape[2])} to match "
                         f"the orbits, got {shape}")
    a = l2_normalise(anchor.to(f.device))
    return (l2_normalise(f) * a[:, None, :]).sum(dim=-1)

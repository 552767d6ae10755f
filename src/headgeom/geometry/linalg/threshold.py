"""Where a two-term family of symmetric blocks A + t·B first turns indefinite, in closed form
(docs/paper.md §2 C4).

At a collapsed state H_eff = G + M, and M is linear in the residual gradient ρ. Scaling ρ by t
while G stays fixed gives the ray H(t) = G + t·M; with G ≻ 0,

    λ_min(G + t·M) < 0   ⇔   t > t* = 1 / λ_max(−G^{-1/2} M G^{-1/2}),

and there is no such t (t* = ∞) when λ_max(−G^{-1/2} M G^{-1/2}) ≤ 0, i.e. when M has no
negative direction relative to G. Per block i the crossing is t*_i; a block-diagonal matrix turns
indefinite at min_i t*_i. Exact: no grid, no range to choose.

- :func:`crossing` gives t* per block for any pair (A, B) with A ≻ 0 (a threshold sweep's two
  terms, :mod:`headgeom.theory.collapse_threshold`);
- :func:`threshold_ratio` gives, for a measured state, how far along its own ray it sits:
  r = λ_max(−G^{-1/2} M G^{-1/2}) = 1 / t*, so the state (t = 1) is past its own threshold exactly
  when r > 1 (then λ_min(H_eff) < 0). It compares magnitudes within one state only.

"Whether a finite threshold exists" is the lemma "M has a direction v with vᵀMv < 0 ⇒ t* < ∞"
(take v, then vᵀ(G + tM)v < 0 for t > vᵀGv / (−vᵀMv)): with ρ drawn sign-symmetrically it holds
almost surely, so it is an identity, never evidence.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["crossing", "pullback_and_ratio", "threshold_ratio"]


def _whitened(a: Tensor, b: Tensor, pd_tol: float) -> tuple[Tensor, Tensor, Tensor]:
    """(C, ok, λ_min(A)): C = A^{-1/2} B A^{-1/2} per block through A's eigendecomposition, ok (N,) where
    every eigenvalue of A_i exceeds pd_tol · max|λ(A)| (A_i positive definite to that tolerance), and the
    smallest eigenvalue of each A_i (N,)."""
    a = 0.5 * (a + a.transpose(-1, -2))
    b = 0.5 * (b + b.transpose(-1, -2))
    lam, vec = torch.linalg.eigh(a)
    scale = lam.abs().amax().clamp_min(torch.finfo(lam.dtype).tiny)
    ok = lam.amin(dim=-1) > pd_tol * scale
    inv_sqrt = torch.where(lam > 0, lam, torch.ones_like(lam)).rsqrt()
    w = vec * inv_sqrt[..., None, :]  # A^{-1/2} = V Λ^{-1/2} Vᵀ; W = V Λ^{-1/2}, C = Wᵀ B W (same spectrum)
    c = w.transpose(-1, -2) @ b @ w
    return 0.5 * (c + c.transpose(-1, -2)), ok, lam.amin(dim=-1)


def _checked(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    if a.shape != b.shape or a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"A and B must be square blocks of one shape (..., d, d); got {tuple(a.shape)} and {tuple(b.shape)}")
    a, b = a.to(torch.float64), b.to(torch.float64)
    if a.ndim == 2:
        a, b = a[None], b[None]
    return a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])


def crossing(a: Tensor, b: Tensor, *, pd_tol: float = 1e-12) -> Tensor:
    """t*_i = inf{t > 0 : λ_min(A_i + t B_i) < 0} per block, float64 (N,): 1 / λ_max(−A^{-1/2} B A^{-1/2}),
    +inf where that is ≤ 0 (no crossing at any t > 0), NaN where A_i is not positive definite (its
    smallest eigenvalue ≤ pd_tol · max|λ(A)|: the ray starts on the boundary and the form does not
    apply). ``a``, ``b``: (d, d) or (N, d, d) symmetric blocks."""
    a, b = _checked(a, b)
    c, ok, _ = _whitened(a, b, pd_tol)
    top = (-torch.linalg.eigvalsh(c)).amax(dim=-1)  # λ_max(−C) = −λ_min(C)
    t = torch.where(top > 0, 1.0 / top.clamp_min(torch.finfo(top.dtype).tiny), torch.full_like(top, math.inf))
    return torch.where(ok, t, torch.full_like(t, math.nan))


def threshold_ratio(g: Tensor, m: Tensor, *, pd_tol: float = 1e-12) -> Tensor:
    """r_i = λ_max(−G_i^{-1/2} M_i G_i^{-1/2}) per block (N,), float64: the state H_eff = G + M sits at r_i
    times the threshold of its own ray G + t·M (past it when r_i > 1, where λ_min(G_i + M_i) < 0; r_i ≤ 0
    when M_i has no direction negative against G_i). NaN where G_i is not positive definite
    (see :func:`crossing`)."""
    return pullback_and_ratio(g, m, pd_tol=pd_tol)[1]


def pullback_and_ratio(g: Tensor, m: Tensor, *, pd_tol: float = 1e-12) -> tuple[Tensor, Tensor]:
    """(λ_min(G_i), r_i) per block (N,) each, from one eigendecomposition of G: the smallest eigenvalue of
    each G block and :func:`threshold_ratio` (NaN where G_i is not positive definite)."""
    g, m = _checked(g, m)
    c, ok, lam_min = _whitened(g, m, pd_tol)
    r = (-torch.linalg.eigvalsh(c)).amax(dim=-1)
    return lam_min, torch.where(ok, r, torch.full_like(r, math.nan))

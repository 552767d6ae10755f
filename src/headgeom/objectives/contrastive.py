"""Contrastive losses: SimCLR's symmetric NT-Xent and the paper code's one-directional InfoNCE.

Both L2-normalise each row first (F.normalize, dim=1) and divide cosine similarities by a
temperature. Written without in-place ops, boolean indexing or value-dependent branches, so
they can be differentiated twice and used under ``torch.func.vmap`` (docs/paper.md §1, §3).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_batch, check_pair, check_positive
from headgeom.objectives.spec import ObjectiveSpec


def _offdiag_columns(m: int, device: torch.device) -> Tensor:
    """Indices (m, m-1): row r lists the columns 0..m-1 without r (self-similarity removed)."""
    cols = torch.arange(m - 1, device=device).unsqueeze(0).expand(m, m - 1)
    rows = torch.arange(m, device=device).unsqueeze(1)
    return cols + (cols >= rows).long()


def nt_xent(a: Tensor, b: Tensor, temperature: float = 0.5) -> Tensor:
    """Symmetric NT-Xent (SimCLR, Chen et al. 2020): a, b (N, D) -> scalar.

    The 2N rows of [â; b̂] are anchors; anchor r's positive is its partner view (r ± N) and
    its negatives are the other 2N − 2 rows (self-similarity excluded). Loss per anchor:
    −s_pos/T + log Σ_{m ≠ r} exp(s_rm/T); mean over the 2N anchors.
    """
    a, b = check_pair("a", a, "b", b)
    check_batch("nt_xent", a)
    t = check_positive("temperature", temperature)
    n = a.shape[0]
    z = F.normalize(torch.cat([a, b], dim=0), dim=1)  # (2N, D)
    sim = z @ z.T / t  # (2N, 2N)
    others = torch.gather(sim, 1, _offdiag_columns(2 * n, sim.device))  # (2N, 2N-1)
    pos = (z[:n] * z[n:]).sum(dim=1) / t  # (N,)
    pos = torch.cat([pos, pos], dim=0)  # (2N,)
    return (torch.logsumexp(others, dim=1) - pos).mean()


def nt_xent_diagonal_blocks(a: Tensor, b: Tensor, temperature: float = 0.5) -> Tensor:
    """∂²/∂a_i² of :func:`nt_xent` (a, b) with b held fixed: the (N, k, k) diagonal blocks of its
    Hessian in a, in closed form (the loss couples the rows of a, so its Hessian is not block
    diagonal; these are the blocks the pullback metric's per-sample blocks need).

    With z = [x; y] the 2N normalised rows (x_i = a_i/r_i), P the row softmax of zzᵀ/T over
    c ≠ row, m_i = Σ_c P_ic z_c, and the mean over 2N anchors:

        H^x_ii = 1/(2N T²) [Σ_c P_ic z_c z_cᵀ − m_i m_iᵀ + Σ_{a≠i} P_ai (1 − P_ai) z_a z_aᵀ]
        g_i    = ∂L/∂x_i = 1/(2N T) [m_i + Σ_{a≠i} P_ai z_a − 2 y_i]
        H_ii   = J_i H^x_ii J_i − (1/r_i²) [x_i g_iᵀ + g_i x_iᵀ + (g_iᵀx_i)(I − 3 x_i x_iᵀ)],
                 J_i = (I − x_i x_iᵀ)/r_i

    (anchor i's log-sum-exp, the N + 2N − 2 other anchors that have x_i among their negatives or
    as positive, and the normalisation's curvature). Cost O(N² k²); tested against autograd.
    """
    a, b = check_pair("a", a, "b", b)
    check_batch("nt_xent", a)
    t = check_positive("temperature", temperature)
    n, k = a.shape
    r = a.norm(dim=1).clamp_min(1e-12)  # F.normalize's eps
    x = a / r[:, None]
    z = torch.cat([x, F.normalize(b, dim=1)], dim=0)  # (2N, k)
    sim = z @ z.T / t
    eye = torch.eye(2 * n, dtype=torch.bool, device=a.device)
    p = torch.softmax(sim.masked_fill(eye, float("-inf")), dim=1)  # (2N, 2N), zero diagonal
    scale = 1.0 / (2 * n)
    p_x = p[:n]  # anchors i = rows of a
    m = p_x @ z  # (N, k)
    into = p[:, :n].T  # into[i, a] = P_ai: how anchor a weighs x_i
    w = into * (1 - into)
    h_x = (torch.einsum("ic,ck,cl->ikl", p_x, z, z) - m[:, :, None] * m[:, None, :]
           + torch.einsum("ia,ak,al->ikl", w, z, z)) * (scale / t**2)
    g = (m + into @ z - 2 * z[n:]) * (scale / t)  # (N, k)
    eye_k = torch.eye(k, dtype=a.dtype, device=a.device)
    proj = (eye_k - x[:, :, None] * x[:, None, :]) / r[:, None, None]  # J_i, symmetric
    gx = (g * x).sum(dim=1)[:, None, None]
    curv = (x[:, :, None] * g[:, None, :] + g[:, :, None] * x[:, None, :]
            + gx * (eye_k - 3 * x[:, :, None] * x[:, None, :])) / (r**2)[:, None, None]
    return proj @ h_x @ proj - curv


def info_nce(a: Tensor, b: Tensor, temperature: float = 0.1) -> Tensor:
    """One-directional InfoNCE with cross-view negatives only (the paper's SimCLR code, §3).

    logits = â b̂ᵀ / T (N, N); cross-entropy with the diagonal as targets, i.e. anchor a_i,
    positive b_i, negatives b_j (j ≠ i); mean over the N anchors. a, b (N, D) -> scalar.
    """
    a, b = check_pair("a", a, "b", b)
    check_batch("info_nce", a)
    t = check_positive("temperature", temperature)
    logits = F.normalize(a, dim=1) @ F.normalize(b, dim=1).T / t  # (N, N)
    return (torch.logsumexp(logits, dim=1) - torch.diagonal(logits)).mean()


SPECS = (
    ObjectiveSpec("nt_xent", nt_xent, two_view=True, batch_coupled=True, cosine=False,
                  description="symmetric SimCLR NT-Xent, 2N anchors, 2N-2 negatives, T=0.5",
                  diagonal_blocks=nt_xent_diagonal_blocks),
    # info_nce(u, fixed) is separable in its anchors u: the engine's block-diagonal path serves it
    ObjectiveSpec("info_nce", info_nce, two_view=True, batch_coupled=True, cosine=False,
                  description="one-directional InfoNCE, cross-view negatives only, T=0.1 (paper code)"),
)

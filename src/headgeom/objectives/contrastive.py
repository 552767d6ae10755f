"""Contrastive losses: SimCLR's symmetric NT-Xent and the paper code's one-directional InfoNCE.

Both L2-normalise each row first (F.normalize, dim=1) and divide cosine similarities by a
temperature. Written without in-place ops, boolean indexing or value-dependent branches, so
they can be differentiated twice and used under ``torch.func.vmap`` (PAPER.md §1, §3).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from headgeom.objectives._checks import check_batch, check_pair, check_positive


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

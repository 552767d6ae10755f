"""Symmetric per-sample products by row tiles of the upper triangle: weighted Gram matrices
Aᵀ diag(c_i) A of one shared matrix A for many weight vectors c_i, and X_i P_iᵀ known to be symmetric.

They appear wherever a layer's Jacobian or weight is the same for every sample and the
per-sample factor is diagonal (docs/paper.md §1): the first Linear's M term
A_1ᵀ diag(σ''⊙g) A_1, and a declared diagonal of the loss Hessian pulled back through the
last weight, W_Lᵀ diag(δ_i) W_L (the DINO loss's diag p_i, with W_L 65,536 × 256).

Formed by row tiles of the upper triangle: for rows I (|I| ≤ tile) of every block, one GEMM
of the scaled rows [Aᵀ[I] ⊙ c_i]_i (s·|I|, w) against A[:, I₀:] (w, d − I₀); the lower
triangle is mirrored. (1 + tile/d)/2 of the FLOPs of N full products (0.52 at d = 512, 0.53
at the DINO bottleneck 256, tile 16), as many-sample GEMMs, through one scaled buffer of bounded
size reused across tiles (a fresh large tensor per product costs its page faults, about 3× the
scaling itself). Tile 16 was measured fastest of 8–128 on the costliest products, the first layer's
term at N = 256 and the DINO loss's W_Lᵀ diag(p_i) W_L (0.76× and 0.86× the time of tile 64), and
within 1.2 % of tile 64 where tile 32 was faster (BENCHMARKS.md): the tiles' GEMMs keep their rate
down to 16 rows because each multiplies all of a group's samples at once.
Packing the outer products a_j a_jᵀ of all w rows once and multiplying C by them halves the
FLOPs exactly but builds w·d²/2 entries whatever N is: measured 3× slower at N = 32 at the
paper's widths (BENCHMARKS.md).
"""
from __future__ import annotations

import torch
from torch import Tensor

from .workspace import Workspace, work_buffer

BUFFER_BYTES = 1 << 26  # the scaled rows held at once (64 MiB); at least one sample's tile
GRAM_TILE = 16  # rows per tile of weighted_gram (measured against 8-128: BENCHMARKS.md)


def weighted_gram(at: Tensor, c: Tensor, out: Tensor | None = None, tile: int = GRAM_TILE,
                  workspace: Workspace | None = None) -> Tensor:
    """(N, d, d) blocks Aᵀ diag(c_i) A = Σ_j c_ij a_j a_jᵀ for a shared Aᵀ = at (d, w), c (N, w).

    ``out`` (N, d, d), if given, receives the blocks (a slice of a larger tensor will do); the scaled
    rows are held in ``workspace``'s buffer when one is given (reused across calls).
    """
    d, w = at.shape
    n = c.shape[0]
    if out is None:
        out = torch.empty(n, d, d, dtype=at.dtype, device=at.device)
    t = max(1, min(tile, d))
    group = max(1, min(n, BUFFER_BYTES // (t * w * at.element_size())))  # samples per GEMM
    buf = work_buffer(workspace, "gram-tiles", group * t * w, at)
    a = at.T  # (w, d)
    for s0 in range(0, n, group):
        s1 = min(s0 + group, n)
        cs, os_ = c[s0:s1], out[s0:s1]
        for i0 in range(0, d, t):
            i1 = min(i0 + t, d)
            scaled = buf[:(s1 - s0) * (i1 - i0) * w].view(s1 - s0, i1 - i0, w)
            torch.mul(at[None, i0:i1], cs[:, None, :], out=scaled)
            _put_rows(os_, (scaled.view(-1, w) @ a[:, i0:]).view(s1 - s0, i1 - i0, d - i0), i0, i1)
    return out


def _put_rows(out: Tensor, blk: Tensor, i0: int, i1: int, accumulate: bool = False) -> None:
    """Write (or add) the upper-triangle rows i0:i1 of symmetric blocks, blk = out[:, i0:i1, i0:],
    and their mirror out[:, i1:, i0:i1]."""
    low = blk[:, :, i1 - i0:].transpose(1, 2)
    if accumulate:
        out[:, i0:i1, i0:] += blk
        out[:, i1:, i0:i1] += low
    else:
        out[:, i0:i1, i0:] = blk
        out[:, i1:, i0:i1] = low


SYMMETRIC_TILE = 64  # rows per batched product in symmetric_bmm (measured against 32, 128, 256: BENCHMARKS.md)


def upper_fraction(d: int, tile: int) -> float:
    """The share of a full d × d product's FLOPs that row tiles of the upper triangle multiply."""
    t = max(1, min(tile, d))
    return sum(min(t, d - i0) * (d - i0) for i0 in range(0, d, t)) / (d * d)


def symmetric_bmm(x: Tensor, p: Tensor, out: Tensor, *, accumulate: bool = False,
                  tile: int = SYMMETRIC_TILE) -> Tensor:
    """out (s, d, d) = X_i P_iᵀ (``accumulate``: +=) for x, p (s, d, m) whose products are symmetric
    (P K Pᵀ as (P K) Pᵀ with K symmetric, or (P diag c) Pᵀ).

    Only the upper triangle is multiplied, by row tiles (one batched product each), and mirrored:
    (1 + tile/d)/2 of the FLOPs of the full product. ``out`` may be a slice of a larger tensor.
    """
    d = x.shape[1]
    t = max(1, min(tile, d))
    pt = p.transpose(1, 2)
    for i0 in range(0, d, t):
        i1 = min(i0 + t, d)
        _put_rows(out, torch.bmm(x[:, i0:i1], pt[:, :, i0:]), i0, i1, accumulate)  # (s, i1 - i0, d - i0)
    return out

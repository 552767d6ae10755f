"""Per-sample low-rank updates in place: out_i += value · L_i R_iᵀ for a rank q of one or two.

They appear wherever a per-sample factor is a scaled identity plus a few directions (docs/paper.md §1):
RowNorm's Jacobian c (I − E Eᵀ) applied to transposed Jacobians, and a declared loss block
α I + U B Uᵀ applied to them. As a batched product of inner size q the update runs at about a tenth of
the rate of q element-wise passes (BENCHMARKS.md, "Layer kinds on the structured path"), and it would
need a fresh result tensor as well; so it is q ``addcmul_`` passes over ``out``.
"""
from __future__ import annotations

from torch import Tensor


def add_low_rank_(out: Tensor, left: Tensor, right: Tensor, value: float = 1.0) -> Tensor:
    """out (s, a, b) += value · left (s, a, q) @ right (s, b, q)ᵀ, one rank-one pass per column; returns out."""
    for j in range(left.shape[-1]):
        out.addcmul_(left[..., j:j + 1], right[:, None, :, j], value=value)
    return out

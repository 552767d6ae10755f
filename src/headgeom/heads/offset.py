"""A fixed offset added to a head's output: the induced collapse of docs/paper.md §3.3 ("a head whose bias
dominates its output").

u = h(z) + b with b a buffer (saved with the head, never trained). When |b| is large against the spread of
h(z) over a batch, the L2-normalised outputs u/|u| all lie near b/|b|: the outputs are collapsed, and no
property of the head underneath (positive homogeneity, BatchNorm's scale invariance and centring) can undo
it at initialisation, because b is added after the head's last layer. Its size is set on data by
:func:`headgeom.train.collapse.calibrate_offset`; a head built with it starts with b = 0.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["OutputOffset", "check_collapse"]


def check_collapse(depth: float | None) -> float | None:
    """The induced collapse's depth as a float (None: no induced collapse): the spread of the L2-normalised
    outputs at step 0 as a fraction of 1/√k, so it lies in (0, 1)."""
    if depth is None:
        return None
    if isinstance(depth, bool) or not isinstance(depth, (int, float)) or not math.isfinite(depth) \
            or not 0 < depth < 1:
        raise ValueError(f"collapse must be None or the depth of the induced collapse, a fraction of 1/sqrt(k) in "
                         f"(0, 1) (e.g. 0.02); got {depth!r}")
    return float(depth)


class OutputOffset(nn.Module):
    """x (N, k) -> x + shift, ``shift`` (k,) a buffer (zeros until calibrated)."""

    def __init__(self, width: int) -> None:
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"OutputOffset needs the head's output width, a positive int; got {width!r}")
        super().__init__()
        self.register_buffer("shift", torch.zeros(width))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.shift

    def extra_repr(self) -> str:
        return f"width={self.shift.numel()}, |shift|={float(self.shift.norm()):.4g}"

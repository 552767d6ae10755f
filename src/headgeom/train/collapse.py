"""The induced collapse (``TrainConfig.collapse``): a fixed offset after the projector, sized at step 0 so that
the spread of the L2-normalised projector outputs on the run's probe batch is ``collapse / sqrt(k)``
(docs/paper.md §3.3, docs/experiments.md "GRID").

Why an output offset (:mod:`headgeom.heads.offset`) and not the paper's ×0.1 or a map in representation space:
the spread of u/|u| is unchanged by scaling a bias-free ReLU or linear head (positive homogeneity) and by
anything before a BatchNorm (scale invariance), so ×0.1 leaves those heads where they were; a map
z̄ + ε(z − z̄) after the backbone is undone by a BatchNorm head's centring (its mean subtraction removes z̄, its
division by the batch std removes ε, up to its eps). An offset b added after the head's last layer is seen
by every head alike: u_i = h(z_i) + b, and with |b| large against the spread of h(z_i) every u_i/|u_i| lies
near b/|b|. The direction of b is a fixed random unit vector (its own generator, so the run's parameters and
data are those of the same run without it); its length is solved on data, per head and seed, so every head
starts at the same stated spread. A head already at or below that spread gets b = 0 (an offset can only
lower it) and starts where it is.

The spread is measured as the tracker measures it (:mod:`headgeom.tracking.tracker`): view 1 of the probe
batch, backbone in eval mode, projector in train mode (BatchNorm on the batch's statistics), no gradient,
buffers untouched.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from headgeom.eval.rankme import spread_l2, uniform_spread
from headgeom.heads.offset import OutputOffset
from headgeom.methods.base import preserve_buffers

__all__ = ["OFFSET_SEED", "calibrate_offset", "output_offset"]

OFFSET_SEED = 65537  # added to the run's seed for the offset's direction (a generator of its own)
_BISECTIONS = 200  # halvings of the bracket on |b| (stops earlier once the bracket is at float64 resolution)


def output_offset(method: nn.Module) -> OutputOffset | None:
    """The projector's :class:`OutputOffset` (its last layer when the run was built with ``collapse``), or None."""
    layers = getattr(method.projector, "layers", None)
    last = layers[-1] if isinstance(layers, nn.Sequential) and len(layers) else None
    return last if isinstance(last, OutputOffset) else None


@torch.no_grad()
def calibrate_offset(method: nn.Module, view: Tensor, depth: float, seed: int) -> dict[str, float]:
    """Set the projector's offset b so that spread(projector(backbone(view)) + b) = depth/√k (b = 0 when the
    spread without it is already at or below that); returns {"target", "spread_without", "offset_norm"}.

    ``view``: (N, C, H, W) images (view 1 of the probe batch); ``depth`` in (0, 1). The solve is in float64 on
    the projector's outputs computed once; b's direction is a seeded Gaussian unit vector."""
    offset = output_offset(method)
    if offset is None:
        raise ValueError("calibrate_offset needs a method built with collapse=... (its projector ends with an "
                         "OutputOffset); build it with build_method(..., collapse=depth)")
    if not 0 < depth < 1:
        raise ValueError(f"depth must lie in (0, 1) (a fraction of 1/sqrt(k)); got {depth!r}")
    was_training = method.training
    offset.shift.zero_()
    with preserve_buffers(method):
        method.train()
        method.backbone.eval()
        y = method.projector(method.backbone(view)).double()
    method.train(was_training)
    k = int(y.shape[1])
    target = depth * uniform_spread(k)
    gen = torch.Generator().manual_seed(int(seed) + OFFSET_SEED)
    direction = torch.randn(k, generator=gen, dtype=torch.float64)
    direction /= direction.norm()
    without = spread_l2(y)
    if without <= target:
        return {"target": target, "spread_without": without, "offset_norm": 0.0}
    lo, hi = 0.0, float(y.norm(dim=1).mean()) or 1.0
    while spread_l2(y + hi * direction) > target:  # the spread tends to 0 as |b| grows
        lo, hi = hi, 2.0 * hi
        if not math.isfinite(hi):
            raise ValueError(f"no offset brings the spread {without:.4g} down to {target:.4g}")
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if spread_l2(y + mid * direction) > target else (lo, mid)
    offset.shift.copy_((hi * direction).to(offset.shift.dtype))
    return {"target": target, "spread_without": without, "offset_norm": hi}

"""The spread of the same head and backbone at normal initialisation, on the same probe batch: what a collapse
at init did to this head (docs/paper.md §3.3; headgeom.claims.training_verdicts reports spread_initial over it
beside the verdict, whose level is head-independent, a fraction of 1/√k).

The paper's pseudo-collapse multiplies the projector's Linear weights by α at init; the same init
without it is the method with those weights divided by α. The induced collapse adds a fixed offset after the
projector (headgeom.heads.offset); the same init without it has the offset at zero. The spread is the mean
per-dimension std of the L2-normalised projector outputs on view 1 of the probe batch.
"""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import Tensor, nn

from headgeom.eval.rankme import spread_l2
from headgeom.heads import scale_linear_weights_
from headgeom.heads.offset import OutputOffset

__all__ = ["reference_spread"]


def reference_spread(method: nn.Module, probe_views: Sequence[Tensor], alpha: float | None,
                     head_mode: str = "eval") -> float:
    """Spread of the projector outputs of ``method`` with its pseudo-collapse ``alpha`` undone (None: none) and
    any output offset of an induced collapse set to zero, on ``probe_views[0]``; backbone in eval mode, the
    projector in ``head_mode``, no grad. The method itself is left untouched."""
    if alpha is not None and not (float(alpha) != 0.0 and torch.isfinite(torch.tensor(float(alpha)))):
        raise ValueError(f"alpha must be a finite nonzero pseudo-collapse factor or None; got {alpha!r}")
    normal = copy.deepcopy(method)
    if alpha is not None:
        scale_linear_weights_(normal.projector, 1.0 / float(alpha))
    for module in normal.projector.modules():
        if isinstance(module, OutputOffset):
            module.shift.zero_()
    normal.train(head_mode == "train")
    normal.backbone.eval()
    with torch.no_grad():
        z = normal.backbone(probe_views[0])
        return spread_l2(normal.projector(z))

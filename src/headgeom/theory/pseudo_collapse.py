"""Is a pseudo-collapse visible to the geometry? H_eff of the scaled head against the unscaled one.

The paper's pseudo-collapse multiplies the projector's Linear weights by α = 0.1 at init
(docs/paper.md §3). For a bias-free ReLU or linear projector that multiplies the projector's output
by α^depth, and a bias-free ReLU or linear predictor carries the factor through (positive
homogeneity). A cosine loss is invariant to the scale of both its argument and its target, so the
view-1 loss as a function of z1 is *the same function* for α and for 1: every reading of H_eff, G and
M is unchanged, and the run is a normal ReLU/linear run at init in geometry (its training dynamics
still differ: the gradients w.r.t. the scaled weights are 1/α larger). A smooth head (SiLU) is not
homogeneous, so its scaling does change H_eff. This module measures the difference instead of
assuming either.
"""
from __future__ import annotations

import copy
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from headgeom.geometry import effective_hessian
from headgeom.heads import scale_linear_weights_
from headgeom.rng import seeded

__all__ = ["inert_on_spread", "pseudo_collapse_gap", "gap_at_init"]

HOMOGENEOUS = ("relu", "linear")  # bias-free heads of these activations are positively homogeneous


def inert_on_spread(activation: str, bn: bool) -> bool:
    """Whether the ×α pseudo-collapse leaves the spread of the L2-normalised outputs of the paper's bias-free
    projector (docs/paper.md §3.2) unchanged at every α, by construction: a ReLU or linear head without BN is
    positively homogeneous (its output is scaled by α^depth), and with BN after each Linear every scaling is
    divided out (up to BatchNorm's eps). For these heads the ×α cannot collapse the spread; smooth heads
    without BN (SiLU, GELU, ...) are not homogeneous and it can."""
    return bool(bn) or activation in HOMOGENEOUS


def _blocks(method: nn.Module, z_views: Sequence[Tensor], reading: str) -> Tensor:
    head, loss = method.geometry_problem(list(z_views))
    return effective_hessian(head, loss, z_views[0], reading=reading).blocks()


def pseudo_collapse_gap(method: nn.Module, alpha: float, z_views: Sequence[Tensor],
                        readings: Sequence[str]) -> dict[str, float]:
    """Per reading, max|H(α) − H(1)| / max|H(1)| over the per-sample H_eff blocks of the method's
    geometry problem (view-1 loss w.r.t. z1) at ``z_views``, where ``method`` is built with the
    pseudo-collapse α and H(1) comes from a copy whose projector Linear weights are divided by α
    (the same init without the collapse). 0 up to round-off means the pseudo-collapse is
    geometrically inert (module docstring); the method itself is left untouched.
    """
    if not alpha or not torch.isfinite(torch.tensor(float(alpha))):
        raise ValueError(f"alpha must be a finite nonzero pseudo-collapse factor (paper: 0.1); got {alpha!r}")
    # float64 before dividing: a float32 W·α/α is W only to float32 round-off (~1e-7), which is not geometry
    scaled = copy.deepcopy(method).eval().double()
    unscaled = copy.deepcopy(method).eval().double()
    scale_linear_weights_(unscaled.projector, 1.0 / float(alpha))
    out: dict[str, float] = {}
    views = [z.detach().to(torch.float64) for z in z_views]
    for reading in readings:
        h_scaled, h_unscaled = (_blocks(m, views, reading) for m in (scaled, unscaled))
        top = float(h_unscaled.abs().max())
        out[reading] = float((h_scaled - h_unscaled).abs().max()) / top if top > 0 else float("inf")
    return out


def gap_at_init(build_method: Callable[[], nn.Module], alpha: float, n: int, seed: int,
                readings: Sequence[str]) -> dict[str, float]:
    """:func:`pseudo_collapse_gap` of a training run's method at init (``build_method()`` seeded with
    ``seed`` as torch.manual_seed(seed) would, the caller's random stream left as it was:
    :func:`headgeom.rng.seeded`; e.g. headgeom.train.build_method_from_config of the run's TrainConfig,
    whose ``pseudo_collapse`` is ``alpha``) on n Gaussian z1 of the backbone's width and a second
    view z1 + 0.1·ε. Eval mode: for heads without BatchNorm the mode changes nothing."""
    with seeded(int(seed)):
        method = build_method()
    gen = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, method.spec.feature_dim, generator=gen, dtype=torch.float64)
    z2 = z1 + 0.1 * torch.randn(z1.shape, generator=gen, dtype=torch.float64)
    return pseudo_collapse_gap(method, alpha, [z1, z2], readings)

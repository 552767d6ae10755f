"""MoCo v3 (Chen, Xie, He 2021, "An Empirical Study of Training Self-Supervised Vision
Transformers"), as in facebookresearch/moco-v3 moco/builder.py: symmetric InfoNCE of the online
queries against the keys of a momentum encoder, no queue.

Online branch: backbone → projector h → predictor q, queries q_v = q(h(f(x_v))). Momentum branch:
the EMA of backbone and projector (:class:`headgeom.methods.ema.EMATarget`, no predictor), keys
k_v = h'(f'(x_v)) without gradient. Loss (:func:`headgeom.objectives.mocov3.mocov3_symmetric`):
ctr(q1, k2) + ctr(q2, k1), ctr = 2T · CE(q̂ k̂ᵀ / T, diagonal), T = 0.2. The momentum follows
builder.py's ``adjust_moco_momentum``, the cosine from 0.99 to 1 over the run
(:func:`headgeom.methods.ema.cosine_momentum`), applied after each optimiser step.

Default heads (the ResNet layout of ``MoCo_ResNet._build_projector_and_predictor_mlps``, with
``_build_mlp``'s bias-free Linears, BatchNorm and ReLU): projector d → 4096 → 256 ending in an
affine-free BatchNorm, predictor 256 → 4096 → 256 without a last BatchNorm. Augmentation: BYOL's
asymmetric recipe, which MoCo v3 uses (main_moco.py ``augmentation1`` / ``augmentation2``).

Under DDP queries and keys are gathered over processes (queries with gradient,
:func:`headgeom.methods.distributed.gather_rows`), so every query meets the keys of the global batch
as in the official ``concat_all_gather`` and the loss is the single-process one.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor, nn

from headgeom.heads import HeadSpec
from headgeom.methods.base import SSLMethod, cached_targets, full_precision
from headgeom.methods.distributed import gather_rows
from headgeom.methods.ema import EMATarget, cosine_momentum
from headgeom.objectives.mocov3 import mocov3_symmetric

__all__ = ["MoCoV3"]


class MoCoV3(SSLMethod):
    """L = ctr(q(h(z1)), k2) + ctr(q(h(z2)), k1), k_v the momentum encoder's keys (module docstring)."""

    name = "mocov3"
    DEFAULTS = {"temperature": 0.2, "momentum_base": 0.99, "momentum_final": 1.0}
    RECIPE = "byol"
    HAS_PREDICTOR = True
    DESCRIPTION = "MoCo v3, symmetric InfoNCE against a momentum key encoder (Chen, Xie, He 2021)"
    OBJECTIVE = "mocov3"  # declares its per-sample Hessian blocks: no loss HVPs in geometry_problem

    def __init__(self, backbone, projector, predictor, spec) -> None:
        super().__init__(backbone, projector, predictor, spec)
        self.momentum_encoder = EMATarget(nn.Sequential(self.backbone, self.projector))
        self._keys_cache: tuple[Tensor, list[Tensor]] | None = None

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return HeadSpec((in_dim, 4096, 256), activation="relu", norm="bn", last_norm="bn_noaffine", bias=False)

    @classmethod
    def default_predictor(cls, in_dim: int) -> HeadSpec:
        return HeadSpec((in_dim, 4096, in_dim), activation="relu", norm="bn", bias=False)

    def keys(self, views: Sequence[Tensor]) -> list[Tensor]:
        """The momentum encoder's outputs h'(f'(x_v)), detached, one (N, k) per view."""
        return [self.momentum_encoder(v) for v in views]

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        q1, q2 = (gather_rows(self.predictor(self.projector(zv))) for zv in z)  # global batch under DDP
        k1, k2 = (gather_rows(k) for k in self.keys(views))
        self._keys_cache = (z[0].detach(), [k1, k2])  # for geometry_problem
        t = self.options["temperature"]
        loss = full_precision(lambda a, b, c, d: mocov3_symmetric(a, b, c, d, t), q1, q2, k1, k2)
        return {"loss": loss, "z": z, "logs": {}}

    @torch.no_grad()
    def on_step_end(self, step: int, total_steps: int) -> None:
        m = cosine_momentum(step, total_steps, self.options["momentum_base"], self.options["momentum_final"])
        self.momentum_encoder.update_(nn.Sequential(self.backbone, self.projector), m)

    def geometry_problem(self, z_views: Sequence[Tensor]):
        """View 1 enters only through its queries q(h(z1)), against the momentum keys of view 2
        from the last ``forward`` on the same batch (call ``method(views)`` first); its own keys
        k1 carry no gradient."""
        self._check_z(z_views)
        (keys,) = cached_targets(self, self._keys_cache, z_views[0])
        return nn.Sequential(self.projector, self.predictor), self.analysis_loss(keys[1])

"""SimSiam (Chen & He 2021) and BYOL (Grill et al. 2020): a predictor on the online branch and
a stop-gradient target, the target being the same network (SimSiam) or its EMA (BYOL)."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor, nn

from headgeom.heads import HeadSpec, get_head_spec
from headgeom.methods.base import SSLMethod, cached_targets, full_precision
from headgeom.methods.ema import EMATarget, cosine_momentum
from headgeom.objectives import negative_cosine, simsiam_loss


class SimSiam(SSLMethod):
    """L = −½[cos(p1, sg(u2)) + cos(p2, sg(u1))], u = h(z), p = q(u) (facebookresearch/simsiam).

    Defaults: the official 3-layer projector d → d → d → 2048 and 2-layer predictor
    k → k/4 → k (2048 → 512 → 2048).
    """

    name = "simsiam"
    RECIPE = "simsiam"
    HAS_PREDICTOR = True
    DESCRIPTION = "SimSiam, symmetric negative cosine with stop-gradient (Chen & He 2021)"
    OBJECTIVE = "negative_cosine"  # declares its low-rank Hessian blocks: no loss HVPs in geometry_problem

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("simsiam_projector", in_dim=in_dim, dim=2048)

    @classmethod
    def default_predictor(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("simsiam_predictor", in_dim=in_dim, pred_dim=max(1, in_dim // 4))

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        u1, u2 = (self.projector(zv) for zv in z)
        p1, p2 = self.predictor(u1), self.predictor(u2)
        return {"loss": full_precision(simsiam_loss, p1, p2, u1, u2), "z": z, "logs": {}}

    def geometry_problem(self, z_views: Sequence[Tensor]):
        # View 1 enters through p1 = q(h(z1)); its appearance as the target sg(u1) carries
        # no gradient, so the view-1 part is ½ negcos(q(h(z1)), sg(u2)).
        (u2,) = self._other_outputs(z_views[:2], self.projector)
        head = nn.Sequential(self.projector, self.predictor)
        return head, self.analysis_loss(u2).scaled(0.5)


def byol_regression(p: Tensor, t: Tensor) -> Tensor:
    """BYOL's ‖p̄ − t̄‖² = 2 − 2 cos(p, sg(t)), batch mean; p, t (N, k) -> scalar."""
    return 2.0 + 2.0 * negative_cosine(p, t)


class BYOL(SSLMethod):
    """L = Σ_{i≠j} mean(2 − 2cos(q(h(z_i)), sg(h'(f'(x_j))))) with the EMA target f', h'
    (Grill et al. 2020 §3.1, L + L̃). Target momentum τ from 0.996 to 1 by the cosine
    schedule, applied in ``on_step_end``. Defaults: BYOL's projector d → 4096 → 256 and
    predictor 256 → 4096 → 256."""

    name = "byol"
    DEFAULTS = {"momentum_base": 0.996, "momentum_final": 1.0}
    RECIPE = "byol"
    HAS_PREDICTOR = True
    DESCRIPTION = "BYOL, EMA target network (Grill et al. 2020)"
    OBJECTIVE = "negative_cosine"  # byol_regression(p, t) = 2 + 2 negative_cosine(p, t)

    def __init__(self, backbone, projector, predictor, spec) -> None:
        super().__init__(backbone, projector, predictor, spec)
        self.target = EMATarget(nn.Sequential(self.backbone, self.projector))
        self._targets_cache: tuple[Tensor, list[Tensor]] | None = None

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("byol", in_dim=in_dim)

    @classmethod
    def default_predictor(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("byol_predictor", in_dim=in_dim, out_dim=in_dim)

    def target_outputs(self, views: Sequence[Tensor]) -> list[Tensor]:
        """h'(f'(x_v)) of the EMA target, detached, one (N, k) per view."""
        return [self.target(v) for v in views]

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        p1, p2 = (self.predictor(self.projector(zv)) for zv in z)
        t1, t2 = self.target_outputs(views)
        self._targets_cache = (z[0].detach(), [t1, t2])  # for geometry_problem
        loss = full_precision(lambda a, b, c, d: byol_regression(a, c) + byol_regression(b, d), p1, p2, t2, t1)
        return {"loss": loss, "z": z, "logs": {}}

    @torch.no_grad()
    def on_step_end(self, step: int, total_steps: int) -> None:
        m = cosine_momentum(step, total_steps, self.options["momentum_base"], self.options["momentum_final"])
        self.target.update_(nn.Sequential(self.backbone, self.projector), m)

    def geometry_problem(self, z_views: Sequence[Tensor]):
        """View 1 enters only through p1 = q(h(z1)), regressed on the target of view 2 from
        the last ``forward`` on the same batch (call ``method(views)`` first)."""
        self._check_z(z_views)
        (targets,) = cached_targets(self, self._targets_cache, z_views[0])
        head = nn.Sequential(self.projector, self.predictor)
        return head, self.analysis_loss(targets[1]).scaled(2.0, 2.0)  # byol_regression(p, targets[1])


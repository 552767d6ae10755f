"""SimCLR (Chen et al. 2020) with any projector: symmetric NT-Xent, and the paper's
one-directional InfoNCE with cross-view negatives only (docs/paper.md §3, "SimCLR for
guillotine/orbits").

Under DDP the projections of every process are gathered with gradient (official SimCLR's
cross-replica concat), so the negatives are those of the global batch and the loss is the
single-process one (headgeom.methods.distributed)."""
from __future__ import annotations

from typing import Any, Sequence

from torch import Tensor

from headgeom.heads import HeadSpec, get_head_spec
from headgeom.methods.base import SSLMethod, full_precision
from headgeom.methods.distributed import gather_rows


class SimCLR(SSLMethod):
    """L = nt_xent(h(z1), h(z2), T): 2N anchors, 2N − 2 negatives each, T = 0.5 (SimCLR CIFAR).

    Default projector: the SimCLR v1 head d → d → 128 (ReLU, biases); the paper's hidden
    width equals the representation width (2048 on ResNet-50).
    """

    name = "simclr"
    DEFAULTS = {"temperature": 0.5}
    RECIPE = "simclr"
    DESCRIPTION = "SimCLR, symmetric NT-Xent (Chen et al. 2020)"
    OBJECTIVE = "nt_xent"  # declares its diagonal Hessian blocks: geometry_problem needs no loss HVPs

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("simclr", in_dim=in_dim, hidden_dim=in_dim, out_dim=128)

    def loss_fn(self, a: Tensor, b: Tensor) -> Tensor:
        return self.objective().fn(a, b, self.options["temperature"])

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        u1, u2 = (gather_rows(self.projector(zv)) for zv in z)  # global batch under DDP
        return {"loss": full_precision(self.loss_fn, u1, u2), "z": z, "logs": {}}


class SimCLROneWay(SimCLR):
    """The paper's SimCLR: info_nce(h(z1), h(z2), T = 0.1), anchors from view 1 only,
    negatives from view 2 only (docs/paper.md §3). Default projector: the paper's head with ReLU
    and BN (d → 2048 → 2048, no biases); default recipe the paper's (rotation 45°)."""

    name = "simclr_oneway"
    DEFAULTS = {"temperature": 0.1}
    RECIPE = "paper_simclr"
    DESCRIPTION = "the paper's one-directional InfoNCE, cross-view negatives only"

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("paper_projector", in_dim=in_dim, activation="relu", bn=True)

    OBJECTIVE = "info_nce"  # info_nce(u, fixed) is separable: the engine's block-diagonal path serves it

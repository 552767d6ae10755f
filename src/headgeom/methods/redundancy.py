"""VICReg (Bardes et al. 2022) and Barlow Twins (Zbontar et al. 2021) with any expander.

Under DDP both see the global batch, as their official code: VICReg gathers the embeddings of
every process with gradient (``FullGatherLayer``) and computes its terms on them; Barlow Twins
standardises with the global batch's moments and sums the cross-correlation c = âᵀb̂ / N
(N the global batch) over processes (``all_reduce(c)``, here with its gradient, so that the
update equals the single-process one; headgeom.methods.distributed)."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from headgeom.heads import HeadSpec, get_head_spec
from headgeom.methods.base import SSLMethod, full_precision
from headgeom.methods.distributed import active_world, all_reduce_sum, gather_rows, global_moments
from headgeom.objectives import barlow_twins, covariance_loss, variance_loss
from headgeom.objectives.vicreg import off_diagonal_sq_sum


class VICReg(SSLMethod):
    """L = λ·inv + μ·var + ν·cov of u = h(z) per view, official 25/25/1
    (facebookresearch/vicreg main_vicreg.py); the three terms are logged. Default expander:
    d → 8192 → 8192 → 8192."""

    name = "vicreg"
    DEFAULTS = {"sim_coeff": 25.0, "std_coeff": 25.0, "cov_coeff": 1.0, "eps": 1e-4}
    RECIPE = "vicreg"
    DESCRIPTION = "VICReg, variance-invariance-covariance (Bardes et al. 2022)"
    OBJECTIVE = "vicreg"

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("vicreg", in_dim=in_dim)

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        a, b = (gather_rows(self.projector(zv)) for zv in z)  # global batch under DDP
        loss, invariance, variance, covariance = full_precision(self._terms, a, b)
        logs = {"invariance": invariance.detach(), "variance": variance.detach(),
                "covariance": covariance.detach()}  # read at log time only: no sync per step
        return {"loss": loss, "z": z, "logs": logs}

    def _terms(self, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(loss, invariance, variance, covariance): the terms of headgeom.objectives.vicreg,
        kept apart so they can be logged."""
        o = self.options
        invariance = (a - b).pow(2).mean()
        ac, bc = a - a.mean(dim=0), b - b.mean(dim=0)
        variance = variance_loss(ac, o["eps"]) / 2 + variance_loss(bc, o["eps"]) / 2
        covariance = covariance_loss(ac) + covariance_loss(bc)
        loss = o["sim_coeff"] * invariance + o["std_coeff"] * variance + o["cov_coeff"] * covariance
        return loss, invariance, variance, covariance


class BarlowTwins(SSLMethod):
    """L = Σ_i (1 − c_ii)² + λ Σ_{i≠j} c_ij², c the cross-correlation of the batch-standardised
    u1, u2 (facebookresearch/barlowtwins main.py), λ = 0.0051. Default projector:
    d → 8192 → 8192 → 8192 without biases."""

    name = "barlow_twins"
    DEFAULTS = {"lambd": 0.0051, "eps": 1e-5}
    RECIPE = "barlow_twins"
    DESCRIPTION = "Barlow Twins, redundancy reduction (Zbontar et al. 2021)"
    OBJECTIVE = "barlow_twins"

    @classmethod
    def default_head(cls, in_dim: int) -> HeadSpec:
        return get_head_spec("barlow_twins", in_dim=in_dim)

    def forward(self, views: Sequence[Tensor]) -> dict[str, Any]:
        views = self.check_views(views)
        z = self.encode(views)
        a, b = (self.projector(zv) for zv in z)
        o = self.options
        if active_world() == 1:
            loss = full_precision(lambda x, y: barlow_twins(x, y, o["lambd"], o["eps"]), a, b)
        else:
            loss = full_precision(self._global_loss, a, b)
        return {"loss": loss, "z": z, "logs": {}}

    def _global_loss(self, a: Tensor, b: Tensor) -> Tensor:
        """The Barlow Twins loss of the global batch from this process's rows a, b (n, D): both
        views standardised with the global moments (one gather), c = Σ_processes âᵀb̂ / N summed
        with gradient; the same number on every process, equal to ``barlow_twins`` of the
        gathered batch."""
        d = a.shape[1]
        mean, var, n = global_moments(torch.cat([a, b], dim=1))
        ab = (torch.cat([a, b], dim=1) - mean) / torch.sqrt(var + self.options["eps"])
        c = all_reduce_sum(ab[:, :d].T @ ab[:, d:] / n)
        diag = torch.diagonal(c)
        return (1 - diag).pow(2).sum() + self.options["lambd"] * off_diagonal_sq_sum(c)

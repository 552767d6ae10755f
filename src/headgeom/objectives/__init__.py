"""SSL objectives as pure functions of tensors (docs/paper.md §1, §3), one file per family.

All are differentiable twice, free of in-place ops and value-dependent branches, so they run
inside ``torch.func.hessian`` / ``jvp`` / ``vmap``; stop-gradients are ``.detach()``. Stateful
parts (DINO centre, EMA teacher) live elsewhere. Each file ends with the ``SPECS`` of its losses
(:class:`ObjectiveSpec`: the loss, its one-view form and the closed forms of its Hessian), which
``OBJECTIVES`` collects.

>>> import torch
>>> from headgeom.objectives import analysis_loss
>>> other = torch.randn(8, 16, dtype=torch.float64)
>>> L = analysis_loss("vicreg", other)          # u ↦ vicreg(u, other), other fixed
>>> torch.func.hessian(L)(torch.randn(8, 16, dtype=torch.float64)).shape
torch.Size([8, 16, 8, 16])
"""
from headgeom.objectives.barlow_twins import (
    barlow_twins, barlow_twins_diagonal_blocks, batch_standardize, cross_correlation,
)
from headgeom.objectives.contrastive import info_nce, nt_xent, nt_xent_diagonal_blocks
from headgeom.objectives.cosine import negative_cosine, simsiam_loss
from headgeom.objectives.declared import AnalysisLoss, as_analysis_loss, frozen, sum_losses
from headgeom.objectives.dino import dino, dino_hessian_structure, dino_pair, teacher_entropies, teacher_probs
from headgeom.objectives.mocov3 import mocov3, mocov3_diagonal_blocks, mocov3_hessian_structure, mocov3_symmetric
from headgeom.objectives.mse import mse_to_target
from headgeom.objectives.registry import OBJECTIVES, analysis_loss, get_objective
from headgeom.objectives.spec import ObjectiveSpec
from headgeom.objectives.vicreg import (
    covariance_loss, off_diagonal_sq_sum, variance_loss, vicreg, vicreg_diagonal_blocks,
)

__all__ = [
    "barlow_twins", "barlow_twins_diagonal_blocks", "batch_standardize", "cross_correlation", "info_nce", "nt_xent", "nt_xent_diagonal_blocks",
    "negative_cosine", "simsiam_loss", "dino", "dino_pair", "dino_hessian_structure", "teacher_probs", "teacher_entropies",
    "mocov3", "mocov3_diagonal_blocks", "mocov3_hessian_structure", "mocov3_symmetric",
    "mse_to_target", "AnalysisLoss", "as_analysis_loss", "frozen", "sum_losses", "OBJECTIVES", "ObjectiveSpec",
    "analysis_loss", "get_objective",
    "covariance_loss",
    "off_diagonal_sq_sum", "variance_loss", "vicreg", "vicreg_diagonal_blocks",
]

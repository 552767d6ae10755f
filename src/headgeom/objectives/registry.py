"""Objectives by name, and the one-view loss u ↦ L(u) that the effective-Hessian engine analyses.

``OBJECTIVES`` maps the names used by the CLI, configs and reports to an :class:`ObjectiveSpec`.
``analysis_loss(name, other)`` fixes everything but one view's head output (docs/paper.md §1):

- ``mse``, ``negative_cosine``: L(u) = loss(u, other), ``other`` the stop-gradient target c.
- ``nt_xent``, ``info_nce``, ``vicreg``, ``barlow_twins``: L(u) = loss(u, other), ``other`` the
  other view's head output held fixed (u is the first argument, so for ``info_nce`` u holds
  the anchors).
- ``dino``: u is the student output of one global view and ``other`` the teacher output of the
  OTHER global view (N, K); L(u) = mean_i Σ_k −softmax((other − centre)/T_t) log_softmax(u/T_s),
  centre zero unless ``center=`` is given.

``other`` is detached and closed over as a constant, so ∇_u L and ∇²_u L are exactly the
residual gradient ρ and loss Hessian of one view with the other view frozen.

Note: with u as the anchors of ``info_nce`` and the other view fixed, each anchor's term
depends on its own row only, so ∇²_u L is block-diagonal over samples even though the loss
is batch-coupled (the coupling runs through the positives/negatives side). Analyse
``lambda u: info_nce(other, u)`` for the coupled side.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from torch import Tensor

from headgeom.objectives.barlow_twins import barlow_twins, barlow_twins_diagonal_blocks
from headgeom.objectives.contrastive import info_nce, nt_xent, nt_xent_diagonal_blocks
from headgeom.objectives.cosine import negative_cosine, negative_cosine_hessian_structure
from headgeom.objectives.declared import AnalysisLoss
from headgeom.objectives.dino import dino, dino_hessian_structure, dino_pair
from headgeom.objectives.mse import mse_hessian_structure, mse_to_target
from headgeom.objectives.vicreg import vicreg, vicreg_diagonal_blocks


@dataclass(frozen=True)
class ObjectiveSpec:
    """A named SSL objective.

    two_view: both arguments are online views that receive gradient (False when the second
      argument is a stop-gradient target: mse, negative_cosine, and dino's teacher).
    batch_coupled: samples interact in the loss (batch statistics, in-batch negatives), so
      H_eff is not block-diagonal over samples.
    cosine: the loss Hessian has the ambient / tangential / MSE-premise readings
      (negative_cosine only).
    """

    name: str
    fn: Callable[..., Tensor]
    two_view: bool
    batch_coupled: bool
    cosine: bool
    description: str


OBJECTIVES: dict[str, ObjectiveSpec] = {
    s.name: s
    for s in (
        ObjectiveSpec("mse", mse_to_target, two_view=False, batch_coupled=False, cosine=False,
                      description="mean_i 1/2 |u_i - sg(c_i)|^2: the MSE premise of Thm 4.1"),
        ObjectiveSpec("negative_cosine", negative_cosine, two_view=False, batch_coupled=False,
                      cosine=True,
                      description="-mean_i cos(p_i, sg(z_i)) (SimSiam/BYOL, facebookresearch/simsiam)"),
        ObjectiveSpec("nt_xent", nt_xent, two_view=True, batch_coupled=True, cosine=False,
                      description="symmetric SimCLR NT-Xent, 2N anchors, 2N-2 negatives, T=0.5"),
        ObjectiveSpec("info_nce", info_nce, two_view=True, batch_coupled=True, cosine=False,
                      description="one-directional InfoNCE, cross-view negatives only, T=0.1 (paper code)"),
        ObjectiveSpec("vicreg", vicreg, two_view=True, batch_coupled=True, cosine=False,
                      description="VICReg 25/25/1 (facebookresearch/vicreg main_vicreg.py)"),
        ObjectiveSpec("barlow_twins", barlow_twins, two_view=True, batch_coupled=True, cosine=False,
                      description="Barlow Twins, lambda=0.0051 (facebookresearch/barlowtwins main.py)"),
        ObjectiveSpec("dino", dino, two_view=False, batch_coupled=False, cosine=False,
                      description="DINO cross-entropy to the centred, sharpened, detached teacher "
                                  "(facebookresearch/dino DINOLoss); centre update kept apart"),
    )
}


# Per-sample loss-Hessian blocks α_i I + U_i B_i U_iᵀ in closed form, for the separable
# objectives (see headgeom.geometry.loss_curvature); the engine verifies them against autograd.
HESSIAN_STRUCTURES: dict[str, Callable[[Tensor, Tensor], tuple]] = {
    "mse": mse_hessian_structure,
    "negative_cosine": negative_cosine_hessian_structure,
    "dino": dino_hessian_structure,  # diagonal + rank 1 (a fourth element, the diagonal)
}


# Diagonal Hessian blocks ∂²L/∂u_i² (N, k, k) in closed form, for the batch-coupled objectives
# whose per-sample pullback blocks would otherwise cost k loss HVPs per sample.
DIAGONAL_BLOCKS: dict[str, Callable[..., Tensor]] = {
    "nt_xent": nt_xent_diagonal_blocks,
    "vicreg": vicreg_diagonal_blocks,
    "barlow_twins": barlow_twins_diagonal_blocks,
}


def get_objective(name: str) -> ObjectiveSpec:
    """The :class:`ObjectiveSpec` registered under ``name``."""
    try:
        return OBJECTIVES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown objective {name!r}; valid names are {sorted(OBJECTIVES)}"
        ) from None


def _keyword_parameters(fn: Callable[..., Tensor], n_positional: int) -> list[str]:
    return list(inspect.signature(fn).parameters)[n_positional:]


def analysis_loss(name: str, other: Tensor, **kwargs: object) -> AnalysisLoss:
    """The one-view loss u ↦ L(u) (N, K) -> scalar for Hessian analysis; see the module docstring.

    Returns an :class:`AnalysisLoss` carrying the objective's closed-form loss-Hessian blocks
    where it has them (``HESSIAN_STRUCTURES``, ``DIAGONAL_BLOCKS``); the engine checks them.

    ``kwargs`` are the objective's hyper-parameters (e.g. ``temperature=0.1``; for dino
    ``center``, ``student_temp``, ``teacher_temp``).
    """
    spec = get_objective(name)
    if not isinstance(other, Tensor):
        raise TypeError(f"other must be a torch.Tensor (N, K); got {type(other).__name__}")
    fn = dino_pair if name == "dino" else spec.fn
    allowed = _keyword_parameters(fn, 2)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(
            f"analysis_loss({name!r}) got unexpected keyword arguments {unknown}; "
            f"{name} accepts {allowed}"
        )
    fixed = other.detach()

    def loss(u: Tensor) -> Tensor:
        return fn(u, fixed, **kwargs)

    loss.__doc__ = f"{name} as a function of one view u (N, K), the other fixed: {spec.description}"
    structure = HESSIAN_STRUCTURES.get(name)
    skw = {} if structure is None else {k: v for k, v in kwargs.items() if k in _keyword_parameters(structure, 2)}
    blocks = DIAGONAL_BLOCKS.get(name)
    return AnalysisLoss(
        loss,
        hessian_structure=None if structure is None else (lambda u: structure(u, fixed, **skw)),
        diagonal_blocks=None if blocks is None else (lambda u: blocks(u, fixed.to(u.dtype), **kwargs)),
    )

"""Objectives by name, and the one-view loss u ↦ L(u) that the effective-Hessian engine analyses.

``OBJECTIVES`` maps the names used by the CLI, configs and reports to an
:class:`~headgeom.objectives.spec.ObjectiveSpec`, collected from the ``SPECS`` of the objective
files (a new objective is its file, with its spec and closed forms, and its ``SPECS`` added to ``OBJECTIVES`` here).
``analysis_loss(name, other)`` fixes everything but one view's head output (docs/paper.md §1):

- ``mse``, ``negative_cosine``: L(u) = loss(u, other), ``other`` the stop-gradient target c.
- ``nt_xent``, ``info_nce``, ``vicreg``, ``barlow_twins``: L(u) = loss(u, other), ``other`` the
  other view's head output held fixed (u is the first argument, so for ``info_nce`` u holds
  the anchors).
- ``dino``: u is the student output of one global view and ``other`` the teacher output of the
  OTHER global view (N, K); L(u) = mean_i Σ_k −softmax((other − centre)/T_t) log_softmax(u/T_s),
  centre zero unless ``center=`` is given.
- ``mocov3``: u the queries (after the predictor), ``other`` the momentum encoder's keys of the
  other view.

``other`` is detached and closed over as a constant (cast to u's dtype at each call), so ∇_u L and ∇²_u L are exactly the
residual gradient ρ and loss Hessian of one view with the other view frozen.

Note: with u as the anchors of ``info_nce`` and the other view fixed, each anchor's term
depends on its own row only, so ∇²_u L is block-diagonal over samples even though the loss
is batch-coupled (the coupling runs through the positives/negatives side). Analyse
``lambda u: info_nce(other, u)`` for the coupled side.
"""
from __future__ import annotations

from typing import Any

from torch import Tensor

from headgeom.objectives.barlow_twins import SPECS as BARLOW_TWINS
from headgeom.objectives.contrastive import SPECS as CONTRASTIVE
from headgeom.objectives.cosine import SPECS as COSINE
from headgeom.objectives.declared import AnalysisLoss
from headgeom.objectives.dino import SPECS as DINO
from headgeom.objectives.mocov3 import SPECS as MOCOV3
from headgeom.objectives.mse import SPECS as MSE
from headgeom.objectives.spec import ObjectiveSpec
from headgeom.objectives.vicreg import SPECS as VICREG

__all__ = ["OBJECTIVES", "ObjectiveSpec", "analysis_loss", "get_objective"]

# every objective file ends with its SPECS; this order is the order of --help and the docs
OBJECTIVES: dict[str, ObjectiveSpec] = {
    spec.name: spec for specs in (MSE, COSINE, CONTRASTIVE, VICREG, BARLOW_TWINS, DINO, MOCOV3) for spec in specs
}


def get_objective(name: str) -> ObjectiveSpec:
    """The :class:`ObjectiveSpec` registered under ``name``."""
    try:
        return OBJECTIVES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown objective {name!r}; valid names are {sorted(OBJECTIVES)}"
        ) from None


def analysis_loss(name: str, other: Tensor, **kwargs: Any) -> AnalysisLoss:
    """The one-view loss u ↦ L(u) (N, K) -> scalar for Hessian analysis; see the module docstring.

    Returns an :class:`AnalysisLoss` carrying the objective's closed-form loss-Hessian blocks
    where its spec has them (``hessian_structure``, ``diagonal_blocks``); the engine checks them.

    ``kwargs`` are the objective's hyper-parameters (e.g. ``temperature=0.1``; for dino
    ``center``, ``student_temp``, ``teacher_temp``).
    """
    return get_objective(name).analysis_loss(other, **kwargs)

"""ObjectiveSpec: a named SSL objective with the closed forms of its loss Hessian, one per objective file.

Each objective file ends with ``SPECS``, the specs of the losses it defines, and
:mod:`headgeom.objectives.registry` collects them into ``OBJECTIVES``: the one place the CLI,
configs, reports and the methods find an objective and what it declares. A spec carries:

- ``fn``: the training loss as called by name (``dino``: all views);
- ``one_view``: the loss of one view u given the other's output, ``(u, other, **options) ->
  scalar``, when it is not ``fn`` itself (``dino``: :func:`headgeom.objectives.dino.dino_pair`);
- the closed forms of ∇²_u of that one-view loss, each ``(u, other, **options)``:
  ``hessian_structure`` (per-sample blocks α_i I + U_i B_i U_iᵀ [+ diag], a separable loss) and
  ``diagonal_blocks`` (the (N, k, k) blocks [∇²_u L]_ii, all a batch-coupled loss needs).

:meth:`ObjectiveSpec.analysis_loss` turns a spec into the :class:`~headgeom.objectives.declared.AnalysisLoss`
the effective-Hessian engine analyses (docs/paper.md §1), which is how both
:func:`headgeom.objectives.analysis_loss` and every method's ``geometry_problem`` build theirs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import Tensor

from headgeom.objectives.declared import AnalysisLoss, Structure, keyword_parameters

__all__ = ["ObjectiveSpec"]


@dataclass(frozen=True)
class ObjectiveSpec:
    """A named SSL objective (module docstring).

    two_view: both arguments are online views that receive gradient (False when the second
      argument is a stop-gradient target: mse, negative_cosine, dino's teacher, mocov3's keys).
    batch_coupled: samples interact in the loss of the first argument (batch statistics, in-batch
      negatives), so ∇²_u L is not block-diagonal over samples (``info_nce`` is marked coupled, but
      with its anchors as u and the other view fixed each anchor's term has its own row only).
    cosine: the loss Hessian has the ambient / tangential / MSE-premise readings
      (negative_cosine only).
    """

    name: str
    fn: Callable[..., Tensor]
    two_view: bool
    batch_coupled: bool
    cosine: bool
    description: str
    one_view: Callable[..., Tensor] | None = None
    hessian_structure: Callable[..., Structure] | None = None
    diagonal_blocks: Callable[..., Tensor] | None = None

    @property
    def pair(self) -> Callable[..., Tensor]:
        """The one-view loss ``(u, other, **options) -> scalar``: ``one_view``, else ``fn``."""
        return self.one_view if self.one_view is not None else self.fn

    @property
    def options(self) -> list[str]:
        """The hyper-parameters the one-view loss takes by keyword (e.g. ``["temperature"]``)."""
        return keyword_parameters(self.pair)

    def analysis_loss(self, other: Tensor, **options: Any) -> AnalysisLoss:
        """u ↦ L(u) (N, k) -> scalar, the other view's output ``other`` held fixed (detached, cast to
        u's dtype), declaring this objective's closed forms; ``options`` are its hyper-parameters
        (:attr:`options`)."""
        if not isinstance(other, Tensor):
            raise TypeError(f"other must be a torch.Tensor (N, K); got {type(other).__name__}")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"analysis_loss({self.name!r}) got unexpected keyword arguments {unknown}; "
                            f"{self.name} accepts {self.options}")
        loss = AnalysisLoss.against(self.pair, other, options, hessian_structure=self.hessian_structure,
                                    diagonal_blocks=self.diagonal_blocks)
        loss.fn.__doc__ = f"{self.name} as a function of one view u (N, K), the other fixed: {self.description}"
        return loss

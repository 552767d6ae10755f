"""The collapse grid's figure (docs/paper.md §4, C5's routes out of collapse in training): the
spread of the head's outputs and λ_min of H_eff against the training step, every seed of every run
(:func:`headgeom.report.trajectories.trajectory_figure`), from
:mod:`headgeom.experiments.collapse_grid`'s cells."""
from __future__ import annotations

from typing import Any

from headgeom.report.trajectories import trajectory_figure


def spread(groups: dict[str, list[dict]], rel_floor: float) -> Any:
    """Spread of L2-normalised u and λ_min(H_eff) (ambient), ``groups``: run name -> its seeds'
    metrics (``steps`` and the series); round-off λ drawn at 0 inside the floor band."""
    return trajectory_figure(groups, [("spread_projector", "spread of L2-normalised u"),
                                      ("lambda_min", "λ_min(H_eff), ambient")],
                             "Collapse grid: spread and λ_min during training", rel_floor=rel_floor)

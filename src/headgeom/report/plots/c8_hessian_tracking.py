"""C8's figures (docs/paper.md §4, H_eff during training): λ_min of H_eff per reading, the spread
of the representations and the parameter-gradient norms against the training step, every seed of
every run (:func:`headgeom.report.trajectories.trajectory_figure`), from
:mod:`headgeom.experiments.c8_hessian_tracking`'s cells.

``groups``: run name -> the metrics of its seeds, each with ``steps`` and the keyed series."""
from __future__ import annotations

from typing import Any, Sequence

from headgeom.report.trajectories import trajectory_figure


def lambda_min(groups: dict[str, list[dict]], readings: Sequence[str], rel_floor: float) -> Any:
    """λ_min(H_eff) under each reading (a panel each), round-off drawn at 0 inside the floor band."""
    keys = [(f"lambda_min[{r}]", f"λ_min(H_eff), {r} reading") for r in readings]
    return trajectory_figure(groups, keys, "C8: λ_min of H_eff during SimSiam training", rel_floor=rel_floor)


def spread(groups: dict[str, list[dict]]) -> Any:
    """The spread of L2-normalised head outputs u and backbone outputs z."""
    return trajectory_figure(groups, [("spread_projector", "spread of L2-normalised u"),
                                      ("spread_z", "spread of L2-normalised z")],
                             "C8: representation spread during training")


def grad_norm(groups: dict[str, list[dict]]) -> Any:
    """‖∂L/∂θ‖ of the head and of the backbone on one log y range (a dead head's 0 stays visible)."""
    return trajectory_figure(groups, [("grad_norm_head", "‖∂L/∂θ_head‖ (projector + predictor)"),
                                      ("grad_norm_backbone", "‖∂L/∂θ_backbone‖")],
                             "C8: parameter-gradient norms during training (step 0: no gradient yet)",
                             log_y=True, share_y=True)

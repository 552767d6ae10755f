"""The activation ablation's figures (docs/paper.md §4, C8 over six activations): λ_min of H_eff
and the projector spread against the training step (:func:`headgeom.report.trajectories.trajectory_figure`),
and kNN accuracy along the head, from :mod:`headgeom.experiments.activation_ablation`'s cells.

``groups``: activation -> the metrics of its seeds."""
from __future__ import annotations

from typing import Any, Sequence

from headgeom.claims.estimates import measured
from headgeom.report.style import chance_line, legend_outside, new_figure, series_style
from headgeom.report.trajectories import trajectory_figure


def lambda_min(groups: dict[str, list[dict]], readings: Sequence[str], rel_floor: float) -> Any:
    """λ_min(H_eff) under each reading (a panel each), round-off drawn at 0 inside the floor band."""
    keys = [(f"lambda_min[{r}]", f"λ_min(H_eff), {r} reading") for r in readings]
    return trajectory_figure(groups, keys, "Activation ablation: λ_min of H_eff", rel_floor=rel_floor)


def spread(groups: dict[str, list[dict]]) -> Any:
    """The spread of L2-normalised projector outputs u."""
    return trajectory_figure(groups, [("spread_projector", "spread of L2-normalised u")],
                             "Activation ablation: projector spread")


def knn(groups: dict[str, list[dict]], activations: Sequence[str], k: int) -> Any:
    """kNN top-1 accuracy (mean ± std over seeds) at each point of the head, a line per activation
    (in ``activations`` order; each cell's ``knn[point]``), chance 1/C when every cell recorded the
    same ``num_classes``; ``k``: the kNN's neighbours, named on the y axis."""
    fig, ax = new_figure(figsize=(8.2, 3.6))
    for i, a in enumerate(activations):
        ms = groups.get(a)
        if not ms:
            continue
        points = max((list(m["knn"]) for m in ms), key=len)
        if not points:
            continue
        means = [measured([m["knn"][p] for m in ms if p in m["knn"]]) for p in points]
        ax.errorbar(range(len(points)), [s["value"] for s in means], yerr=[s["spread"] for s in means], ms=3,
                    capsize=2, label=a, **series_style(i))
        ax.set_xticks(range(len(points)), points, rotation=30, fontsize=7)
    classes = {m.get("num_classes") for ms in groups.values() for m in ms} - {None}  # absent in older results
    if len(classes) == 1:
        chance_line(ax, int(next(iter(classes))))
    ax.set_ylabel(f"kNN top-1 (k={k}), mean ± std over seeds")
    ax.set_title("Activation ablation: kNN accuracy along the head")
    legend_outside(ax)
    return fig

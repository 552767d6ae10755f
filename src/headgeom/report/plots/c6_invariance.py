"""C6's figures (docs/paper.md §2 C6, Prop 5.2): histograms of the Rayleigh quotients on
augmentation tangents against the random and content controls, before and after training, from
:mod:`headgeom.experiments.c6_invariance`'s cells."""
from __future__ import annotations

from typing import Any

import numpy as np

from headgeom.report.markdown import count_noun
from headgeom.report.style import new_figure, series_style, shared_legend

KINDS = ("tangent", "random", "content")
"""The direction kinds of each quotient list: the augmentation tangents and the two controls."""


def quotient_histograms(quotients: list[dict[str, dict[str, list[float]]]], regime: str,
                        metric_names: dict[str, str], stages: tuple[str, ...]) -> Any:
    """log10 |vᵀAv| / ‖v‖², pooled over seeds, a panel per metric (rows) and stage (columns).

    ``quotients``: one dict per seed (a cell's ``quotients``), keyed ``"<stage>.<metric>"``, each
    holding a list of quotients per kind of :data:`KINDS`; ``metric_names``: the metrics in row
    order with their panel titles. Tangents and random directions are filled bars, content a step
    outline, on common bins per panel; a panel whose quotients are all zero stays empty.
    """
    fig, axes = new_figure(len(metric_names), len(stages), figsize=(8.5, 2.4 * len(metric_names)), squeeze=False)
    for i, (name, title) in enumerate(metric_names.items()):
        for j, stage in enumerate(stages):
            ax = axes[i][j]
            pooled = {k: np.abs(np.array([v for q in quotients for v in q[f"{stage}.{name}"][k]], dtype=float))
                      for k in KINDS}
            allv = np.concatenate([v[v > 0] for v in pooled.values()])
            if allv.size == 0:
                continue
            bins = np.linspace(np.log10(allv.min()), np.log10(allv.max()), 40)
            for k, style in (("tangent", dict(color=series_style(0)["color"], alpha=0.6)),
                             ("random", dict(color=series_style(1)["color"], alpha=0.4)),
                             ("content", dict(color=series_style(2)["color"], histtype="step", lw=1.5))):
                vals = pooled[k][pooled[k] > 0]
                ax.hist(np.log10(vals), bins=bins, density=True, label=k, **style)
            ax.set_title(f"{title} — {stage}", fontsize=8)
            ax.set_xlabel("log10 |vᵀAv| / ‖v‖²", fontsize=8)
    shared_legend([ax for row in axes for ax in row])
    fig.suptitle(f"C6 ({regime}): Rayleigh quotients on augmentation tangents vs controls, "
                 f"{count_noun(len(quotients), 'seed')} pooled")
    return fig

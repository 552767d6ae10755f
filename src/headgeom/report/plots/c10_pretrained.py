"""C10's figure (docs/paper.md §4): orbit variance ratios z / h(z) through the official
pretrained heads per augmentation family, from :mod:`headgeom.experiments.c10_pretrained`'s cells."""
from __future__ import annotations

import math
from typing import Any, Sequence

from headgeom.io import json_number
from headgeom.report.style import new_figure, series_style, shared_legend

METRICS = ("selectivity", "trace_ratio_raw", "per_dim_ratio_raw")
"""The ratios drawn (raw z into the head), a marker each."""


def ratios(checkpoints: Sequence[tuple[str, dict]], families: Sequence[str]) -> Any:
    """A panel per family, a group of :data:`METRICS` (value, CI bars) per checkpoint on x, log y
    with the level 1 (no compression) drawn.

    ``checkpoints``: (label, measured cell) per checkpoint, in order; a cell holds
    ``families[fam]["ratios"]["raw"][metric]`` estimates (``value``, ``ci`` as JSON numbers: null
    is NaN, a non-finite CI end draws no bar on that side)."""
    fig, axes = new_figure(1, len(families), figsize=(3.6 * len(families), 3.4), squeeze=False)
    for ax, fam in zip(axes[0], families):
        for j, metric in enumerate(METRICS):
            xs, ys, lo, hi = [], [], [], []
            for i, (_, m) in enumerate(checkpoints):
                est = m["families"][fam]["ratios"]["raw"][metric]
                v, (a, b) = json_number(est["value"]), (json_number(c) for c in est["ci"])
                xs.append(i + (j - 1) * 0.25)
                ys.append(v)
                lo.append(max(v - a, 0.0) if math.isfinite(a) else 0.0)
                hi.append(max(b - v, 0.0) if math.isfinite(b) else 0.0)
            style = series_style(j)
            ax.errorbar(xs, ys, yerr=[lo, hi], linestyle="none", marker=style["marker"], color=style["color"],
                        capsize=3, label=metric)
        ax.axhline(1.0, color="0.5", lw=0.8)
        ax.set_yscale("log")
        ax.set_xticks(range(len(checkpoints)), [label for label, _ in checkpoints], rotation=30, fontsize=7)
        ax.set_title(fam)
    axes[0][0].set_ylabel("z / h(z) orbit variance ratio (CI)")
    shared_legend(list(axes[0]))
    fig.suptitle("C10: orbit variance through the official heads (> 1: compress)")
    return fig

"""C11's figure (docs/paper.md §4, the depth ablation): compression, backbone accuracy and the
class/orbit change against the head's depth, seeds as dots and their mean as a line, from
:mod:`headgeom.experiments.c11_depth`'s cells."""
from __future__ import annotations

import math
from typing import Any, Sequence

from headgeom.claims.estimates import measured
from headgeom.report.style import chance_line, legend_outside, new_figure, series_style

Panel = tuple[str, list[tuple[str, str]], bool]
"""(title, [(metric key, legend label)], log y) of one panel."""


def panels(with_l2: bool) -> list[Panel]:
    """The figure's panels; ``with_l2`` adds the paper's reading h(z/|z|) to the compression panel."""
    return [
        ("orbit compression z / h(z) and selectivity", [("selectivity[raw]", "selectivity, raw z in (decides)"),
                                                         ("trace_ratio[raw]", "compression, raw z in"),
                                                         ("fresh_trace_ratio[raw]", "compression, fresh head")]
         + ([("trace_ratio[l2]", "compression, l2 z in (paper)")] if with_l2 else []), True),
        ("backbone (z) test accuracy", [("knn[z]", "kNN"), ("linear[z]", "linear probe")], False),
        ("class/orbit ratio change h(z) / z", [("class_orbit_change[raw]", "trained, raw z in"),
                                               ("fresh_class_orbit_change[raw]", "fresh head, raw z in")], True),
    ]


def depth(panels: Sequence[Panel], by_key: dict[str, dict[int, dict[int, float]]], depths: Sequence[int],
          num_classes: set[int], setting: str) -> Any:
    """A panel per entry of ``panels``: each metric's seeds as dots (non-finite ones left out) and
    their mean per depth as a line, offset slightly per metric; log panels draw the level 1, the
    others the chance level when every cell has the same ``num_classes``.

    ``by_key[key][depth][seed]``: the metric's value (NaN when absent); ``setting`` is named in
    the title (preset, data)."""
    fig, axes = new_figure(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    depths = sorted(depths)
    for ax, (title, keys, logy) in zip(axes[0], panels):
        for i, (key, label) in enumerate(keys):
            by = by_key[key]
            off = 0.08 * (i - (len(keys) - 1) / 2)
            pts = [(d + off, v) for d in depths for v in by.get(d, {}).values()
                   if v is not None and math.isfinite(v)]
            if pts:
                ax.scatter(*zip(*pts), s=14, alpha=0.6, color=series_style(i)["color"])
            means = [(d + off, measured(list(by[d].values()))["value"]) for d in depths if by.get(d)]
            ax.plot(*zip(*means), label=label, **{**series_style(i), "marker": None})
        if logy:
            ax.axhline(1.0, color="0.6", lw=0.8)
        elif len(num_classes) == 1:
            chance_line(ax, int(next(iter(num_classes))))
        ax.set_xticks(depths)
        ax.set_xlabel("head depth (hidden layers)")
        ax.set_title(title, fontsize=9)
        if logy:
            ax.set_yscale("log")
        legend_outside(ax, "below")
    fig.suptitle(f"C11: depth ablation ({setting}); lines: mean over seeds, dots: seeds")
    return fig

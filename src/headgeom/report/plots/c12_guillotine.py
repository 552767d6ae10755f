"""C12's figure (docs/paper.md §4, the guillotine): probe accuracy at the backbone output z and
after each head layer, one panel per probe, from :mod:`headgeom.experiments.c12_guillotine`'s cells."""
from __future__ import annotations

from typing import Any

from headgeom.claims.estimates import measured
from headgeom.report.style import chance_line, new_figure, series_style, shared_legend


def probes(metrics: list[dict], titles: dict[str, str]) -> Any:
    """Accuracy (mean ± std over seeds) along the head's points, a panel per probe of ``titles``
    (probe -> panel title, in order), with raw z into the head and, where measured, with z/|z|
    (points ``l2z/...``); chance is 1/4 for the rotation probe, 1/C for class probes when every
    cell has the same ``num_classes``.

    ``metrics``: the seeds' cells of one setting, each with ``points`` (the same in every cell)
    and ``accuracy[probe][point]``."""
    points = metrics[0]["points"]
    classes = {m.get("num_classes") for m in metrics} - {None}  # absent in results of older runs
    fig, axes = new_figure(1, len(titles), figsize=(4.4 * len(titles) + 1.8, 3.6), squeeze=False)
    for ax, (probe, title) in zip(axes[0], titles.items()):
        for i, (variant, keep) in enumerate((("raw", lambda p: not p.startswith("l2z/")),
                                             ("l2 input", lambda p: p == "z" or p.startswith("l2z/")))):
            pts = [p for p in points if keep(p)]
            if variant == "l2 input" and len(pts) < 2:
                continue
            stats = [measured([m["accuracy"][probe][p] for m in metrics]) for p in pts]
            ax.errorbar(range(len(pts)), [s["value"] for s in stats], yerr=[s["spread"] for s in stats], ms=3,
                        capsize=2, label=variant, **series_style(i))
            ax.set_xticks(range(len(pts)), [p.removeprefix("l2z/") for p in pts], rotation=30, fontsize=7)
        if probe == "rotation":
            chance_line(ax, 4, "chance, rotation probe: 1/4")
        elif len(classes) == 1:
            c = int(next(iter(classes)))
            chance_line(ax, c, f"chance, class probes: 1/{c}")
        ax.set_title(title)
        ax.set_ylabel("test accuracy (mean ± std over seeds)")
    shared_legend(list(axes[0]))
    fig.suptitle("C12: probe accuracy along the head (z, then each head layer)")
    return fig

"""C1's figure (docs/paper.md §3, Thm 3.1): the isotropy error ε_S per loss × reading, from the
values :mod:`headgeom.experiments.c1_whitening` measured."""
from __future__ import annotations

from typing import Any

from headgeom.report.style import blank_figure, legend_outside, series_style

SERIES = (("iso_error", "ε_S, dim S = n₊ (WᵀAW)", "o", -0.2), ("iso_error_engine", "ε_S (engine)", "x", -0.1),
          ("abs_iso_error", "ε_S, |Λ|, dim S = rank A", "s", 0.1), ("oversize_iso_error", "ε_S, dim S = n₊+1", "^", 0.2),
          ("oversize_fit_error", "best fit, dim S = n₊+1", "v", 0.3))
"""(metric key, legend label, marker, x offset) of each series."""
KEYS = tuple(key for key, *_ in SERIES)
"""The metric keys the figure reads, per setting."""


def isotropy_error(values: dict[str, dict[str, list[float]]], tol: float) -> Any:
    """ε_S per loss/reading on a log scale (exact zeros drawn at 1e-18).

    ``values[setting][key]``: every value of metric ``key`` (one of :data:`KEYS`) over the
    setting's cells, settings in the order drawn; ``tol``: the round-off criterion drawn."""
    order = list(values)
    fig = blank_figure(figsize=(10, 4.8))
    ax = fig.add_subplot()
    for i, (key, label, marker, dx) in enumerate(SERIES):
        xs, ys = [], []
        for j, s in enumerate(order):
            vals = values[s].get(key, [])
            xs += [j + dx] * len(vals)
            ys += [max(v, 1e-18) for v in vals]
        if ys:
            ax.scatter(xs, ys, marker=marker, label=label, alpha=0.7, s=18, color=series_style(i)["color"])
    ax.axhline(tol, color="k", lw=0.8, ls="--", label=f"round-off criterion {tol:g}")
    ax.axhline(1.0, color="grey", lw=0.8, ls=":", label="inertia bound 1")
    ax.set_yscale("log")
    ax.set_xticks(range(len(order)), [s.replace(":", "\n") for s in order], fontsize=8)
    ax.set_ylabel("isotropy error  ‖BᵀH_eff B − I‖₂")
    ax.set_title("C1 (Thm 3.1): local subspace whitening; exact zeros drawn at 1e-18")
    legend_outside(ax)
    return fig

"""C2's figure (docs/paper.md §3, Prop 3.3): the isotropy error of W = g(x0)^(-1/2) against the
distance from x0 on each slice, from :mod:`headgeom.experiments.c2_curvature`'s cells."""
from __future__ import annotations

from typing import Any, Sequence

from headgeom.report.style import legend_outside, new_figure, series_style


def isotropy_vs_distance(by: dict[str, list[dict[str, Any]]], radii: Sequence[float], flat: set[str]) -> Any:
    """Mean over cells (band min-max) of ‖Wᵀ g W − I‖₂ at each radius r > 0, a line per setting.

    ``by[setting]``: the setting's cells (``slice_found``, ``iso_error_max`` one value per radius,
    radius 0 first); ``radii``: the radii in units of ℓ, 0 first; ``flat``: the settings of the
    flat control, drawn as a black dashed line. Zeros are drawn at 1e-17 on the log axis."""
    fig, ax = new_figure(figsize=(6.4, 4.4))
    rel = [r for r in radii if r > 0]
    for n, (setting, rs) in enumerate(by.items()):
        found = [r for r in rs if r["slice_found"]]
        if not found:
            continue
        cols = [[max(r["iso_error_max"][i], 1e-17) for r in found] for i in range(1, len(radii))]
        mean = [sum(c) / len(c) for c in cols]
        is_flat = setting in flat
        style = {"color": "k", "linestyle": "--", "marker": None} if is_flat else series_style(n)
        (line,) = ax.plot(rel, mean, ms=3, label=f"{setting} (n={len(found)})" + (" flat control" if is_flat else ""),
                          **style)
        ax.fill_between(rel, [min(c) for c in cols], [max(c) for c in cols], color=line.get_color(), alpha=0.15)
    ax.set(xscale="log", yscale="log", xlabel="distance from x0, r / ℓ  (ℓ = ‖u0‖_F/√N)",
           ylabel="‖Wᵀ g W − I‖₂, max over directions")
    ax.set_title("C2: isotropy error of W = g(x0)^(-1/2); mean over cells, band min-max", fontsize=9)
    legend_outside(ax)
    return fig

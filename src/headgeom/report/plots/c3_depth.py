"""C3's figure (docs/paper.md §3, Thm 3.2): the fitted isotropy error ε of H_eff along a curve
against the head's width, a line per depth, from :mod:`headgeom.experiments.c3_depth`'s fits."""
from __future__ import annotations

import math
from typing import Any, Sequence

from headgeom.claims.estimates import measured
from headgeom.report.style import legend_outside, new_figure, series_style


def eps_vs_width(eps: dict[tuple[int, int], list[float]], depths: Sequence[int], widths: Sequence[int],
                 threshold: float, loss: str, d: int, k: int) -> Any:
    """ε = max_j κ(H_eff) − 1 (mean, min-max bars over seeds) against width, a line per depth.

    ``eps[(depth, width)]``: ε of each seed's fit (∞ where a block was not positive definite; only
    finite positive values are drawn); ``(0, 0)`` holds the linear head, drawn as a level line
    (mean of its finite values); ``threshold``: the claim's ε threshold; ``loss``, ``d``, ``k``
    name the setting in the title."""
    fig, ax = new_figure(figsize=(5.2, 3.8))
    for n, dp in enumerate(sorted(depths)):
        xs, ys, lo, hi = [], [], [], []
        for w in widths:
            vals = [v for v in eps.get((dp, w), []) if math.isfinite(v) and v > 0]
            if vals:
                s = measured(vals)
                xs.append(w)
                ys.append(s["value"])
                lo.append(s["value"] - s["min"])
                hi.append(s["max"] - s["value"])
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], capsize=3, label=f"depth {dp}", **series_style(n))
    lin = eps.get((0, 0), [])
    finite = [v for v in lin if math.isfinite(v) and v > 0]
    if finite:
        ax.axhline(sum(finite) / len(finite), color="0.3", ls="--",
                   label=f"linear (mean of {len(finite)}/{len(lin)} finite)")
    ax.axhline(threshold, color="tab:red", ls=":", lw=0.8, label="threshold")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("width")
    ax.set_ylabel("ε = max_j κ(H_eff) − 1\n(mean, min-max over seeds)")  # one line is taller than the axes
    ax.set_title(f"C3: fitted isotropy along γ, {loss} loss, d={d}, k={k}", fontsize=9)
    legend_outside(ax)
    return fig

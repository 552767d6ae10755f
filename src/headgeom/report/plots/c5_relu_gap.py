"""C5's figure (docs/paper.md §3, the ReLU gap): the spread of the head's outputs against time
under gradient flow and finite-step GD, one panel per head, from
:mod:`headgeom.experiments.c5_relu_gap`'s runs."""
from __future__ import annotations

from typing import Any

import numpy as np

from headgeom.report.markdown import count_noun
from headgeom.report.style import new_figure, series_style, shared_legend


def spread_vs_time(by_head: dict[str, dict[bool, list[dict]]], kinds: list[str], escape_on: str, seeds: int) -> Any:
    """Mean spread over seeds against time t, per run kind (``"flow"``, ``"gd_lr=..."``).

    ``by_head[head][bn]``: the metrics of the cells of that head without/with BatchNorm (each with
    ``runs[kind]["t"]`` and ``runs[kind]["spread_<escape_on>"]``, None where a run stopped); a
    panel per head, in order. A colour per kind; BN runs take the other line styles. The mean is
    NaN once any seed stopped or diverged, so a curve ends there instead of jumping."""
    heads = list(by_head)
    fig, axes = new_figure(1, max(1, len(heads)), figsize=(4 * max(1, len(heads)), 3.4), squeeze=False)
    for ax, h in zip(axes[0], heads):
        for b, ms in by_head[h].items():
            for i, k in enumerate(kinds):
                if not ms:
                    continue
                curves = np.array([[np.nan if v is None else v for v in m["runs"][k][f"spread_{escape_on}"]]
                                   for m in ms], dtype=np.float64)
                mean = curves.mean(0)
                style = series_style(i, variant=int(bool(b)))
                ax.plot(ms[0]["runs"][k]["t"], mean, color=style["color"], linestyle=style["linestyle"],
                        label=f"{k}{' +BN' if b else ''}")
        ax.set_yscale("log")
        ax.set_title(h)
        ax.set_xlabel("time t (GD: step × lr)")
    axes[0][0].set_ylabel(f"{escape_on} spread (mean over {count_noun(seeds, 'seed')})")
    shared_legend(list(axes[0]))
    return fig

"""C9's figure (docs/paper.md §4): orbit compression and selectivity at the head output per
augmentation family, one point per seed with its 95% CI, from
:mod:`headgeom.experiments.c9_orbit_compression`'s cells."""
from __future__ import annotations

from typing import Any, Sequence

from headgeom.report.markdown import count_noun
from headgeom.report.style import new_figure, series_style, shared_legend

ROWS = (("orbit compression spread(z)/spread(h)",
         (("l2", "compression", "paper protocol h(z/|z|)"), ("raw", "compression", "corrected h(raw z)"),
          ("raw", "fresh_head_compression", "fresh head (raw)"),
          ("raw", "random_directions_compression", "random directions (raw)"))),
        ("selectivity = compression / global ratio",
         (("l2", "selectivity", "paper protocol h(z/|z|)"), ("raw", "selectivity", "corrected h(raw z)"))))
"""Per row of panels: the y label and its series (head input variant, measure, legend label)."""


def estimate_bars(est: dict) -> tuple[float, float, float]:
    """(value, distance down to the CI's low end, up to its high end) of an estimate entry; a missing
    CI end gives NaN, a CI not containing the value a zero-length side."""
    ci = [float("nan") if x is None else float(x) for x in (est.get("ci") or [None, None])]
    return est["value"], max(est["value"] - ci[0], 0.0), max(ci[1] - est["value"], 0.0)


def compression(by_backbone: dict[str, list[dict]], families: Sequence[str]) -> Any:
    """A column per backbone (its seeds' cells: ``families[fam][variant][measure]`` estimate
    entries with ``value`` and ``ci``), a row per entry of :data:`ROWS`; families on x, a point
    per seed (offset slightly), log y with the level 1 (no compression) drawn."""
    nb = len(by_backbone)
    fig, axes = new_figure(2, nb, figsize=(5.2 * nb + 2.4, 7.2), squeeze=False)
    for col, (b, runs) in enumerate(by_backbone.items()):
        for row, (ylabel, series) in enumerate(ROWS):
            ax = axes[row][col]
            for j, (v, k, label) in enumerate(series):
                style = series_style(j)
                for s, m in enumerate(runs):
                    bars = [estimate_bars(m["families"][fam][v][k]) for fam in families]
                    xs = [i + 0.12 * (j - (len(series) - 1) / 2) + 0.03 * s for i in range(len(bars))]
                    ax.errorbar(xs, [y for y, _, _ in bars],
                                yerr=[[lo for _, lo, _ in bars], [hi for _, _, hi in bars]], linestyle="none",
                                marker=style["marker"], ms=3, capsize=2, color=style["color"],
                                label=label if s == 0 else None)
            ax.axhline(1.0, color="0.5", lw=0.8)
            ax.set_yscale("log")
            ax.set_xticks(range(len(families)), families)
            ax.set_title(f"{b} ({count_noun(len(runs), 'seed')})")
            ax.set_ylabel(f"{ylabel}, 95% CI", fontsize=8)
    for row in axes:  # each row plots its own measures: a legend beside each row, off the points
        shared_legend(list(row))
    fig.suptitle("C9: orbits at the head output per family (one point per seed); > 1 = compressed / selective")
    return fig

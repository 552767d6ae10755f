"""Spectra of the tangent metric: log10 Rayleigh quotients of augmentation tangents against random
directions, per family and metric (docs/paper.md §2 C6; plotting kept apart from computing).

Reads only the JSON result of :func:`headgeom.orbits.tangent_metric.tangent_metric_analysis`
(the per-image ``log10_tangent`` / ``log10_random`` lists), so a saved result can be re-plotted.
"""
from __future__ import annotations

import math

from headgeom.report.style import new_figure

__all__ = ["plot_tangent_spectra"]

_LABELS = {"backbone": "backbone J_bᵀJ_b\n(pixel space)", "end_to_end": "head∘backbone\n(pixel space)",
           "head_G": "head G = J_hᵀJ_h\n(z-space)", "head_loss": "head J_hᵀ∇²L J_h\n(z-space)"}
_ORDER = ("backbone", "end_to_end", "head_G", "head_loss")


def _finite(values: list) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def plot_tangent_spectra(result: dict):
    """A Figure with one row per family and one panel per metric present: box plots of log10|q|
    for the tangents and for the random directions (n per box in the tick label; zero quotients,
    log10 = -inf, are counted in the title)."""
    families = result.get("families") if isinstance(result, dict) else None
    if not families:
        raise ValueError("plot_tangent_spectra needs the dict returned by tangent_metric_analysis "
                         "(with a non-empty 'families' entry)")
    metrics = [m for m in _ORDER if any(isinstance(e.get(m), dict) for e in families.values())]
    if not metrics:
        raise ValueError("the result holds no quotient metrics to plot (expected some of "
                         f"{list(_ORDER)})")
    fig, axes = new_figure(len(families), len(metrics), squeeze=False,
                           figsize=(2.9 * len(metrics), 2.6 * len(families)))
    for row, (fam, entry) in enumerate(families.items()):
        for col, metric in enumerate(metrics):
            ax = axes[row][col]
            summary = entry.get(metric)
            if not isinstance(summary, dict) or "log10_tangent" not in summary:
                ax.set_axis_off()
                continue
            t, r = _finite(summary["log10_tangent"]), _finite(summary["log10_random"])
            data = [v if v else [float("nan")] for v in (t, r)]
            ax.boxplot(data, widths=0.6, showfliers=True)
            ax.set_xticks([1, 2], [f"tangent\nn={len(t)}", f"random\nn={len(r)}"], fontsize=7)
            zeros = summary["tangent"]["n_zero"] + summary["random"]["n_zero"]
            ratio = summary.get("ratio_of_medians")
            title = f"{fam}: " + (f"ratio {ratio:.3g}" if ratio is not None else "ratio n/a")
            ax.set_title(title + (f", {zeros} zero" if zeros else ""), fontsize=8)
            ax.set_ylabel("log10 |q|", fontsize=7)
            if row == 0:
                ax.annotate(_LABELS[metric], (0.5, 1.22), xycoords="axes fraction", ha="center",
                            fontsize=8)
            ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig

"""Figures of ``headgeom analyze`` (headgeom.orbits.pipeline and headgeom.orbits.external):
2-D PCA pictures of orbits (docs/paper.md §3 "Orbits") and spectra of the tangent metric
(docs/paper.md §2 C6).

- :func:`plot_orbit_pca` draws the panels :func:`headgeom.orbits.pca.orbit_pca_panels` computes;
  these are laid out by the constrained layout of headgeom.report.style and saved without the
  tight bounding box (``figure_png_bytes(fig, bbox_inches=None)`` of :mod:`headgeom.report.figures`).
- :func:`plot_tangent_spectra` reads only the JSON result of
  :func:`headgeom.orbits.tangent_metric.tangent_metric_analysis` (the per-image ``log10_tangent``
  / ``log10_random`` lists), so a saved result can be re-plotted.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from headgeom.report.style import new_figure, series_style

__all__ = ["plot_orbit_pca", "plot_tangent_spectra"]


def plot_orbit_pca(panels: Sequence[Mapping[str, Any]], title: str = "") -> Any:
    """One panel per point: each orbit a line (start marked), coloured by class (by orbit
    without classes); axes say each component's share of the variance.

    A panel is ``{"point": name, "dim": D, "coords": (n, K, 2) numbers, "explained": [PC1, PC2]
    fractions, "classes": n class ids or None}`` (:func:`headgeom.orbits.pca.orbit_pca_panels`)."""
    if not panels:
        raise ValueError("plot_orbit_pca needs at least one panel (headgeom.orbits.pca.orbit_pca_panels); got none")
    fig, axes = new_figure(1, len(panels), figsize=(3.2 * len(panels), 3.2), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        coords, frac, classes = panel["coords"], panel["explained"], panel["classes"]
        for i, orbit in enumerate(coords):
            # one colour and line style per class (per orbit without labels): distinct for up to 40
            style = series_style(classes[i] if classes is not None else i)
            xs, ys = [c[0] for c in orbit], [c[1] for c in orbit]
            ax.plot(xs, ys, color=style["color"], linestyle=style["linestyle"], lw=1, alpha=0.8)
            ax.plot(xs[:1], ys[:1], "o", color=style["color"], ms=3)
        ax.set_title(f"{panel['point']} (D={panel['dim']})", fontsize=9)
        ax.set_xlabel(f"PC1 {100 * float(frac[0]):.0f}%", fontsize=8)
        ax.set_ylabel(f"PC2 {100 * float(frac[1]):.0f}%", fontsize=8)
        ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


_LABELS = {"backbone": "backbone J_bᵀJ_b\n(pixel space)", "end_to_end": "head∘backbone\n(pixel space)",
           "head_G": "head G = J_hᵀJ_h\n(z-space)", "head_loss": "head J_hᵀ∇²L J_h\n(z-space)"}
_ORDER = ("backbone", "end_to_end", "head_G", "head_loss")


def _finite(values: list) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def plot_tangent_spectra(result: dict) -> Any:
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
    return fig

"""2-D PCA pictures of orbits (plotting kept apart from computing; docs/paper.md §3 "Orbits").

:func:`pca_project` is the computation (pure, tested); :func:`plot_orbit_pca` draws one panel
per feature point on a figure of headgeom.report.style.new_figure and returns it (the caller saves
it, e.g. :func:`figure_png_bytes` through headgeom.io.atomic_write_bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from headgeom.orbits.metrics import _orbits, l2_normalise
from headgeom.report.figures import figure_png_bytes as _png_bytes
from headgeom.report.style import new_figure, series_style

__all__ = ["figure_png_bytes", "pca_project", "plot_orbit_pca"]


def pca_project(f: Tensor, normalise: bool = True, n_components: int = 2) -> tuple[Tensor, Tensor]:
    """Project all orbit points (N, K, D) on their top principal directions.

    Returns (coords (N, K, n_components), explained fraction of the total variance per
    component). Features are L2-normalised first by default (the metrics' space).
    """
    u = _orbits(f, min_steps=1)
    if normalise:
        u = l2_normalise(u)
    n, k, d = u.shape
    x = u.reshape(n * k, d)
    x = x - x.mean(dim=0)
    _, s, vh = torch.linalg.svd(x, full_matrices=False)
    r = min(n_components, vh.shape[0])
    coords = torch.zeros(n * k, n_components, dtype=torch.float64)
    coords[:, :r] = x @ vh[:r].T
    total = float(s.pow(2).sum())
    frac = torch.zeros(n_components, dtype=torch.float64)
    if total > 0:
        frac[:r] = s[:r].pow(2) / total
    return coords.reshape(n, k, n_components), frac


def plot_orbit_pca(features: dict[str, Tensor], labels: Tensor | None = None,
                   points: Sequence[str] | None = None, max_orbits: int = 15,
                   title: str = ""):
    """One panel per point: each orbit a line (start marked), coloured by class."""
    names = list(features) if points is None else list(points)
    missing = [p for p in names if p not in features]
    if missing:
        raise ValueError(f"unknown point(s) {missing}; available: {list(features)}")
    fig, axes = new_figure(1, len(names), figsize=(3.2 * len(names), 3.2), squeeze=False)
    for ax, p in zip(axes[0], names):
        f = features[p][:max_orbits]
        coords, frac = pca_project(f)
        for i in range(coords.shape[0]):
            # one colour and line style per class (per orbit without labels): distinct for up to 40
            style = series_style(int(labels[i]) if labels is not None else i)
            ax.plot(coords[i, :, 0], coords[i, :, 1], color=style["color"], linestyle=style["linestyle"], lw=1,
                    alpha=0.8)
            ax.plot(coords[i, :1, 0], coords[i, :1, 1], "o", color=style["color"], ms=3)
        ax.set_title(f"{p} (D={f.shape[-1]})", fontsize=9)
        ax.set_xlabel(f"PC1 {100 * float(frac[0]):.0f}%", fontsize=8)
        ax.set_ylabel(f"PC2 {100 * float(frac[1]):.0f}%", fontsize=8)
        ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def figure_png_bytes(fig) -> bytes:
    """PNG bytes of a Figure (closed after), for atomic writing: headgeom.report.figures.figure_png_bytes
    without the tight bounding box (these panels are laid out by tight_layout already)."""
    return _png_bytes(fig, bbox_inches=None)

"""2-D PCA projections of orbits, the data of the orbit figures (docs/paper.md §3 "Orbits").

:func:`pca_project` is the computation (pure, tested against numpy); :func:`orbit_pca_panels`
gives, per feature point, the plain numbers :func:`headgeom.report.plots.orbits.plot_orbit_pca`
draws (computing here, drawing in headgeom.report):

    fig = plot_orbit_pca(orbit_pca_panels(features, labels, points=["z", "h"]), title="rotation orbits")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from headgeom.orbits.metrics import _orbits, l2_normalise

__all__ = ["orbit_pca_panels", "pca_project"]


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


def orbit_pca_panels(features: dict[str, Tensor], labels: Tensor | Sequence[int] | None = None,
                     points: Sequence[str] | None = None, max_orbits: int = 15) -> list[dict[str, Any]]:
    """One panel per point (all of ``features`` by default, or ``points`` in that order) of the
    first ``max_orbits`` orbits: ``{"point", "dim" (D), "coords" (n, K, 2) nested lists of the
    L2-normalised features' 2-D PCA, "explained" [PC1, PC2] variance fractions, "classes" (n class
    ids from ``labels``, or None)}``."""
    names = list(features) if points is None else list(points)
    missing = [p for p in names if p not in features]
    if missing:
        raise ValueError(f"unknown point(s) {missing}; available: {list(features)}")
    panels = []
    for p in names:
        f = features[p][:max_orbits]
        coords, frac = pca_project(f)
        n = coords.shape[0]
        if labels is not None and len(labels) < n:
            raise ValueError(f"{len(labels)} labels for {n} orbits of point {p!r}; give one class id per orbit")
        panels.append({"point": p, "dim": int(f.shape[-1]), "coords": coords.tolist(), "explained": frac.tolist(),
                       "classes": None if labels is None else [int(labels[i]) for i in range(n)]})
    return panels

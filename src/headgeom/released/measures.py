"""What the claims need, computed from the released records with headgeom's own measures
(docs/paper.md §3.8; claims C9, C11, C12).

No metric or criterion is written here: the orbit measures are those of
:func:`headgeom.orbits.compression.compression_measures` (compression, global ratio,
selectivity = compression / global ratio, class/orbit change, ...), with the bootstrap over images
of headgeom.orbits.bootstrap (stratified by class, one resample matrix for every measure of an
orbit set, so numerator and denominator move together), exactly as for headgeom's own runs and
for ``headgeom analyze FILE.npz``. The released z and h are stored L2-normalised and the head was
fed the normalised z (docs/paper.md §3.6), which the metrics' own normalisation leaves unchanged.

The random-head control of the single-run standard (headgeom.orbits.random_heads) is built from the
authors' own head architectures, as their code at the pinned commit builds them (the files hold z and h, not
the heads): C9's projector, ``ProjectionHead(input_dim, 2048, 2048, 'relu', use_bn=True)`` of
experiments.py (:func:`orbit_head`), and the depth ablation's ``FlexibleProjectionHead(num_layers=d,
activation='swish', use_bn=True)`` of head_depth_ablations.py, whose depth counts Linear layers (depth 1 is
one Linear and BN; :func:`depth_head`). Their width is the stored h's (2048: hidden_dim = output_dim
there). The heads were fed the normalised z, as stored.

Functions return JSON-able estimates ``{value, ci, level, n_boot, ...}``; verdicts are the claim
rules' business (headgeom.claims), not this module's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from headgeom.orbits.bootstrap import Resamples, bootstrap_counts, bootstrap_indices
from headgeom.orbits.compression import compression_measures
from headgeom.orbits.random_heads import random_head_control
from headgeom.released.depth import DepthAblation
from headgeom.released.orbits import OrbitGrid, Orbits
from headgeom.released.probes import Guillotine

__all__ = ["DepthRow", "ProbeGap", "depth_head", "depth_trend", "guillotine_gaps", "orbit_head", "orbit_measures"]

HEAD_POINT = "h"


def orbit_head(grid: OrbitGrid) -> str:
    """The authors' C9 projector for these orbits as a head string (module docstring)."""
    d_z, d_h = grid.z.shape[-1], grid.h.shape[-1]
    return f"{d_z}-{d_h}-{d_h}:relu:nobias:bn:last=bn"


def depth_head(depth: int, grid: OrbitGrid) -> str:
    """The authors' depth-``depth`` head of the ablation (``depth`` Linear layers, SiLU, BN; module docstring)."""
    d_z, d_h = grid.z.shape[-1], grid.h.shape[-1]
    return f"{d_z}-" + "-".join([str(d_h)] * int(depth)) + ":silu:nobias:bn:last=bn"


def orbit_measures(grid: OrbitGrid | Orbits, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
                   levels: tuple[float, ...] = (), head: str | None = None, draws: int = 20,
                   keep_rows: bool = False) -> dict[str, dict[str, Any]]:
    """Every C9 measure of headgeom.orbits.compression for the orbits' h against z, and with ``head`` the
    random-head control of that architecture (``random_heads``, headgeom.orbits.random_heads: ``draws``
    heads fed the normalised z as the authors' were, on the same resamples; ``keep_rows`` keeps the
    selectivities at every resample row).

    ``grid``: an :class:`~headgeom.released.orbits.OrbitGrid` (or the :class:`Orbits` holding it),
    z (N, K, D_z) and h (N, K, D_h) with labels (N,). The bootstrap resamples the N images within
    their classes (``n_boot`` replicates from ``seed``); intervals also at ``levels`` (``ci_at``).
    Returns measure -> estimate, among them ``compression``, ``global_ratio``, ``selectivity``,
    ``class_orbit_z``, ``class_orbit_h`` and ``class_orbit_change``.
    """
    g = grid.grid if isinstance(grid, Orbits) else grid
    features = {"z": torch.from_numpy(g.z).to(torch.float64), HEAD_POINT: torch.from_numpy(g.h).to(torch.float64)}
    labels = torch.from_numpy(g.labels).to(torch.int64)
    n = g.images
    counts = bootstrap_counts(bootstrap_indices(n, n_boot, seed, strata=labels), n)
    out = compression_measures(features, labels, counts, HEAD_POINT, level=level, levels=levels)
    if head is not None:
        out["random_heads"] = random_head_control(features["z"], features[HEAD_POINT], head, Resamples(counts, labels),
                                                  head_input="l2", draws=draws, seed=seed, level=level, levels=levels,
                                                  keep_rows=keep_rows)
        out["random_heads"]["head"] = head
    return out


@dataclass(frozen=True)
class DepthRow:
    """One head depth of the ablation: its orbit measures and the linear probe accuracies."""

    depth: int
    measures: dict[str, dict[str, Any]]
    acc_backbone_linear: float
    acc_head_linear: float

    @property
    def compression(self) -> dict[str, Any]:
        return self.measures["compression"]

    @property
    def selectivity(self) -> dict[str, Any]:
        return self.measures["selectivity"]


def depth_trend(ablations: Sequence[DepthAblation], *, n_boot: int = 1000, seed: int = 0,
                level: float = 0.95) -> tuple[DepthRow, ...]:
    """C11: per head depth (ascending), compression and selectivity with intervals (the same
    ``seed`` for every depth; each depth's model and images are its own) and backbone/head accuracy."""
    rows = [DepthRow(depth=a.depth, measures=orbit_measures(a.grid, n_boot=n_boot, seed=seed, level=level),
                     acc_backbone_linear=a.acc_backbone_linear, acc_head_linear=a.acc_head_linear)
            for a in ablations]
    return tuple(sorted(rows, key=lambda r: r.depth))


@dataclass(frozen=True)
class ProbeGap:
    """C12 for one run: probe accuracy on the backbone output z against the head output h."""

    dataset: str
    backbone: str
    probe: str  # "linear" or "mlp"
    backbone_acc: float
    head_acc: float

    @property
    def gap(self) -> float:
        """backbone − head accuracy (> 0: the backbone output probes better)."""
        return self.backbone_acc - self.head_acc


def guillotine_gaps(g: Guillotine) -> tuple[ProbeGap, ProbeGap]:
    """C12: the linear and the MLP probe, backbone against head (one accuracy each, no seeds)."""
    return (ProbeGap(g.dataset, g.backbone, "linear", g.backbone_linear, g.head_linear),
            ProbeGap(g.dataset, g.backbone, "mlp", g.backbone_mlp, g.head_mlp))

"""One model, one dataset: the whole ``headgeom analyze`` computation (claims C6, C7,
C9-C11).

:func:`select_images` draws the analysed test images (seeded, balanced over classes);
:func:`run_analysis` extracts every family's orbits (headgeom.orbits.extract), computes all
metrics with bootstrap CIs and controls (headgeom.orbits.analyze), draws the orbit PCA panels
(computed by headgeom.orbits.pca, drawn by headgeom.report.plots.orbits) and, unless skipped,
runs the tangent-metric and Fisher analysis of headgeom.orbits.tangent_metric on a smaller image
set. It returns the JSON-able result and the
figures as PNG bytes; writing is the caller's (the CLI writes atomically).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from headgeom.augment.families import get_family, orbit_values
from headgeom.data import ImageDataset
from headgeom.orbits.analyze import DEFINITIONS, analyze_orbit_features, orbit_protocol
from headgeom.orbits.extract import extract_orbits
from headgeom.orbits.model_input import ModelInput, prepare_images
from headgeom.orbits.pca import orbit_pca_panels
from headgeom.orbits.report import last_points
from headgeom.orbits.tangent_metric import tangent_metric_analysis
from headgeom.report.figures import figure_png_bytes
from headgeom.report.plots.orbits import plot_orbit_pca, plot_tangent_spectra

__all__ = ["AnalysisOptions", "figure_points", "run_analysis", "select_images"]


@dataclass(frozen=True)
class AnalysisOptions:
    """What ``headgeom analyze`` measures (defaults: a CPU-friendly run of the paper's protocol)."""

    families: tuple[str, ...]
    steps: int = 12
    head_input: tuple[str, ...] = ("raw",)
    value_ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    n_boot: int = 1000
    level: float = 0.95
    seed: int = 0
    controls: bool = True
    batch_size: int = 128
    tangents: bool = True
    tangent_images: int = 16
    tangent_loss: str = "negative_cosine"
    tangent_random: int = 8
    tangent_rel_tol: float = 1e-6
    tangent_batch_size: int = 16


def select_images(data: ImageDataset, n: int, seed: int) -> Tensor:
    """Indices (n,) of a seeded draw balanced over classes, in round-robin order.

    Classes are visited round-robin over a seeded permutation of each class's images, so every
    class gets ⌊n / C⌋ or ⌈n / C⌉ images while it has them (D_inter needs several classes), and
    every prefix is balanced too: the figures' first orbits and the tangent images (the first
    ``tangent_images``) cover the classes.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"--images must be an int >= 2 (the bootstrap resamples images), got {n!r}")
    if n > len(data):
        raise ValueError(f"--images {n} exceeds the {len(data)} images of {data.name}/{data.split}; "
                         f"pass --images <= {len(data)}")
    gen = torch.Generator().manual_seed(int(seed))
    perm = torch.randperm(len(data), generator=gen)
    per_class = [perm[data.labels[perm] == c].tolist() for c in range(data.num_classes)]
    chosen: list[int] = []
    depth = 0
    while len(chosen) < n:
        for idx in per_class:
            if depth < len(idx) and len(chosen) < n:
                chosen.append(idx[depth])
        depth += 1
    return torch.tensor(chosen, dtype=torch.long)


def figure_points(points: Sequence[str]) -> list[str]:
    """z and the last point of each head and input variant (h(z); p(h(z)); h(z/‖z‖) ...)."""
    return ["z"] + last_points(list(points))


class _Counting(nn.Module):
    """backbone(x), then ``bar.update(len(x))``: progress in images through the backbone."""

    def __init__(self, backbone: Callable[[Tensor], Tensor], bar: Any) -> None:
        super().__init__()
        self.backbone, self.bar = backbone, bar

    def forward(self, x: Tensor) -> Tensor:
        z = self.backbone(x)
        self.bar.update(int(x.shape[0]))
        return z


def _backbone_images(opts: AnalysisOptions, n: int) -> int:
    """Images the orbit extraction passes through the backbone: N·K per family, plus N clean
    anchors when the family's identity is not on the grid (as headgeom.orbits.extract does)."""
    total = 0
    for name in opts.families:
        fam = get_family(name)
        xi = orbit_values(fam, opts.steps, opts.value_ranges.get(name))
        on_grid = any(math.isclose(v, fam.identity_value, rel_tol=0.0, abs_tol=1e-9) for v in xi)
        total += n * (opts.steps + (0 if on_grid else 1))
    return total


def _protocol(opts: AnalysisOptions, n_images: int, mi: ModelInput) -> dict[str, Any]:
    """analyze_orbits' protocol record plus the options only ``headgeom analyze`` sets."""
    return {**orbit_protocol(n_images, opts.steps, opts.families, opts.head_input, opts.n_boot, opts.seed,
                             opts.level, stratified=True, mean=mi.mean, std=mi.std),
            "controls": opts.controls, "value_ranges": {k: list(v) for k, v in opts.value_ranges.items()}}


def run_analysis(mi: ModelInput, data: ImageDataset, indices: Tensor, opts: AnalysisOptions, *,
                 device: torch.device | str = "cpu",
                 progress: Callable[[int], Any] | None = None,
                 say: Callable[[str], None] = lambda msg: None) -> tuple[dict, dict[str, bytes]]:
    """Orbit (and tangent-metric) analysis of ``data``'s images at ``indices``.

    Returns (result, figures): result {"protocol", "definitions", "families", "tangent_metric",
    "seconds"}; figures {file name: PNG bytes}. ``progress(total)`` returns a bar (``update(n)``,
    ``close()``, e.g. tqdm) advanced by the images each backbone pass takes, over all families.
    """
    for fam in opts.families:
        get_family(fam)  # unknown names fail before any forward pass
    images = prepare_images(data.images[indices], mi.size)
    labels = data.labels[indices]
    head_chain = mi.heads or None
    out: dict[str, Any] = {"protocol": _protocol(opts, len(indices), mi),
                           "definitions": DEFINITIONS, "families": {}}
    figures: dict[str, bytes] = {}
    seconds: dict[str, float] = {}
    bar = progress(_backbone_images(opts, len(indices))) if progress is not None else None
    backbone = mi.backbone if bar is None else _Counting(mi.backbone, bar)
    for fam in opts.families:
        t0 = time.perf_counter()
        of = extract_orbits(backbone, images, fam, opts.steps, head_chain,
                            head_input=list(opts.head_input),
                            value_range=opts.value_ranges.get(fam), batch_size=opts.batch_size,
                            device=device, mean=mi.mean, std=mi.std)
        out["families"][fam] = analyze_orbit_features(
            of, labels, heads=head_chain, n_boot=opts.n_boot, seed=opts.seed, level=opts.level,
            controls=opts.controls, device=device)
        fig = plot_orbit_pca(orbit_pca_panels(of.features, labels, points=figure_points(of.points)),
                             title=f"{fam} orbits ({of.units}), 2-D PCA of L2-normalised features")
        figures[f"orbits_{fam}.png"] = figure_png_bytes(fig, bbox_inches=None)  # constrained layout
        seconds[f"orbits_{fam}"] = time.perf_counter() - t0
    if bar is not None:
        bar.close()
    out["tangent_metric"] = _tangents(mi, images, opts, figures, seconds, say)
    out["seconds"] = seconds
    return out, figures


def _tangents(mi: ModelInput, images: Tensor, opts: AnalysisOptions, figures: dict[str, bytes],
              seconds: dict[str, float], say: Callable[[str], None]) -> dict[str, Any]:
    if not opts.tangents:
        return {"skipped": "--no-tangents"}
    if "head" not in mi.heads:
        return {"skipped": "the checkpoint holds no projection head: no head metric to pull back"}
    t0 = time.perf_counter()
    n = min(opts.tangent_images, images.shape[0])
    say(f"tangent metric and Fisher ranks on {n} images x {len(opts.families)} families (float64)")
    result = tangent_metric_analysis(mi.backbone, mi.heads["head"], images[:n], list(opts.families),
                      loss=opts.tangent_loss, n_random=opts.tangent_random,
                      rel_tol=opts.tangent_rel_tol, mean=mi.mean, std=mi.std, seed=opts.seed,
                      batch_size=opts.tangent_batch_size)
    seconds["tangent_metric"] = time.perf_counter() - t0
    figures["tangent_spectra.png"] = figure_png_bytes(plot_tangent_spectra(result))
    return result

"""The paper's 4-way rotation-prediction probe (docs/paper.md §2-3, claim C12).

Every image is shown at 0°, 90°, 180° and 270° (``torch.rot90`` with k = 0, 1, 2, 3 over the
spatial dims (H, W): counter-clockwise as displayed with row 0 at the top), features are read
at each point of the guillotine sweep, and a linear probe (the recipe of
:mod:`headgeom.eval.linear_probe`) predicts k. Chance is 25%. The paper reports this probe,
not a class probe (docs/paper.md §4 pitfall 9); :func:`headgeom.eval.evaluate.evaluate_model`
reports the class probes beside it.

Rotated copies are built batch by batch on the device inside the feature extractor, so the
4× larger image set is never materialised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from headgeom.data import ImageDataset
from headgeom.eval.features import Heads, extract_features
from headgeom.eval.linear_probe import LinearProbeConfig, linear_probe_accuracy

__all__ = ["ROTATIONS", "rotate_images", "rotation_dataset", "rotation_features",
           "rotation_probe"]

ROTATIONS = (0, 1, 2, 3)  # quarter turns k of torch.rot90; label = k, angle = 90·k degrees


def rotate_images(x: Tensor, k: int) -> Tensor:
    """(N, C, H, W) rotated by k quarter turns over (H, W); needs H == W for k odd."""
    if x.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(x.shape)}")
    if k % 2 and x.shape[2] != x.shape[3]:
        raise ValueError(f"rotation by 90° needs square images, got H x W = {x.shape[2]} x "
                         f"{x.shape[3]}; crop or resize them first")
    return torch.rot90(x, k, dims=(2, 3))


def rotation_dataset(images: Tensor) -> tuple[Tensor, Tensor]:
    """All four rotations of every image: (4N, C, H, W) and labels (4N,).

    Order: rotation-major, i.e. rows [kN, (k+1)N) hold all images rotated by k quarter turns
    and carry label k. For tests and small sets; :func:`rotation_features` streams instead.
    """
    if images.ndim != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    n = images.shape[0]
    rotated = torch.cat([rotate_images(images, k) for k in ROTATIONS])
    labels = torch.arange(len(ROTATIONS)).repeat_interleave(n)
    return rotated, labels


def rotation_features(backbone: Callable[[Tensor], Tensor], data: ImageDataset | Tensor,
                      heads: Heads | Callable | None = None, **extract_kw) -> tuple[dict[str, Tensor], Tensor]:
    """Features at every point for all four rotations, in :func:`rotation_dataset` order.

    ``extract_kw`` go to :func:`headgeom.eval.features.extract_features` (head_input, points,
    batch_size, device, mean, std). The rotation acts on [0, 1] pixels before normalisation
    (a per-channel normalisation commutes with it anyway).
    """
    if "transform" in extract_kw:
        raise TypeError("rotation_features sets the transform itself (the rotation)")
    images = data.images if isinstance(data, ImageDataset) else data
    if images.ndim == 4 and images.shape[2] != images.shape[3]:
        raise ValueError(f"the rotation probe needs square images, got H x W = "
                         f"{images.shape[2]} x {images.shape[3]}")
    per_k = [extract_features(backbone, images, heads,
                              transform=lambda x, k=k: rotate_images(x, k), **extract_kw)
             for k in ROTATIONS]
    feats = {p: torch.cat([f[p] for f in per_k]) for p in per_k[0]}
    labels = torch.arange(len(ROTATIONS)).repeat_interleave(images.shape[0])
    return feats, labels


def rotation_probe(backbone: Callable[[Tensor], Tensor], train: ImageDataset | Tensor,
                   test: ImageDataset | Tensor, heads: Heads | Callable | None = None, *,
                   config: LinearProbeConfig = LinearProbeConfig(),
                   points: Sequence[str] | None = None, **extract_kw) -> dict[str, dict]:
    """Linear rotation probe at each point: {point: {"test_top1", "train_top1", ...}}.

    Trained on the four rotations of ``train`` and tested on those of ``test``.
    """
    train_f, train_y = rotation_features(backbone, train, heads, points=points, **extract_kw)
    test_f, test_y = rotation_features(backbone, test, heads, points=points, **extract_kw)
    return {p: linear_probe_accuracy(train_f[p], train_y, test_f[p], test_y,
                                     num_classes=len(ROTATIONS), config=config)
            for p in train_f}

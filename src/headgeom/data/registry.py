"""Datasets by name: one vocabulary for the CLI, configs and reports.

``load_dataset("cifar10", split="test")`` returns an :class:`ImageDataset` of uint8 pixels;
normalisation constants live in :data:`DATASET_STATS` for the augmentation pipeline, which
normalises only after the colour augmentations (docs/paper.md §4, pitfall 6).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from .cifar import find_cifar, load_cifar
from .dataset import ImageDataset
from .download import download_cifar, resolve_data_dir
from .imagefolder import load_imagefolder
from .shapes import load_shapes

__all__ = ["DATASETS", "DATASET_STATS", "ChannelStats", "dataset_stats", "load_dataset",
           "register_dataset"]


@dataclass(frozen=True)
class ChannelStats:
    """Per-channel (R, G, B) mean and std of [0, 1] pixels over a training set."""

    mean: tuple[float, float, float]
    std: tuple[float, float, float]


# Over all training pixels, population std (not the mean of per-image stds, 0.2023/0.1994/0.2010,
# which is a different and smaller quantity often copied for CIFAR-10).
DATASET_STATS: dict[str, ChannelStats] = {
    "cifar10": ChannelStats((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ChannelStats((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "imagenet": ChannelStats((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}

Builder = Callable[..., ImageDataset]
DATASETS: dict[str, Builder] = {}


def register_dataset(name: str) -> Callable[[Builder], Builder]:
    """Register ``builder(split, data_dir, download, **kw) -> ImageDataset`` under ``name``."""
    def wrap(builder: Builder) -> Builder:
        if name in DATASETS:
            raise ValueError(f"dataset {name!r} is already registered")
        DATASETS[name] = builder
        return builder
    return wrap


def _cifar(name: str, split: str, data_dir: str | os.PathLike[str] | None, download: bool,
           label_type: str = "fine", layout: str = "binary") -> ImageDataset:
    root = resolve_data_dir(data_dir)
    if download:
        try:
            find_cifar(name, root)
        except FileNotFoundError:
            download_cifar(name, root, layout=layout)
    return load_cifar(name, root, split, label_type)


@register_dataset("cifar10")
def _build_cifar10(split: str, data_dir: str | os.PathLike[str] | None, download: bool,
                   layout: str = "binary") -> ImageDataset:
    return _cifar("cifar10", split, data_dir, download, layout=layout)


@register_dataset("cifar100")
def _build_cifar100(split: str, data_dir: str | os.PathLike[str] | None, download: bool,
                    label_type: str = "fine", layout: str = "binary") -> ImageDataset:
    return _cifar("cifar100", split, data_dir, download, label_type, layout)


@register_dataset("shapes")
def _build_shapes(split: str, data_dir: str | os.PathLike[str] | None, download: bool,
                  n: int | None = None, seed: int = 0, size: int = 32) -> ImageDataset:
    # generated in memory: data_dir and download do not apply
    return load_shapes(split, n=n, seed=seed, size=size)


@register_dataset("imagefolder")
def _build_imagefolder(split: str, data_dir: str | os.PathLike[str] | None, download: bool,
                       size: int | tuple[int, int] | None = None) -> ImageDataset:
    if data_dir is None:
        raise ValueError("dataset 'imagefolder' needs data_dir=ROOT (--data-dir ROOT) with "
                         "ROOT/<class>/<images> or ROOT/<split>/<class>/<images>")
    if download:
        raise ValueError("dataset 'imagefolder' cannot be downloaded; point data_dir at it")
    return load_imagefolder(data_dir, split, size=size)


def load_dataset(name: str, split: str = "train", data_dir: str | os.PathLike[str] | None = None,
                 download: bool = False, **kw: object) -> ImageDataset:
    """Build the registered dataset ``name`` (cifar10, cifar100, shapes, imagefolder).

    ``data_dir``: explicit directory, else ``$HEADGEOM_DATA``, else ``~/.cache/headgeom/data``
    (CIFAR); ``download=True`` fetches the official CIFAR archive when it is absent. Extra
    keywords go to the builder (CIFAR-100 ``label_type``; shapes ``n``, ``seed``, ``size``;
    imagefolder ``size``).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(DATASETS))}")
    try:
        return DATASETS[name](split, data_dir, download, **kw)
    except TypeError as err:
        if "unexpected keyword argument" in str(err):
            raise TypeError(f"load_dataset({name!r}): {err}") from err
        raise


def dataset_stats(name: str, dataset: ImageDataset | None = None) -> ChannelStats:
    """Published constants for ``name``, else the statistics measured on ``dataset``."""
    if name in DATASET_STATS:
        return DATASET_STATS[name]
    if dataset is None:
        raise ValueError(f"no stored channel statistics for {name!r} (known: "
                         f"{sorted(DATASET_STATS)}); pass the training ImageDataset to measure")
    mean, std = dataset.channel_stats()
    return ChannelStats(mean, std)

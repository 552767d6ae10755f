"""The one in-memory container every loader returns.

Images stay uint8 in [0, 255] and are never normalised here: colour augmentations act on
[0, 1] pixels before mean/std normalisation (docs/paper.md §4, pitfall 6), so normalisation
belongs to the augmentation pipeline, which reads its constants from
:data:`headgeom.data.registry.DATASET_STATS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["ImageDataset"]


@dataclass
class ImageDataset:
    """A labelled image set held as tensors.

    Attributes:
        images: uint8 (N, 3, H, W), channel planes R, G, B.
        labels: int64 (N,), values in [0, len(classes)).
        classes: class names, index = label.
        name: dataset name as registered (``"cifar10"``, ``"shapes"``, ...).
        split: ``"train"``, ``"test"`` or another split name.
    """

    images: torch.Tensor
    labels: torch.Tensor
    classes: list[str]
    name: str
    split: str

    def __post_init__(self) -> None:
        if not isinstance(self.images, torch.Tensor) or self.images.dtype != torch.uint8:
            raise TypeError(
                f"ImageDataset.images must be a torch.uint8 tensor, got "
                f"{getattr(self.images, 'dtype', type(self.images).__name__)}; convert pixels "
                f"in [0, 255] with .to(torch.uint8) (loaders never normalise)"
            )
        if self.images.ndim != 4 or self.images.shape[1] != 3:
            raise ValueError(
                f"ImageDataset.images must have shape (N, 3, H, W), got {tuple(self.images.shape)}"
            )
        if not isinstance(self.labels, torch.Tensor) or self.labels.dtype != torch.int64:
            raise TypeError(
                f"ImageDataset.labels must be a torch.int64 tensor, got "
                f"{getattr(self.labels, 'dtype', type(self.labels).__name__)}"
            )
        if self.labels.shape != (self.images.shape[0],):
            raise ValueError(
                f"ImageDataset.labels must have shape (N,) = ({self.images.shape[0]},) to match "
                f"the images, got {tuple(self.labels.shape)}"
            )
        self.classes = list(self.classes)
        if len(self.labels) and (
            int(self.labels.min()) < 0 or int(self.labels.max()) >= len(self.classes)
        ):
            raise ValueError(
                f"labels of {self.name!r}/{self.split!r} span [{int(self.labels.min())}, "
                f"{int(self.labels.max())}] but there are {len(self.classes)} classes"
            )

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_size(self) -> tuple[int, int]:
        """(H, W) of every image."""
        return int(self.images.shape[2]), int(self.images.shape[3])

    def subset(self, indices: torch.Tensor | Sequence[int] | np.ndarray | slice) -> ImageDataset:
        """The images at ``indices`` (a copy-free view for slices), same classes, name, split."""
        if not isinstance(indices, slice):
            if not isinstance(indices, torch.Tensor):
                array = np.asarray(indices)
                indices = torch.as_tensor(array.astype(np.int64) if array.size == 0 else array)
            if indices.dtype == torch.bool:
                if indices.shape != (len(self),):
                    raise ValueError(
                        f"a boolean mask must have shape ({len(self)},), got {tuple(indices.shape)}"
                    )
            elif indices.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8,
                                       torch.uint8) or indices.ndim != 1:
                raise TypeError(
                    f"subset() takes a 1-D integer index, a boolean mask or a slice; got dtype "
                    f"{indices.dtype} with shape {tuple(indices.shape)}"
                )
            else:
                indices = indices.long()
                if len(indices) and (int(indices.min()) < -len(self)
                                     or int(indices.max()) >= len(self)):
                    raise IndexError(
                        f"subset indices span [{int(indices.min())}, {int(indices.max())}] but "
                        f"the dataset has {len(self)} images"
                    )
        return ImageDataset(self.images[indices], self.labels[indices], list(self.classes),
                            self.name, self.split)

    def to_float(self) -> torch.Tensor:
        """float32 (N, 3, H, W) in [0, 1] (pixel / 255), not normalised."""
        return self.images.to(torch.float32).div_(255.0)

    def class_counts(self) -> torch.Tensor:
        """int64 (num_classes,): number of images per class."""
        return torch.bincount(self.labels, minlength=self.num_classes)

    def channel_stats(self) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Per-channel mean and std of the [0, 1] pixels over all images and positions.

        Computed in float64 one channel at a time, so 50,000 CIFAR images fit easily.
        """
        if len(self) == 0:
            raise ValueError(f"{self.name!r}/{self.split!r} is empty: no statistics to compute")
        means, stds = [], []
        for c in range(3):
            plane = self.images[:, c].to(torch.float64).div_(255.0)
            means.append(float(plane.mean()))
            stds.append(float(plane.std(unbiased=False)))
        return (means[0], means[1], means[2]), (stds[0], stds[1], stds[2])

    def __repr__(self) -> str:
        h, w = self.image_size
        return (f"ImageDataset(name={self.name!r}, split={self.split!r}, n={len(self)}, "
                f"size={h}x{w}, classes={self.num_classes})")

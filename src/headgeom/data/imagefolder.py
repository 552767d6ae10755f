"""ImageFolder: ``root/<class>/<image>`` (optionally ``root/<split>/<class>/<image>``).

Classes are the sorted sub-folder names (label = index), files are read in sorted order,
converted to RGB with PIL and, if ``size`` is given, resized (bilinear) so that every image
has the same shape. Pixels stay uint8; nothing is normalised here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from .dataset import ImageDataset

__all__ = ["IMAGE_EXTENSIONS", "SPLIT_FOLDERS", "list_images", "load_imagefolder"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
SPLIT_FOLDERS = ("train", "test", "val")


def _split_root(root: Path, split: str | None) -> tuple[Path, str]:
    """The folder holding the class folders, and the split name to record."""
    present = [s for s in SPLIT_FOLDERS if (root / s).is_dir()]
    if split is None:
        if present:
            raise ValueError(f"{root} has split folders {present}; pass split= one of them")
        return root, "all"
    if (root / split).is_dir():
        return root / split, split
    if present:
        raise FileNotFoundError(f"{root} has split folders {present} but no {split!r}/; pass "
                                f"split= one of {present}")
    # no split folders at all: the root itself is the (only) split
    return root, split


def list_images(root: str | os.PathLike[str]) -> tuple[list[str], list[tuple[Path, int]]]:
    """Class names (sorted sub-folders) and (file, label) pairs in sorted order.

    Raises FileNotFoundError when ``root`` is missing, ValueError when it has no class
    folders or a class folder has no image with an extension in :data:`IMAGE_EXTENSIONS`.
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {root} does not exist; expected "
                                f"root/<class>/<image files> (pass --data-dir DIR)")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ValueError(f"{root} has no class sub-folders; expected root/<class>/<images> "
                         f"with extensions {IMAGE_EXTENSIONS}")
    samples: list[tuple[Path, int]] = []
    empty: list[str] = []
    for label, name in enumerate(classes):
        files = sorted(p for p in (root / name).iterdir()
                       if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
        if not files:
            empty.append(name)
        samples.extend((f, label) for f in files)
    if empty:
        raise ValueError(f"class folder(s) {empty} under {root} hold no images with extensions "
                         f"{IMAGE_EXTENSIONS}; remove them or add images")
    return classes, samples


def _read(path: Path, size: tuple[int, int] | None) -> np.ndarray:
    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            if size is not None and img.size != (size[1], size[0]):
                img = img.resize((size[1], size[0]), Image.Resampling.BILINEAR)
            return np.asarray(img, dtype=np.uint8)
    except OSError as err:  # PIL.UnidentifiedImageError is an OSError
        raise ValueError(f"cannot read image {path}: {err}") from err


def load_imagefolder(root: str | os.PathLike[str], split: str | None = "train",
                     size: int | tuple[int, int] | None = None, name: str = "imagefolder"
                     ) -> ImageDataset:
    """Load ``root/[split/]<class>/<images>`` into an :class:`ImageDataset`.

    ``split`` selects ``root/split`` when the root has train/test/val folders; otherwise the
    root itself is used and ``split`` is only recorded. ``size`` (int or (H, W)) resizes every
    image; without it all images must already share one size. Returns uint8 (N, 3, H, W).
    """
    if isinstance(size, int):
        size = (size, size)
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"size must be a positive int or (H, W), got {size!r}")
    folder, split_name = _split_root(Path(root).expanduser(), split)
    classes, samples = list_images(folder)
    arrays = [_read(path, size) for path, _ in samples]
    shapes = sorted({a.shape[:2] for a in arrays})
    if len(shapes) > 1:
        raise ValueError(f"images under {folder} have {len(shapes)} different sizes (H, W), "
                         f"e.g. {shapes[:4]}; pass size=S (or (H, W)) to resize them")
    images = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
    labels = torch.tensor([label for _, label in samples], dtype=torch.int64)
    return ImageDataset(images, labels, classes, name, split_name)

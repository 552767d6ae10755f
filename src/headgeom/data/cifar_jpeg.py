"""CIFAR-10 test images from wherever they are: the official binary layout, else the JPEG archive.

A few hundred real CIFAR-10 images are enough for measurements that only need real images (C4's gap
between two augmented views). :func:`locate_cifar10` says where they are, :func:`cifar10_test_images`
returns the first ``per_class`` test images of each class:

- ``binary``: the official layout under the data folder (``--data-dir``/``$HEADGEOM_DATA``, else
  ``~/.cache/headgeom/data``; :func:`headgeom.data.find_cifar`), read by :func:`headgeom.data.load_cifar`;
- ``jpeg``: the JPEG archive ``cifar10-jpeg.tar.gz`` (``<top>/{train,test}/<class>/<name>.jpg``, the 60,000
  images as 32×32 JPEG files; tools/make_cifar10.py turns it into the binary layout) named by
  ``$HEADGEOM_CIFAR10_JPEG`` (the archive or the folder holding it). It is streamed and read only until
  every class is full (the test folder comes first in the archive): the images of a class in archive order.

Images are uint8 (N, 3, 32, 32), classes in CIFAR-10's order; JPEG pixels differ slightly from the
official release (compression), not in content. Missing data is one FileNotFoundError saying both ways.
"""
from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import torch

from .cifar import find_cifar, load_cifar
from .dataset import ImageDataset
from .download import DATA_ENV_VAR, resolve_data_dir

__all__ = ["ARCHIVE_NAME", "CLASSES", "JPEG_ENV_VAR", "cifar10_test_images", "locate_cifar10", "missing_message"]

JPEG_ENV_VAR = "HEADGEOM_CIFAR10_JPEG"
ARCHIVE_NAME = "cifar10-jpeg.tar.gz"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _jpeg_archive() -> Path | None:
    value = os.environ.get(JPEG_ENV_VAR, "")
    if not value:
        return None
    path = Path(value).expanduser()
    archive = path / ARCHIVE_NAME if path.is_dir() else path
    return archive if archive.is_file() else None


def locate_cifar10(data_dir: str | os.PathLike[str] | None = None) -> tuple[str, Path] | None:
    """("binary", folder) when the official layout is under the data folder, else ("jpeg", archive) when
    ``$HEADGEOM_CIFAR10_JPEG`` names the archive (or a folder holding it), else None."""
    try:
        folder, layout = find_cifar("cifar10", resolve_data_dir(data_dir))
        if layout == "binary":
            return "binary", folder
    except FileNotFoundError:
        pass
    archive = _jpeg_archive()
    return ("jpeg", archive) if archive is not None else None


def missing_message(data_dir: str | os.PathLike[str] | None = None) -> str:
    """Where CIFAR-10 was looked for and how to make it found (one line)."""
    value = os.environ.get(JPEG_ENV_VAR, "")
    return (f"CIFAR-10 not found: no official binary layout (cifar-10-batches-bin) under {resolve_data_dir(data_dir)} "
            f"(--data-dir or ${DATA_ENV_VAR}) and {'no ' + ARCHIVE_NAME + ' at ' + repr(value) if value else 'no'} "
            f"${JPEG_ENV_VAR}; set {JPEG_ENV_VAR} to {ARCHIVE_NAME} or the folder holding it, or {DATA_ENV_VAR} to "
            "a folder holding cifar-10-batches-bin (docs/setup.md)")


def _first_per_class(images: torch.Tensor, labels: torch.Tensor, per_class: int, where: str) -> torch.Tensor:
    idx = []
    for c in range(len(CLASSES)):
        found = torch.nonzero(labels == c).flatten()[:per_class]
        if found.numel() < per_class:
            raise ValueError(f"{where} holds {found.numel()} test images of class {CLASSES[c]!r}; {per_class} asked")
        idx.append(found)
    return torch.stack(idx, dim=1).flatten()  # class-interleaved: any prefix is balanced


def _read_jpegs(archive: Path, per_class: int) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image  # pillow: a headgeom dependency, imported where JPEGs are decoded

    got: dict[str, list[np.ndarray]] = {c: [] for c in CLASSES}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:  # streamed: stops as soon as every class is full
                parts = member.name.strip("/").split("/")
                if not member.isfile() or len(parts) != 4 or parts[1] != "test" or parts[2] not in got:
                    continue
                if len(got[parts[2]]) < per_class:
                    with Image.open(io.BytesIO(tar.extractfile(member).read())) as im:
                        got[parts[2]].append(np.asarray(im.convert("RGB"), dtype=np.uint8))
                if all(len(v) == per_class for v in got.values()):
                    break
    except (tarfile.TarError, OSError) as err:
        raise ValueError(f"{archive} is not a readable CIFAR-10 JPEG archive ({err}); {missing_message()}") from err
    short = {c: len(v) for c, v in got.items() if len(v) < per_class}
    if short:
        raise ValueError(f"{archive} holds fewer than {per_class} test images of classes {short}")
    images = np.stack([im for c in CLASSES for im in got[c]])
    if images.shape[1:] != (32, 32, 3):
        raise ValueError(f"{archive}: test images are {images.shape[2]}x{images.shape[1]}, not CIFAR-10's 32x32")
    return images.transpose(0, 3, 1, 2).copy(), np.repeat(np.arange(len(CLASSES)), per_class)


def cifar10_test_images(per_class: int, data_dir: str | os.PathLike[str] | None = None
                        ) -> tuple[ImageDataset, str]:
    """(the first ``per_class`` test images of each class, class-interleaved, as an ImageDataset; where they
    came from, "binary <folder>" or "jpeg <archive>"); FileNotFoundError (:func:`missing_message`) without data."""
    if isinstance(per_class, bool) or not isinstance(per_class, int) or not 1 <= per_class <= 1000:
        raise ValueError(f"per_class must be an integer in [1, 1000] (CIFAR-10 has 1000 test images per class); "
                         f"got {per_class!r}")
    found = locate_cifar10(data_dir)
    if found is None:
        raise FileNotFoundError(missing_message(data_dir))
    kind, path = found
    if kind == "binary":
        ds = load_cifar("cifar10", path.parent, "test")
        images, labels = ds.images, ds.labels
    else:
        x, y = _read_jpegs(path, per_class)
        images, labels = torch.from_numpy(x), torch.from_numpy(y).to(torch.int64)
    order = _first_per_class(images, labels, per_class, f"{kind} {path}")
    return ImageDataset(images[order].contiguous(), labels[order].contiguous(), list(CLASSES), "cifar10",
                        "test"), f"{kind} {path}"

#!/usr/bin/env python3
"""Write CIFAR-10 in the official binary layout from a JPEG copy of it.

    python tools/make_cifar10.py SOURCE OUT_DIR        # writes OUT_DIR/cifar-10-batches-bin/

SOURCE is the JPEG archive ``cifar10-jpeg.tar.gz``, or a folder holding it (what
``$HEADGEOM_CIFAR10_JPEG`` names for the tests that use real images). The archive holds the
60,000 CIFAR-10 images as 32×32 RGB JPEG files in an ImageFolder layout under one top folder,
``<top>/train/<class>/<name>.jpg`` and ``<top>/test/<class>/<name>.jpg``, with the ten class
folders named as CIFAR-10's classes.

The output is what :func:`headgeom.data.load_cifar10` (and the official loaders) read:
``data_batch_1.bin`` … ``data_batch_5.bin`` with 10,000 training images each and
``test_batch.bin``, each record one label byte and then 3,072 pixel bytes (the red plane, then
green, then blue, each 32×32 row-major), and ``batches.meta.txt`` with the class names. Records
are in a seeded random order, as the official batches are shuffled. Every file is written
through a temporary file and renamed, so an interrupted run leaves no half batch. The JPEG
images differ slightly from the original release's pixels (compression), not in content.

Needs numpy and pillow (both headgeom dependencies). Takes about 10-20 s on one core.
"""
from __future__ import annotations

import io
import os
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ARCHIVE_NAME = "cifar10-jpeg.tar.gz"
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
SPLIT_SIZES = {"train": 50_000, "test": 10_000}
SIDE = 32
TRAIN_BATCHES = 5


def find_archive(source: str | os.PathLike[str]) -> Path:
    """The archive itself, or ``ARCHIVE_NAME`` inside the folder ``source``."""
    path = Path(source)
    archive = path / ARCHIVE_NAME if path.is_dir() else path
    if not archive.is_file():
        raise FileNotFoundError(f"no CIFAR-10 JPEG archive at {archive}: give the path of {ARCHIVE_NAME} "
                                "or of the folder that holds it")
    return archive


def read_archive(archive: Path) -> dict[str, list[tuple[str, int, np.ndarray]]]:
    """{split: [(member name, label, (32, 32, 3) uint8 image)]} in one pass over the archive."""
    splits: dict[str, list[tuple[str, int, np.ndarray]]] = {s: [] for s in SPLIT_SIZES}
    with tarfile.open(archive, "r:*") as tar:
        for member in tar:
            parts = member.name.strip("/").split("/")
            if not member.isfile() or len(parts) != 4 or parts[1] not in splits:
                continue
            split, cls = parts[1], parts[2]
            if cls not in CLASSES:
                raise ValueError(f"{archive}: {member.name} is in a folder {cls!r} that is not a CIFAR-10 class "
                                 f"({', '.join(CLASSES)})")
            with Image.open(io.BytesIO(tar.extractfile(member).read())) as im:
                pixels = np.asarray(im.convert("RGB"), dtype=np.uint8)
            if pixels.shape != (SIDE, SIDE, 3):
                raise ValueError(f"{archive}: {member.name} is {pixels.shape[1]}×{pixels.shape[0]}, "
                                 f"not {SIDE}×{SIDE}")
            splits[split].append((member.name, CLASSES.index(cls), pixels))
    for split, n in SPLIT_SIZES.items():
        counts = np.bincount([label for _, label, _ in splits[split]], minlength=len(CLASSES))
        if len(splits[split]) != n or (counts != n // len(CLASSES)).any():
            raise ValueError(f"{archive}: the {split} split has {len(splits[split])} images, per class "
                             f"{counts.tolist()}; CIFAR-10 has {n}, {n // len(CLASSES)} per class")
    return splits


def records(images: list[tuple[str, int, np.ndarray]], seed: int) -> np.ndarray:
    """(n, 1 + 3·32·32) uint8 rows, label then the R, G, B planes, in a seeded random order."""
    images = sorted(images, key=lambda item: item[0])  # independent of the archive's member order
    order = np.random.default_rng(seed).permutation(len(images))
    labels = np.array([images[i][1] for i in order], dtype=np.uint8)
    planes = np.stack([images[i][2] for i in order]).transpose(0, 3, 1, 2).reshape(len(order), -1)
    return np.concatenate([labels[:, None], planes], axis=1)


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes the file private; these are plain data files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_cifar10(source: str | os.PathLike[str], out_dir: str | os.PathLike[str], seed: int = 0) -> Path:
    """Write ``out_dir/cifar-10-batches-bin`` from the JPEG archive; returns that folder."""
    splits = read_archive(find_archive(source))
    out = Path(out_dir) / "cifar-10-batches-bin"
    out.mkdir(parents=True, exist_ok=True)
    train = records(splits["train"], seed)
    per_batch = len(train) // TRAIN_BATCHES
    for b in range(TRAIN_BATCHES):
        write_atomic(out / f"data_batch_{b + 1}.bin", train[b * per_batch:(b + 1) * per_batch].tobytes())
    write_atomic(out / "test_batch.bin", records(splits["test"], seed + 1).tobytes())
    write_atomic(out / "batches.meta.txt", ("\n".join(CLASSES) + "\n").encode())
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        print(make_cifar10(argv[0], argv[1]))
    except (OSError, ValueError) as err:
        print(f"make_cifar10: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""CIFAR-10 and CIFAR-100 from the official python or binary layouts.

Layouts (https://www.cs.toronto.edu/~kriz/cifar.html):

- python: ``cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}`` and
  ``cifar-100-python/{train, test, meta}``: pickled dicts (bytes or str keys) with
  ``data`` uint8 (N, 3072) and ``labels`` (CIFAR-100: ``fine_labels``, ``coarse_labels``).
- binary: ``cifar-10-batches-bin/{data_batch_1..5.bin, test_batch.bin, batches.meta.txt}``
  (records of 1 label byte + 3072 pixels) and ``cifar-100-binary/{train.bin, test.bin,
  fine_label_names.txt, coarse_label_names.txt}`` (2 label bytes coarse, fine + 3072).

In both, the 3072 pixels of an image are the R, G, B planes of 32×32, row-major, which is
exactly the (3, H, W) order of :class:`ImageDataset`. Pickles are read with
:class:`SafeUnpickler`, which resolves only numpy array reconstruction and builtin containers,
never arbitrary globals, so a hostile file cannot run code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .dataset import ImageDataset
from .download import CIFAR_ARCHIVES, DATA_ENV_VAR, resolve_data_dir
from .safe_pickle import SafeUnpickler, UnsafePickleError, safe_pickle_load

__all__ = [
    "CIFAR_LAYOUTS",
    "SafeUnpickler",
    "UnsafePickleError",
    "fetch_command",
    "find_cifar",
    "load_cifar",
    "load_cifar10",
    "load_cifar100",
    "read_cifar_binary",
    "read_cifar_pickle",
    "safe_pickle_load",
]

PIXELS = 3 * 32 * 32
SPLITS = ("train", "test")
NUM_CLASSES = {("cifar10", "fine"): 10, ("cifar100", "fine"): 100, ("cifar100", "coarse"): 20}
PRETTY = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}


def _str_keys(obj: dict[Any, Any]) -> dict[str, Any]:
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def read_cifar_pickle(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load one python-layout CIFAR file as a dict with str keys.

    Raises ValueError naming the file when it is truncated, damaged, not a dict, or refers to
    a forbidden global (:class:`UnsafePickleError`, a ValueError).
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            obj = safe_pickle_load(f)
    except UnsafePickleError as err:
        raise UnsafePickleError(f"{path}: {err}") from None
    except FileNotFoundError:
        raise
    except Exception as err:  # truncated pickles raise EOFError, UnpicklingError, ValueError...
        size = path.stat().st_size if path.exists() else 0
        raise ValueError(
            f"{path} ({size} bytes) is not a readable CIFAR python batch "
            f"({type(err).__name__}: {err}); it is probably truncated or damaged: delete it "
            f"and download again"
        ) from err
    if not isinstance(obj, dict):
        raise ValueError(f"{path} holds a {type(obj).__name__}, expected a dict (CIFAR batch)")
    return _str_keys(obj)


def _names(value: Any, path: Path, key: str) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{path}: {key!r} should be a list of class names, got "
                         f"{type(value).__name__}")
    return [v.decode("latin1") if isinstance(v, bytes) else str(v) for v in value]


def _images_from_pickle(batch: dict[str, Any], path: Path, label_key: str
                        ) -> tuple[np.ndarray, np.ndarray]:
    for key in ("data", label_key):
        if key not in batch:
            raise ValueError(f"{path} has no {key!r} entry; keys seen: {sorted(batch)}")
    data = batch["data"]
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] != PIXELS:
        seen = (f"{data.dtype} array of shape {data.shape}" if isinstance(data, np.ndarray)
                else type(data).__name__)
        raise ValueError(f"{path}: 'data' is a {seen}, expected a uint8 array of shape "
                         f"(N, {PIXELS}); the file is damaged or not a CIFAR batch")
    labels = np.asarray(batch[label_key], dtype=np.int64)
    if labels.shape != (data.shape[0],):
        raise ValueError(f"{path}: {label_key!r} has shape {labels.shape} but 'data' has "
                         f"{data.shape[0]} rows")
    return data.reshape(-1, 3, 32, 32), labels


# --------------------------------------------------------------------------- binary layout
def read_cifar_binary(path: str | os.PathLike[str], label_bytes: int = 1, label_index: int = 0
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Read fixed-length records ``label_bytes`` + 3072 pixels.

    Returns images uint8 (N, 3, 32, 32) and labels int64 (N,) taken from label byte
    ``label_index`` (CIFAR-100: 0 = coarse, 1 = fine).
    """
    path = Path(path)
    raw = np.fromfile(path, dtype=np.uint8)
    record = label_bytes + PIXELS
    if raw.size == 0 or raw.size % record:
        raise ValueError(
            f"{path} has {raw.size} bytes, which is not a positive whole number of "
            f"{record}-byte records ({label_bytes} label byte(s) + {PIXELS} pixel bytes; "
            f"{raw.size // record} full records and {raw.size % record} bytes left over); "
            f"the file is truncated or not in the CIFAR binary layout: delete it and download "
            f"again"
        )
    rows = raw.reshape(-1, record)
    labels = rows[:, label_index].astype(np.int64)
    images = rows[:, label_bytes:].reshape(-1, 3, 32, 32)
    return images, labels


def _read_names(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"class-name file {path} is missing")
    return [line.strip() for line in path.read_text(encoding="latin1").splitlines()
            if line.strip()]


# --------------------------------------------------------------------------- layouts
@dataclass(frozen=True)
class CifarLayout:
    """File names of one official layout."""

    folder: str
    train: tuple[str, ...]
    test: tuple[str, ...]
    meta: tuple[str, ...]


CIFAR_LAYOUTS: dict[str, dict[str, CifarLayout]] = {
    "cifar10": {
        "binary": CifarLayout("cifar-10-batches-bin",
                              tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
                              ("test_batch.bin",), ("batches.meta.txt",)),
        "python": CifarLayout("cifar-10-batches-py",
                              tuple(f"data_batch_{i}" for i in range(1, 6)),
                              ("test_batch",), ("batches.meta",)),
    },
    "cifar100": {
        "binary": CifarLayout("cifar-100-binary", ("train.bin",), ("test.bin",),
                              ("fine_label_names.txt", "coarse_label_names.txt")),
        "python": CifarLayout("cifar-100-python", ("train",), ("test",), ("meta",)),
    },
}


def fetch_command(name: str, root: str | os.PathLike[str] | None = None) -> str:
    """The command line that downloads ``name`` into ``root`` (the data folder it is looked for in)."""
    given = root is not None and Path(root).expanduser() != resolve_data_dir(None)
    return f"headgeom data fetch {name}" + (f" --data-dir {root}" if given else "")


def _how_to_get(name: str, root: Path, fetch: str = "Fetch it") -> str:
    archive = CIFAR_ARCHIVES[(name, "binary")]
    return (f"{fetch} ({archive.size / 1e6:.0f} MB from {archive.url}) with `{fetch_command(name, root)}` "
            f"(in Python: load_dataset({name!r}, download=True)), or point --data-dir DIR (data_dir=DIR) "
            f"or {DATA_ENV_VAR}=DIR at the folder that holds the extracted "
            f"{CIFAR_LAYOUTS[name]['binary'].folder}/.")


def find_cifar(name: str, root: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """Locate an extracted CIFAR folder under ``root`` (default: :func:`resolve_data_dir`).

    Looks at ``root/<folder>`` for the binary layout first (no unpickling needed), then the
    python layout, and at ``root`` itself (if it is the extracted folder). Returns
    (folder, layout). Raises FileNotFoundError listing every place looked at.
    """
    if name not in CIFAR_LAYOUTS:
        raise ValueError(f"unknown CIFAR name {name!r}; expected one of {sorted(CIFAR_LAYOUTS)}")
    root = resolve_data_dir(root)
    looked: list[str] = []
    for layout_name, layout in CIFAR_LAYOUTS[name].items():
        folder = root / layout.folder
        if folder.is_dir() and any((folder / f).is_file()
                                   for f in layout.train + layout.test + layout.meta):
            return folder, layout_name
        # root may itself be the extracted folder (e.g. --data-dir .../cifar-10-batches-bin)
        if root.is_dir() and any((root / f).is_file() for f in layout.train + layout.test):
            return root, layout_name
        looked.append(f"{folder} ({layout_name} layout)")
    raise FileNotFoundError(
        f"{PRETTY[name]} not found under {root}: looked for {' and '.join(looked)}, and for "
        f"the batch files in {root} itself. "
        + _how_to_get(name, root)
    )


def _require(folder: Path, files: tuple[str, ...], name: str) -> list[Path]:
    paths = [folder / f for f in files]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{PRETTY[name]} folder {folder} lacks {missing}; it is incomplete. "
                                + _how_to_get(name, folder.parent, f"Remove {folder}, then fetch it again"))
    return paths


def _check_labels(labels: np.ndarray, num_classes: int, path: Path) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"{path} has labels in [{labels.min()}, {labels.max()}] but the "
                         f"dataset has {num_classes} classes; the file is damaged")


def load_cifar(name: str, root: str | os.PathLike[str] | None = None, split: str = "train",
               label_type: str = "fine") -> ImageDataset:
    """Load CIFAR-10 (``name="cifar10"``) or CIFAR-100 from either official layout.

    ``label_type`` is "fine" (100 classes) or "coarse" (20 superclasses) for CIFAR-100 and
    must be "fine" for CIFAR-10. Returns uint8 images (N, 3, 32, 32) in file order.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if (name, label_type) not in NUM_CLASSES:
        valid = [lt for (n, lt) in NUM_CLASSES if n == name] or ["fine"]
        raise ValueError(f"label_type={label_type!r} is not available for {name!r}; "
                         f"use one of {valid}")
    folder, layout_name = find_cifar(name, root)
    layout = CIFAR_LAYOUTS[name][layout_name]
    num_classes = NUM_CLASSES[(name, label_type)]
    files = _require(folder, getattr(layout, split), name)
    meta = _require(folder, layout.meta, name)

    if layout_name == "binary":
        names_file = meta[1] if label_type == "coarse" else meta[0]
        classes = _read_names(names_file)
        label_bytes = 1 if name == "cifar10" else 2
        index = 0 if name == "cifar10" or label_type == "coarse" else 1  # (coarse, fine)
        parts = [(read_cifar_binary(p, label_bytes, index), p) for p in files]
    else:
        meta_dict = read_cifar_pickle(meta[0])
        key = "label_names" if name == "cifar10" else f"{label_type}_label_names"
        if key not in meta_dict:
            raise ValueError(f"{meta[0]} has no {key!r}; keys seen: {sorted(meta_dict)}")
        classes = _names(meta_dict[key], meta[0], key)
        label_key = "labels" if name == "cifar10" else f"{label_type}_labels"
        parts = [(_images_from_pickle(read_cifar_pickle(p), p, label_key), p) for p in files]
        names_file = meta[0]
    if len(classes) != num_classes:
        raise ValueError(f"{names_file} lists {len(classes)} class names, expected "
                         f"{num_classes} for {PRETTY[name]} ({label_type} labels)")
    for (_, labels), path in parts:
        _check_labels(labels, num_classes, path)
    images = np.concatenate([imgs for (imgs, _), _ in parts])
    labels = np.concatenate([lbl for (_, lbl), _ in parts])
    return ImageDataset(torch.from_numpy(np.ascontiguousarray(images)),
                        torch.from_numpy(labels), classes, name, split)


def load_cifar10(root: str | os.PathLike[str] | None = None, split: str = "train"
                 ) -> ImageDataset:
    """CIFAR-10: 50,000 train / 10,000 test images, 10 classes (see :func:`load_cifar`)."""
    return load_cifar("cifar10", root, split)


def load_cifar100(root: str | os.PathLike[str] | None = None, split: str = "train",
                  label_type: str = "fine") -> ImageDataset:
    """CIFAR-100: 50,000 / 10,000 images, 100 fine or 20 coarse classes."""
    return load_cifar("cifar100", root, split, label_type)

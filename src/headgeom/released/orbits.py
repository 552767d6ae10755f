"""The authors' rotation orbits, ``results/cifar10/<backbone>/orbit_visualization.npy`` (docs/paper.md
§3.6 and §3.8; claim C9).

The file is a pickled dict of flat arrays, one row per orbit point: ``orbits_z`` (N·K, D_z) and
``orbits_h`` (N·K, D_h) float32, ``orbit_ids``, ``orbit_labels`` and ``orbit_angles`` (N·K,), and
``num_rotations`` K, ``selected_classes``, ``class_names``, ``dataset``. :func:`orbit_grid`
arranges such rows as headgeom's orbit layout, (N images, K angles, D), each orbit's points in
angle order, after checking that every orbit has the same K angles; the depth ablations
(headgeom.released.depth) store their orbits the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from headgeom.released.files import array, read_npy_dict, require_keys, scalar
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.runs.safe_load import file_sha256

__all__ = ["ORBIT_BACKBONES", "OrbitGrid", "Orbits", "orbit_grid", "orbits_path", "parse_orbits", "read_orbits"]

ORBIT_BACKBONES = ("resnet18", "vit_tiny")
FLAT_KEYS = ("orbits_z", "orbits_h", "orbit_ids", "orbit_labels", "orbit_angles")
KEYS = FLAT_KEYS + ("num_rotations", "selected_classes", "class_names", "dataset")


@dataclass(frozen=True, eq=False)
class OrbitGrid:
    """Orbits as headgeom lays them out: z (N, K, D_z), h (N, K, D_h), labels (N,), angles (K,) degrees."""

    z: np.ndarray
    h: np.ndarray
    labels: np.ndarray
    angles: np.ndarray

    @property
    def images(self) -> int:
        return int(self.z.shape[0])

    @property
    def steps(self) -> int:
        return int(self.z.shape[1])


@dataclass(frozen=True, eq=False)
class Orbits:
    """The orbit file of one backbone: its grid, the class names and what the file says of itself."""

    backbone: str
    dataset: str
    path: Path
    sha256: str
    grid: OrbitGrid
    class_ids: tuple[int, ...]
    class_names: tuple[str, ...]


def orbit_grid(path: str | Path, data: Mapping[str, Any], steps: int | None = None) -> OrbitGrid:
    """Arrange the flat rows of ``data`` (the keys :data:`FLAT_KEYS`) as (N, K, D), orbits in id
    order and each orbit's points in angle order. ``steps``: the K the file states, if it does."""
    path = Path(path)
    require_keys(path, data, FLAT_KEYS)
    ids = array(path, data, "orbit_ids", (None,), "iu")
    rows = ids.shape[0]
    z = array(path, data, "orbits_z", (rows, None), "f")
    h = array(path, data, "orbits_h", (rows, None), "f")
    labels = array(path, data, "orbit_labels", (rows,), "iu")
    angles = array(path, data, "orbit_angles", (rows,), "fiu")
    uniq, counts = np.unique(ids, return_counts=True)
    k = int(counts[0]) if counts.size else 0
    if rows == 0 or (counts != k).any() or (steps is not None and k != steps):
        raise ReleasedFileError(f"{path}: orbits have {sorted(set(counts.tolist()))} points each"
                                + (f", the file says {steps}" if steps is not None else "")
                                + "; every orbit needs the same number of angles")
    order = np.lexsort((angles, ids))  # by orbit id, then angle
    n = uniq.size
    grid_angles = angles[order].reshape(n, k)
    if not (grid_angles == grid_angles[:1]).all():
        raise ReleasedFileError(f"{path}: the orbits do not share one grid of angles; the file is damaged "
                                f"or not the authors' file")
    grid_labels = labels[order].reshape(n, k)
    if not (grid_labels == grid_labels[:, :1]).all():
        raise ReleasedFileError(f"{path}: an orbit's points carry different class labels; the file is damaged "
                                f"or not the authors' file")
    return OrbitGrid(z=z[order].reshape(n, k, -1), h=h[order].reshape(n, k, -1),
                     labels=grid_labels[:, 0].astype(np.int64), angles=grid_angles[0].astype(np.float64))


def orbits_path(backbone: str) -> str:
    """The upstream path of the orbit file of ``backbone`` (one of :data:`ORBIT_BACKBONES`)."""
    if backbone not in ORBIT_BACKBONES:
        raise ReleasedFileError(f"no released orbit file for {backbone!r}; the authors released "
                                f"{', '.join(ORBIT_BACKBONES)}")
    return f"results/cifar10/{backbone}/orbit_visualization.npy"


def _items(path: Path, data: Mapping[str, Any], key: str, kinds: tuple[type, ...], name: str) -> tuple:
    value = data[key]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, kinds) for v in value):
        raise ReleasedFileError(f"{path}: {key!r} is {value!r}, expected a list of {name}")
    return tuple(value)


def parse_orbits(path: str | Path, backbone: str) -> Orbits:
    """Read an orbit file (no sha256 check: :func:`read_orbits` does that first)."""
    path = Path(path)
    data = read_npy_dict(path)
    require_keys(path, data, KEYS)
    grid = orbit_grid(path, data, steps=scalar(path, data, "num_rotations", int))
    class_ids = tuple(int(c) for c in _items(path, data, "selected_classes", (int, np.integer), "class ids"))
    names = tuple(str(c) for c in _items(path, data, "class_names", (str,), "class names"))
    if len(names) != len(class_ids) or not set(grid.labels.tolist()) <= set(class_ids):
        raise ReleasedFileError(f"{path}: labels {sorted(set(grid.labels.tolist()))} do not match "
                                f"selected_classes {list(class_ids)} / class_names {list(names)}")
    return Orbits(backbone=backbone, dataset=str(data["dataset"]), path=path, sha256=file_sha256(path),
                  grid=grid, class_ids=class_ids, class_names=names)


def read_orbits(root: str | Path, backbone: str, manifest: Manifest = MANIFEST) -> Orbits:
    """The orbits of ``backbone`` from the copy at ``root``, checked against ``manifest`` first."""
    return parse_orbits(verify_file(root, orbits_path(backbone), manifest), backbone)

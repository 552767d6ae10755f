"""The authors' head-depth ablation,
``results/cifar10/resnet18/head_depth_ablations/geometric_ablation_depth_<d>.npz`` (docs/paper.md
§3.8; claim C11).

One file per head depth d = 1, 2, 3 (ResNet-18, CIFAR-10), each holding ``depth`` (), the linear
probe accuracies ``acc_z_linear`` (backbone) and ``acc_h_linear`` (head) (), per-image curvatures
``curvatures_z`` and ``curvatures_h`` (100,), and rotation orbits in the flat layout of the orbit
files (``orbits_z``, ``orbits_h``, ``orbit_ids``, ``orbit_labels``, ``orbit_angles``; no class
names), arranged by :func:`headgeom.released.orbits.orbit_grid`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from headgeom.released.files import array, read_npz, require_keys, scalar
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.released.orbits import FLAT_KEYS, OrbitGrid, orbit_grid
from headgeom.runs.safe_load import file_sha256

__all__ = ["DEPTHS", "DepthAblation", "depth_path", "parse_depth", "read_depth"]

DEPTHS = (1, 2, 3)
KEYS = ("depth", "acc_z_linear", "acc_h_linear", "curvatures_z", "curvatures_h") + FLAT_KEYS


@dataclass(frozen=True, eq=False)
class DepthAblation:
    """One head depth: backbone/head linear probe accuracy, per-image curvatures, orbits."""

    depth: int
    path: Path
    sha256: str
    acc_backbone_linear: float
    acc_head_linear: float
    curvatures_z: np.ndarray
    curvatures_h: np.ndarray
    grid: OrbitGrid


def depth_path(depth: int) -> str:
    """The upstream path of the ablation of head depth ``depth`` (one of :data:`DEPTHS`)."""
    if depth not in DEPTHS:
        raise ReleasedFileError(f"no released depth ablation for depth {depth!r}; the authors released depths "
                                f"{', '.join(map(str, DEPTHS))}")
    return f"results/cifar10/resnet18/head_depth_ablations/geometric_ablation_depth_{depth}.npz"


def parse_depth(path: str | Path, depth: int) -> DepthAblation:
    """Read a depth-ablation file (no sha256 check: :func:`read_depth` does that first)."""
    path = Path(path)
    data = read_npz(path)
    require_keys(path, data, KEYS)
    stated = scalar(path, data, "depth", int)
    if stated != depth:
        raise ReleasedFileError(f"{path} says depth {stated}, its name says {depth}; the file was renamed or "
                                f"is not the authors' file")
    cz = array(path, data, "curvatures_z", (None,), "f")
    ch = array(path, data, "curvatures_h", cz.shape, "f")
    return DepthAblation(depth=depth, path=path, sha256=file_sha256(path),
                         acc_backbone_linear=scalar(path, data, "acc_z_linear", float),
                         acc_head_linear=scalar(path, data, "acc_h_linear", float),
                         curvatures_z=cz, curvatures_h=ch, grid=orbit_grid(path, data))


def read_depth(root: str | Path, depth: int, manifest: Manifest = MANIFEST) -> DepthAblation:
    """The ablation of head depth ``depth`` from the copy at ``root``, checked against ``manifest`` first."""
    return parse_depth(verify_file(root, depth_path(depth), manifest), depth)

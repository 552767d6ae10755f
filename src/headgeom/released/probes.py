"""The authors' guillotine probes and manifold curvatures, ``results/<dataset>/<backbone>/
guillotine_results.npy`` and ``curvature_results.npy`` (docs/paper.md §3.5 and §3.8; claims C12 and
C3 as context).

Both are pickled dicts. Guillotine: the rotation-probe accuracies (fractions) of a linear and an
MLP probe on the backbone output z and on the head output h, ``backbone_acc_linear``,
``head_acc_linear``, ``backbone_acc_mlp``, ``head_acc_mlp``, with ``gap_backbone`` and ``gap_head``
(MLP minus linear) and ``dataset``. Curvature: per seed the mean curvature of rotation curves at z
and at h and their ratio (``curvatures_z_per_seed``, ``curvatures_h_per_seed``, ``ratios_per_seed``),
their means and standard deviations, ``num_seeds`` and ``dataset``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from headgeom.released.files import read_npy_dict, require_keys, scalar
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.runs.safe_load import file_sha256

__all__ = ["PROBE_RUNS", "ROTATION_CHANCE", "ROTATION_TEST_EXAMPLES", "Curvature", "Guillotine", "curvature_path", "guillotine_path", "parse_curvature",
           "parse_guillotine", "read_curvature", "read_guillotine"]

PROBE_RUNS = (("cifar10", "resnet18"), ("cifar10", "vit_tiny"), ("cifar100", "resnet18"))
"""(dataset, backbone) of the released guillotine, curvature and log files."""
ROTATION_TEST_EXAMPLES = 10_000
"""Test examples behind each of the authors' rotation-probe accuracies (guillotine files and depth ablations):
every image of the CIFAR-10 or CIFAR-100 test split once, at one seeded multiple of 90° (``RotationDataset(
train=False)`` in experiments.py and head_depth_ablations.py at the pinned commit; both test splits hold 10,000
images). The files store the accuracies only: this count comes from the code, not from the files."""
ROTATION_CHANCE = 0.25  # the probes predict one of 4 rotations (the same code)
GUILLOTINE_KEYS = ("backbone_acc_linear", "head_acc_linear", "backbone_acc_mlp", "head_acc_mlp", "dataset")
CURVATURE_KEYS = ("curvatures_z_per_seed", "curvatures_h_per_seed", "ratios_per_seed", "num_seeds", "dataset")


@dataclass(frozen=True, eq=False)
class Guillotine:
    """Rotation-probe accuracies (fractions in [0, 1]) on the backbone output z and the head output h."""

    dataset: str
    backbone: str
    path: Path
    sha256: str
    backbone_linear: float
    head_linear: float
    backbone_mlp: float
    head_mlp: float


@dataclass(frozen=True, eq=False)
class Curvature:
    """Mean curvature of rotation curves at z and h, one value per seed (S,), and their ratio h/z."""

    dataset: str
    backbone: str
    path: Path
    sha256: str
    curvature_z: np.ndarray
    curvature_h: np.ndarray
    ratio: np.ndarray


def _check_run(dataset: str, backbone: str) -> None:
    if (dataset, backbone) not in PROBE_RUNS:
        raise ReleasedFileError(f"no released results for {backbone} on {dataset}; the authors released "
                                + ", ".join(f"{b} on {d}" for d, b in PROBE_RUNS))


def guillotine_path(dataset: str, backbone: str) -> str:
    """The upstream path of the guillotine probes of ``backbone`` on ``dataset``."""
    _check_run(dataset, backbone)
    return f"results/{dataset}/{backbone}/guillotine_results.npy"


def curvature_path(dataset: str, backbone: str) -> str:
    """The upstream path of the curvature results of ``backbone`` on ``dataset``."""
    _check_run(dataset, backbone)
    return f"results/{dataset}/{backbone}/curvature_results.npy"


def _accuracy(path: Path, data: Mapping[str, Any], key: str) -> float:
    value = scalar(path, data, key, float)
    if not 0.0 <= value <= 1.0:
        raise ReleasedFileError(f"{path}: {key!r} is {value}, not an accuracy in [0, 1]")
    return value


def parse_guillotine(path: str | Path, dataset: str, backbone: str) -> Guillotine:
    """Read a guillotine file (no sha256 check: :func:`read_guillotine` does that first)."""
    path = Path(path)
    data = read_npy_dict(path)
    require_keys(path, data, GUILLOTINE_KEYS)
    acc = {k: _accuracy(path, data, k) for k in GUILLOTINE_KEYS[:4]}
    return Guillotine(dataset=dataset, backbone=backbone, path=path, sha256=file_sha256(path),
                      backbone_linear=acc["backbone_acc_linear"], head_linear=acc["head_acc_linear"],
                      backbone_mlp=acc["backbone_acc_mlp"], head_mlp=acc["head_acc_mlp"])


def _per_seed(path: Path, data: Mapping[str, Any], key: str, seeds: int) -> np.ndarray:
    value = data[key]
    try:
        out = np.asarray([float(v) for v in value], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ReleasedFileError(f"{path}: {key!r} is {value!r}, expected one number per seed") from err
    if out.shape != (seeds,):
        raise ReleasedFileError(f"{path}: {key!r} has {out.size} values, num_seeds says {seeds}")
    return out


def parse_curvature(path: str | Path, dataset: str, backbone: str) -> Curvature:
    """Read a curvature file (no sha256 check: :func:`read_curvature` does that first)."""
    path = Path(path)
    data = read_npy_dict(path)
    require_keys(path, data, CURVATURE_KEYS)
    seeds = scalar(path, data, "num_seeds", int)
    cz, ch, ratio = (_per_seed(path, data, k, seeds) for k in CURVATURE_KEYS[:3])
    return Curvature(dataset=dataset, backbone=backbone, path=path, sha256=file_sha256(path),
                     curvature_z=cz, curvature_h=ch, ratio=ratio)


def read_guillotine(root: str | Path, dataset: str, backbone: str, manifest: Manifest = MANIFEST) -> Guillotine:
    """The guillotine probes of ``backbone`` on ``dataset`` from the copy at ``root``, checked first."""
    return parse_guillotine(verify_file(root, guillotine_path(dataset, backbone), manifest), dataset, backbone)


def read_curvature(root: str | Path, dataset: str, backbone: str, manifest: Manifest = MANIFEST) -> Curvature:
    """The curvature results of ``backbone`` on ``dataset`` from the copy at ``root``, checked first."""
    return parse_curvature(verify_file(root, curvature_path(dataset, backbone), manifest), dataset, backbone)

"""The authors' collapse grid, ``results/<dataset>/<backbone>/collapse_results.npy`` (docs/paper.md
§3.3 and §3.8; claims C5 and C8's escape).

The file is a pickled dict, one entry per head run, keyed ``<activation>_bn_<True|False>_lr_<label>``
(CIFAR-10) or just ``<activation>`` (the CIFAR-100 file). Each entry holds, per epoch, the
representation spread over the seeds as ``mean`` (E,), ``std`` (E,) and ``raw`` (S seeds, E epochs),
and further series the same way, ``<name>_mean``, ``<name>_std``, ``<name>_raw``: ``cond_nums``
(condition number of the representation covariance) in every CIFAR-10 file, update norms
(``proj_update_norms``, ``backbone_update_rel``, ...) in the ResNet-18 one, ``grad_norms`` in the
ViT-Tiny one. The spread is the mean per-dimension standard deviation of the L2-normalised
outputs, recorded once per epoch (docs/paper.md §3.3).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from headgeom.released.files import array, read_npy_dict
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.runs.safe_load import file_sha256

__all__ = ["LR_LABELS", "CollapseGrid", "CollapseRun", "collapse_path", "parse_collapse", "read_collapse"]

_KEY = re.compile(r"(?P<activation>[a-z0-9]+)(?:_bn_(?P<bn>True|False)_lr_(?P<lr>[a-z]+))?")
LR_LABELS = {"base": 0.05, "large": 0.5, "small": 0.005}
"""The learning rate each label stands for, from the paper's protocol (docs/paper.md §3.3), not from
the file, which stores only the label."""


@dataclass(frozen=True, eq=False)
class CollapseRun:
    """One head of the grid: ``spread`` (S seeds, E epochs) and every other stored series (S, E).

    ``bn`` and ``lr`` are None where the key does not say (the CIFAR-100 file's keys name only the
    activation). ``spread_mean`` and ``spread_std`` are the file's own summaries over seeds.
    """

    key: str
    activation: str
    bn: bool | None
    lr: str | None
    spread: np.ndarray
    spread_mean: np.ndarray
    spread_std: np.ndarray
    series: Mapping[str, np.ndarray]

    @property
    def seeds(self) -> int:
        return int(self.spread.shape[0])

    @property
    def epochs(self) -> int:
        return int(self.spread.shape[1])

    @property
    def lr_value(self) -> float | None:
        """The learning rate of the label (:data:`LR_LABELS`), None when the key gives none."""
        return None if self.lr is None else LR_LABELS.get(self.lr)


@dataclass(frozen=True, eq=False)
class CollapseGrid:
    """The collapse grid of one backbone on one dataset: its runs in the file's order."""

    dataset: str
    backbone: str
    path: Path
    sha256: str
    runs: tuple[CollapseRun, ...]

    def run(self, activation: str, bn: bool | None = None, lr: str | None = None) -> CollapseRun:
        """The run of ``activation`` with ``bn`` and ``lr`` (None matches a key that names neither)."""
        for r in self.runs:
            if (r.activation, r.bn, r.lr) == (activation, bn, lr):
                return r
        have = ", ".join(r.key for r in self.runs)
        raise KeyError(f"{self.path} has no run activation={activation!r}, bn={bn!r}, lr={lr!r}; it has {have}")

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(r.key for r in self.runs)


def collapse_path(dataset: str, backbone: str) -> str:
    """The upstream path of the collapse grid of ``backbone`` on ``dataset``."""
    return f"results/{dataset}/{backbone}/collapse_results.npy"


def _series_names(path: Path, key: str, entry: Mapping[str, object]) -> list[str]:
    names = sorted(k[:-4] for k in entry if isinstance(k, str) and k.endswith("_raw"))
    if "raw" not in entry:
        raise ReleasedFileError(f"{path}: run {key!r}: key 'raw' (the spread per seed and epoch) is missing; "
                                f"present: {sorted(map(str, entry))}; the file is damaged or not the authors' file")
    for name in [""] + names:
        for part in ("mean", "std"):
            full = f"{name}_{part}" if name else part
            if full not in entry:
                raise ReleasedFileError(f"{path}: run {key!r}: key {full!r} is missing beside "
                                        f"{(name + '_raw') if name else 'raw'!r}; the file is damaged or not "
                                        f"the authors' file")
    return names


def _run(path: Path, key: object, entry: object) -> CollapseRun:
    m = _KEY.fullmatch(key) if isinstance(key, str) else None
    if m is None:
        raise ReleasedFileError(f"{path}: run key {key!r} is not '<activation>' or "
                                f"'<activation>_bn_<True|False>_lr_<label>'; not the authors' collapse grid")
    if not isinstance(entry, dict):
        raise ReleasedFileError(f"{path}: run {key!r} holds a {type(entry).__name__}, not a dict of series")
    names = _series_names(path, key, entry)
    what = f"run {key!r}:"
    raw = array(path, entry, "raw", (None, None), "f", what)
    s, e = raw.shape
    mean, std = (array(path, entry, k, (e,), "f", what) for k in ("mean", "std"))
    series = {}
    for name in names:
        series[name] = array(path, entry, f"{name}_raw", (s, e), "f", what)
        for part in ("mean", "std"):
            array(path, entry, f"{name}_{part}", (e,), "f", what)
    bn = None if m["bn"] is None else m["bn"] == "True"
    return CollapseRun(key=key, activation=m["activation"], bn=bn, lr=m["lr"], spread=raw,
                       spread_mean=mean, spread_std=std, series=series)


def parse_collapse(path: str | Path, dataset: str, backbone: str) -> CollapseGrid:
    """Read a collapse grid file (no sha256 check: :func:`read_collapse` does that first)."""
    path = Path(path)
    data = read_npy_dict(path)
    if not data:
        raise ReleasedFileError(f"{path} holds an empty dict, no run; the file is damaged or not the authors' file")
    runs = tuple(_run(path, k, v) for k, v in data.items())
    return CollapseGrid(dataset=dataset, backbone=backbone, path=path, sha256=file_sha256(path), runs=runs)


def read_collapse(root: str | Path, dataset: str, backbone: str, manifest: Manifest = MANIFEST) -> CollapseGrid:
    """The collapse grid of ``backbone`` on ``dataset`` from the copy at ``root``, checked against
    ``manifest`` first."""
    rel = collapse_path(dataset, backbone)
    return parse_collapse(verify_file(root, rel, manifest), dataset, backbone)

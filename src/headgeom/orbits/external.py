"""Orbit embeddings computed by any code: ``headgeom analyze FILE.npz`` (docs/paper.md §3
"Orbits"; claims C9-C11).

An ``.npz`` (``numpy.savez``) holding

- ``z``: (N, K, D_z), N orbits of K steps at the backbone output;
- one or more head points (N, K, D) under their own names (``h``, or ``h1``, ``h2``, ...), in
  the order the file stores them;
- optionally ``labels`` (N,) integer class ids (D_inter, class/orbit ratio, a bootstrap
  stratified by class) and ``xi`` (K,) the augmentation parameter of each step,

gets the same orbit metrics with bootstrap CIs as a model (headgeom.orbits.analyze), under
``families.<family>.points.<name>`` and ``families.<family>.ratios.<name>``. The controls (a
fresh head, random directions through the head) and the tangent metric need the model and are
omitted with a note. The file is read with ``numpy.load(allow_pickle=False)``: an object array,
which only pickle can hold, is refused and never unpickled. Every malformed input raises
:class:`NpzFormatError` (a ValueError) with one line saying what was wrong and what to do.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from headgeom.npz import read_npz
from headgeom.runs.safe_load import file_sha256
from headgeom.orbits.analyze import DEFINITIONS, analyze_orbit_features, orbit_protocol
from headgeom.orbits.extract import OrbitFeatures
from headgeom.orbits.pca import orbit_pca_panels
from headgeom.report.figures import figure_png_bytes
from headgeom.report.plots.orbits import plot_orbit_pca

__all__ = ["ExternalOrbits", "NpzFormatError", "analyze_external", "analyze_npz", "check_family",
           "is_npz", "load_orbit_npz"]

RESERVED = ("z", "labels", "xi")
LAYOUT = ("z (N, K, D_z) and head points (N, K, D) under their own names, optional labels (N,) "
          "and xi (K,)")
CONTROLS_OMITTED = ("the fresh-head and random-direction controls run a head on z, so they need "
                    "the model; an .npz holds embeddings only")
_FAMILY = re.compile(r"[A-Za-z0-9_.-]+")


class NpzFormatError(ValueError):
    """The .npz does not hold orbit embeddings in headgeom's layout (nothing was analysed)."""


@dataclass(frozen=True)
class ExternalOrbits:
    """What :func:`load_orbit_npz` read: features point -> (N, K, D) ("z" first), labels (N,) or
    None, xi (K values) or None, and the file's arrays {name: {"shape", "dtype"}} and sha256."""

    path: Path
    sha256: str
    features: dict[str, Tensor]
    labels: Tensor | None
    xi: list[float] | None
    arrays: dict[str, dict[str, Any]]

    @property
    def heads(self) -> list[str]:
        return [p for p in self.features if p != "z"]


def is_npz(path: str | Path) -> bool:
    """Whether ``headgeom analyze`` should read ``path`` as orbit embeddings (a ``.npz`` name)."""
    return str(path).lower().endswith(".npz")


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    arrays = read_npz(path, NpzFormatError, unreadable="write one with numpy.savez(path, z=z, h=h)",
                      single=("not an .npz archive of named arrays; write one with numpy.savez(path, z=z, h=h): "
                              f"{LAYOUT}"),
                      damaged="the archive is damaged",
                      object_array="save numeric arrays, e.g. numpy.asarray(x, dtype=numpy.float32)")
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray):
            raise NpzFormatError(f"{path}: member {name!r} is not an .npy array; the archive "
                                 f"must hold only arrays ({LAYOUT})")
    return arrays


def _real(path: Path, name: str, a: np.ndarray, kinds: str, what: str) -> None:
    if a.dtype.kind not in kinds:
        raise NpzFormatError(f"{path}: array {name!r} has dtype {a.dtype}; {what}")


def _finite(path: Path, name: str, a: np.ndarray) -> None:
    bad = ~np.isfinite(a)
    if bad.any():
        where = np.argwhere(bad)[0]
        at = f"orbit {where[0]}, step {where[1]}" if a.ndim == 3 else f"index {where[0]}"
        raise NpzFormatError(f"{path}: array {name!r} holds {int(bad.sum())} NaN/inf value(s) "
                             f"(first at {at}); the embeddings must be finite")


def _features(path: Path, arrays: dict[str, np.ndarray]) -> dict[str, Tensor]:
    z = arrays["z"]
    if z.ndim != 3:
        flat = " (a flat (N·K, D) layout like the authors' orbit_visualization.npy: reshape it "\
               "as docs/analyze.md shows)" if z.ndim == 2 else ""
        raise NpzFormatError(f"{path}: 'z' must have shape (N orbits, K steps, D_z), got "
                             f"{z.shape}{flat}")
    n, k, _ = z.shape
    if n < 2 or k < 2 or z.shape[2] < 1:
        raise NpzFormatError(f"{path}: 'z' has shape {z.shape}; the bootstrap needs N >= 2 orbits "
                             f"and an orbit K >= 2 steps (and D_z >= 1)")
    heads = [name for name in arrays if name not in RESERVED]
    if not heads:
        raise NpzFormatError(f"{path} holds no head point: give at least one array (N, K, D) "
                             f"besides {sorted(arrays)} ({LAYOUT})")
    out = {}
    for name in ["z"] + heads:
        a = arrays[name]
        if a.ndim != 3:
            raise NpzFormatError(f"{path}: array {name!r} has shape {a.shape}; head points must be "
                                 f"(N, K, D) = ({n}, {k}, D) like 'z' (only labels (N,) and xi (K,) "
                                 f"may have other shapes)")
        if a.shape[:2] != (n, k):
            raise NpzFormatError(f"{path}: mismatched N or K: array {name!r} has (N, K) = "
                                 f"{a.shape[:2]} but 'z' has {(n, k)}; every point needs the "
                                 f"same orbits in the same order")
        if a.shape[2] < 1:
            raise NpzFormatError(f"{path}: array {name!r} has D = 0 features")
        _real(path, name, a, "fiu", "embeddings must be real numbers (float)")
        _finite(path, name, a)
        wide = a.dtype.kind in "iu" or a.dtype.itemsize >= 8
        out[name] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64 if wide else np.float32))
    return out


def _vector(path: Path, arrays: dict[str, np.ndarray], name: str, size: int, axis: str,
            kinds: str, what: str) -> np.ndarray | None:
    """The optional 1-D array ``name`` of ``size`` entries (one per ``axis``), or None."""
    if name not in arrays:
        return None
    a = arrays[name]
    if a.shape != (size,):
        raise NpzFormatError(f"{path}: '{name}' must have shape ({axis[0]},) = ({size},), one value "
                             f"per {axis[2:]}, got {a.shape}")
    _real(path, name, a, kinds, what)
    return a


def _labels(path: Path, arrays: dict[str, np.ndarray], n: int) -> Tensor | None:
    y = _vector(path, arrays, "labels", n, "N orbit", "iu", "labels must be integer class ids")
    if y is None:
        return None
    if np.unique(y).size < 2:
        raise NpzFormatError(f"{path}: 'labels' hold a single class ({y[0]}); D_inter needs two: "
                             f"give orbits of several classes or drop 'labels'")
    return torch.from_numpy(y.astype(np.int64))


def _xi(path: Path, arrays: dict[str, np.ndarray], k: int) -> list[float] | None:
    xi = _vector(path, arrays, "xi", k, "K step", "fiu", "xi must be real numbers")
    if xi is None:
        return None
    _finite(path, "xi", xi)
    return [float(v) for v in xi]


def load_orbit_npz(path: str | Path) -> ExternalOrbits:
    """Read and check orbit embeddings from an .npz (module docstring); never unpickles.

    Raises FileNotFoundError for a missing file and :class:`NpzFormatError` for anything else.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (or is not a file)")
    arrays = _read_arrays(path)
    if "z" not in arrays:
        raise NpzFormatError(f"{path} has no array 'z'; it holds {sorted(arrays) or 'nothing'}. "
                             f"Expected {LAYOUT}")
    features = _features(path, arrays)
    n, k, _ = features["z"].shape
    return ExternalOrbits(path=path, sha256=file_sha256(path), features=features,
                          labels=_labels(path, arrays, n), xi=_xi(path, arrays, k),
                          arrays={name: {"shape": list(a.shape), "dtype": str(a.dtype)}
                                  for name, a in arrays.items()})


def check_family(name: str) -> str:
    """The family name of external orbits (used in JSON keys and figure file names)."""
    if not isinstance(name, str) or not _FAMILY.fullmatch(name):
        raise ValueError(f"--family must be letters, digits, '_', '.' or '-' (it names "
                         f"figures/orbits_<family>.png), got {name!r}")
    return name


def analyze_external(ext: ExternalOrbits, family: str = "external", *, n_boot: int = 1000,
                     seed: int = 0, level: float = 0.95,
                     heads_fed_l2: bool = False) -> tuple[dict[str, Any], dict[str, bytes]]:
    """({"protocol", "definitions", "families": {family: ...}}, {figure name: PNG bytes}).

    ``heads_fed_l2``: the file's head points came from heads trained on raw z but fed z/‖z‖
    (the paper's protocol, e.g. the authors' released arrays); they are then flagged as out of
    distribution (headgeom.orbits.analyze.out_of_distribution).
    """
    family = check_family(family)
    n, k, _ = ext.features["z"].shape
    of = OrbitFeatures(family=family, xi=ext.xi if ext.xi is not None else [float(i) for i in range(k)],
                       identity_value=None, units="as given" if ext.xi is not None else "step index",
                       features=ext.features, anchors={}, anchor_step=None)
    fam = analyze_orbit_features(of, ext.labels, n_boot=n_boot, seed=seed, level=level,
                                 controls=False, l2_fed_points=ext.heads if heads_fed_l2 else [])
    fam["controls"] = {"omitted": CONTROLS_OMITTED}
    protocol = orbit_protocol(n, k, [family], "l2" if heads_fed_l2 else "as given", n_boot, seed,
                              level, stratified=ext.labels is not None, mean=None, std=None)
    dtypes = sorted({ext.arrays[p]["dtype"] for p in ext.features})
    protocol.update(normalisation={"mean": None, "std": None,
                                   "order": "not applicable: embeddings computed elsewhere"},
                    precision=f"features as given ({', '.join(dtypes)}), metrics float64")
    fig = plot_orbit_pca(orbit_pca_panels(ext.features, ext.labels, points=list(ext.features)),
                         title=f"{family} orbits ({of.units}), 2-D PCA of L2-normalised features")
    return ({"protocol": protocol, "definitions": DEFINITIONS, "families": {family: fam}},
            {f"orbits_{family}.png": figure_png_bytes(fig, bbox_inches=None)})  # constrained layout


def analyze_npz(path: str | Path, family: str = "external", *, n_boot: int = 1000, seed: int = 0,
                level: float = 0.95, heads_fed_l2: bool = False) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The ``headgeom analyze`` result of an .npz (its "source", "data", "orbits", "notes",
    "tangent_metric" and "seconds"; the caller adds "command" and "environment") and figures."""
    t0 = time.perf_counter()
    family = check_family(family)
    ext = load_orbit_npz(path)
    orbits, figures = analyze_external(ext, family, n_boot=n_boot, seed=seed, level=level,
                                       heads_fed_l2=heads_fed_l2)
    labels = None if ext.labels is None else ext.labels.tolist()
    notes = ["tangent metric and Fisher ranks: not computed (they differentiate the model; an "
             ".npz holds embeddings only)"]
    if not heads_fed_l2:
        notes.append("the heads' input is not known from the file: points are flagged as out of "
                     "distribution only with --head-input l2 (heads fed z/||z|| though trained "
                     "on raw z); mean_pairwise_cosine is reported at every point")
    if ext.xi is None:
        notes.append("no 'xi' in the file: steps are numbered 0 to K-1")
    result = {
        "format": "headgeom.analyze", "version": 1,
        "source": {"kind": "npz", "path": str(ext.path), "sha256": ext.sha256, "arrays": ext.arrays},
        "data": {"n_images": int(ext.features["z"].shape[0]), "labels": labels,
                 "per_class": {str(c): labels.count(c) for c in sorted(set(labels))} if labels else {}},
        "orbits": orbits, "notes": notes,
        "tangent_metric": {"skipped": "needs the model (an .npz holds embeddings only)"},
        "seconds": {"total": time.perf_counter() - t0},
    }
    return result, figures

"""The authors' Hessian tracks, ``results/cifar10/resnet18/hessian_tracker/raw_data_<run>.npz``
(docs/paper.md §3.4 and §3.8; claim C8).

Each file holds, per epoch: ``epochs`` (E,) int, ``min_eigenvalues`` (E,) the authors' λ_min
estimate, ``variances`` (E,) and ``condition_numbers`` (E,). Three runs: a normally initialised
Swish head and pseudo-collapsed Swish and ReLU heads. The λ_min values are the authors' estimates,
by power iteration in float32 (docs/paper.md §3.4, pitfalls 4.1 and 4.2): their sign is not
resolved where they are near 1e-6 or smaller, and headgeom's exact spectra are the reference.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from headgeom.released.files import array, read_npz, require_keys
from headgeom.released.manifest import MANIFEST, Manifest, ReleasedFileError, verify_file
from headgeom.runs.safe_load import file_sha256

__all__ = ["ESTIMATOR", "HESSIAN_RUNS", "HessianTrack", "hessian_path", "parse_hessian", "read_hessian"]

HESSIAN_RUNS = ("normal_swish", "collapsed_swish", "collapsed_relu")
KEYS = ("epochs", "min_eigenvalues", "variances", "condition_numbers")
ESTIMATOR = ("the authors' estimate: power iteration in float32 on the Hessian-vector operator of the batch "
             "loss with respect to z1, 5 batches per epoch (docs/paper.md §3.4); not an exact eigenvalue")


@dataclass(frozen=True, eq=False)
class HessianTrack:
    """One tracked run: per epoch λ_min (the authors' estimate), variance and condition number."""

    run: str
    init: str  # "normal" or "collapsed" (pseudo-collapsed initialisation)
    activation: str
    path: Path
    sha256: str
    epochs: np.ndarray
    lambda_min: np.ndarray
    variance: np.ndarray
    condition: np.ndarray
    estimator: str = ESTIMATOR


def hessian_path(run: str) -> str:
    """The upstream path of the Hessian track ``run`` (one of :data:`HESSIAN_RUNS`)."""
    if run not in HESSIAN_RUNS:
        raise ReleasedFileError(f"no released Hessian track {run!r}; the authors released {', '.join(HESSIAN_RUNS)}")
    return f"results/cifar10/resnet18/hessian_tracker/raw_data_{run}.npz"


def parse_hessian(path: str | Path, run: str) -> HessianTrack:
    """Read a Hessian track file (no sha256 check: :func:`read_hessian` does that first)."""
    path = Path(path)
    data = read_npz(path)
    require_keys(path, data, KEYS)
    epochs = array(path, data, "epochs", (None,), "iu")
    n = epochs.shape[0]
    lam, var, cond = (array(path, data, k, (n,), "f") for k in KEYS[1:])
    init, _, activation = run.partition("_")
    return HessianTrack(run=run, init=init, activation=activation, path=path, sha256=file_sha256(path),
                        epochs=epochs, lambda_min=lam, variance=var, condition=cond)


def read_hessian(root: str | Path, run: str, manifest: Manifest = MANIFEST) -> HessianTrack:
    """The Hessian track ``run`` from the copy at ``root``, checked against ``manifest`` first."""
    return parse_hessian(verify_file(root, hessian_path(run), manifest), run)

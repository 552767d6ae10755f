"""What each claim reads from a copy of the authors' released results, as JSON-able metrics (docs/paper.md
§3.8): one *part* per claim and run, the cells of the registered experiment RELEASED
(headgeom.experiments.released_results), which judges them with the rules of headgeom.claims.

Every part also states the training budget of the runs it read, ``train_budget`` = {steps, batch, basis}:
from the log session that saved the file where there is one and it matches the file (epochs × whole
batches of the 50,000 training images, as :mod:`headgeom.claims.budget` counts the paper's), else from the
file's own epochs and the paper's protocol, the basis saying which.

Nothing here decides a verdict: a collapse-grid run is handed over as its spread series per seed with the
projector's output width (the escape rule, headgeom.claims.collapse_escape, judges them as it judges
headgeom's own runs), orbit measures come from headgeom.released.measures.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from headgeom.claims.budget import CIFAR10_TRAIN
from headgeom.claims.paper_budgets import COLLAPSE_GRID, HESSIAN_TRACKING, SIMCLR_PRETRAINING
from headgeom.heads.activations import ALIASES
from headgeom.released.collapse import read_collapse
from headgeom.released.depth import DEPTHS, read_depth
from headgeom.released.hessian import HESSIAN_RUNS, read_hessian
from headgeom.released.log import ExperimentLog, LogSession, read_log
from headgeom.released.manifest import Manifest
from headgeom.released.measures import depth_head, orbit_head, orbit_measures
from headgeom.released.orbits import ORBIT_BACKBONES, read_orbits
from headgeom.released.probes import (PROBE_RUNS, ROTATION_CHANCE, ROTATION_TEST_EXAMPLES, read_curvature,
                                     read_guillotine)
from headgeom.orbits.random_heads import BN_SETTINGS, excess_increase

__all__ = ["PARTS", "PROJECTOR_OUT", "PROJECTOR_OUT_BASIS", "part_cells", "read_part"]

PARTS = ("C5", "C8", "C9", "C11", "C12", "C3")
PROJECTOR_OUT = 2048  # k of the authors' projectors (docs/paper.md §3.2); the collapse files do not store it
PROJECTOR_OUT_BASIS = ("k = 2048, the paper's projector output (docs/paper.md §3.2); the files do not store it, and "
                       "no spread they hold exceeds 1/sqrt(2048) = 0.0221, as the spreads of the BN runs (outputs "
                       "centred by the last BN) would if k were smaller")


def part_cells() -> list[dict[str, Any]]:
    """One cell per claim and released run: C5 per collapse grid, C8 once (the three Hessian tracks), C9 per
    orbit file, C11 once (the three depths), C12 and C3 per guillotine/curvature run."""
    cells: list[dict[str, Any]] = [{"part": "C5", "dataset": d, "backbone": b} for d, b in PROBE_RUNS]
    cells.append({"part": "C8", "dataset": "cifar10", "backbone": "resnet18"})
    cells += [{"part": "C9", "dataset": "cifar10", "backbone": b} for b in ORBIT_BACKBONES]
    cells.append({"part": "C11", "dataset": "cifar10", "backbone": "resnet18"})
    cells += [{"part": p, "dataset": d, "backbone": b} for p in ("C12", "C3") for d, b in PROBE_RUNS]
    return cells


def _activation(name: str) -> str:
    return ALIASES.get(name, name)


def _budget(epochs: int, batch: int, basis: str) -> dict[str, Any]:
    return {"steps": int(epochs) * (CIFAR10_TRAIN // int(batch)), "batch": int(batch), "basis": basis}


def _session_saving(log: ExperimentLog, file_name: str) -> LogSession | None:
    """The log session that saved a file of this name (the logs name the folder as it was then)."""
    for s in log.sessions:
        if any(Path(p).name == file_name for p in s.saved):
            return s
    return None


def _collapse(root: Path, cell: dict[str, Any], manifest: Manifest) -> dict[str, Any]:
    grid = read_collapse(root, cell["dataset"], cell["backbone"], manifest)
    log = read_log(root, cell["dataset"], cell["backbone"], manifest)
    runs = []
    for r in grid.runs:
        # per seed what the escape rule reads; dead_head None: the dead-head rule needs H_eff, not stored
        seeds = [{"spread_projector": seed, "out_dim": PROJECTOR_OUT, "dead_head": None, "diverged": None}
                 for seed in r.spread.tolist()]
        runs.append({"key": r.key, "activation": _activation(r.activation), "bn": r.bn, "lr": r.lr_value,
                     "lr_label": r.lr, "seeds": r.seeds, "epochs": r.epochs, "spread": r.spread.tolist(),
                     "outcomes": seeds})
    epochs = max(r.epochs for r in grid.runs)
    s = _session_saving(log, "collapse_results.npy")
    if s is not None and s.collapse_epochs == epochs:
        basis = (f"the log ({log.path.name}, session {s.log_name}): {s.collapse_epochs} epochs at batch "
                 f"{s.batch_size}, {s.seeds} seeds")
        batch = int(s.batch_size)
    else:
        batch = COLLAPSE_GRID.batch
        ran = f"its session ran {s.collapse_epochs} epochs" if s is not None else "no session saved it"
        basis = (f"the file holds {epochs} epochs per run; the log does not record these runs ({ran}), so the "
                 f"paper's batch {batch} is assumed (docs/paper.md §3.3)")
    return {"runs": runs, "file": str(grid.path), "sha256": grid.sha256, "out_dim": PROJECTOR_OUT,
            "out_dim_basis": PROJECTOR_OUT_BASIS, "train_budget": _budget(epochs, batch, basis)}


def _hessian(root: Path, manifest: Manifest) -> dict[str, Any]:
    runs, files = {}, []
    for run in HESSIAN_RUNS:
        t = read_hessian(root, run, manifest)
        runs[f"{t.init}-{_activation(t.activation)}"] = {
            "activation": _activation(t.activation), "init": t.init, "epochs": t.epochs.tolist(),
            "lambda_min": t.lambda_min.tolist(), "floor": None, "estimator": t.estimator}
        files.append(str(t.path))
        epochs = len(t.epochs)
    basis = (f"no log; the files hold {epochs} epochs, batch {HESSIAN_TRACKING.batch} of the paper's protocol "
             "assumed (docs/paper.md §3.4)")
    return {"runs": runs, "files": files, "train_budget": _budget(epochs, HESSIAN_TRACKING.batch, basis)}


def _logged_budget(root: Path, cell: dict[str, Any], manifest: Manifest, file_name: str) -> dict[str, Any]:
    """The SimCLR pre-training budget of the log session that saved ``file_name``; the paper's protocol
    when no session of the log says it saved it."""
    log = read_log(root, cell["dataset"], cell["backbone"], manifest)
    s = _session_saving(log, file_name)
    if s is None:
        return _budget(SIMCLR_PRETRAINING.epochs, SIMCLR_PRETRAINING.batch,
                       f"no session of the log ({log.path.name}) saved {file_name}: the paper's SimCLR protocol "
                       f"assumed (docs/paper.md §3.5), {SIMCLR_PRETRAINING.epochs} epochs at batch "
                       f"{SIMCLR_PRETRAINING.batch}")
    return _budget(int(s.guillotine_epochs), int(s.batch_size),
                   f"the log ({log.path.name}, session {s.log_name}, which saved {file_name}): SimCLR pre-training "
                   f"of {s.guillotine_epochs} epochs at batch {s.batch_size}")


def _pairing(grids: dict[int, Any]) -> dict[str, float]:
    """Correlation, between two depths, of the cosines between the orbit images at angle 0: near 1 when the
    depths' files hold the same images in the same order (their backbones differ), which pairs their
    bootstrap rows (headgeom.orbits.random_heads.excess_increase); far lower between different images."""
    def cosines(z: np.ndarray) -> np.ndarray:
        a = z[:, 0, :] / np.linalg.norm(z[:, 0, :], axis=1, keepdims=True)
        return (a @ a.T)[np.triu_indices(a.shape[0], 1)]
    ds = sorted(grids)
    return {f"depth {a} vs {b}": float(np.corrcoef(cosines(grids[a].z), cosines(grids[b].z))[0, 1])
            for i, a in enumerate(ds) for b in ds[i + 1:]}


def _depths(root: Path, manifest: Manifest, n_boot: int, level: float, levels: tuple[float, ...], seed: int,
            draws: int) -> dict[str, Any]:
    """C11: per depth the orbit measures, the random-head control and the probe accuracies; the learned
    selectivity's increase from the shallowest to the deepest head (per control BN setting)."""
    depths, grids = {}, {}
    for d in DEPTHS:
        a = read_depth(root, d, manifest)
        grids[d] = a.grid
        depths[d] = {"measures": orbit_measures(a.grid, n_boot=n_boot, seed=seed, level=level, levels=levels,
                                                head=depth_head(d, a.grid), draws=draws, keep_rows=True),
                     "acc_backbone_linear": a.acc_backbone_linear, "acc_head_linear": a.acc_head_linear,
                     "n_images": a.grid.images, "file": str(a.path)}
    strata = grids[DEPTHS[0]].labels
    increase = {bn: excess_increase({d: v["measures"]["random_heads"] for d, v in depths.items()}, n_boot,
                                    torch.from_numpy(strata).to(torch.int64), level=level, levels=levels, bn=bn)
                for bn in BN_SETTINGS}
    for v in depths.values():  # the rows served the increase; the cell keeps their summaries
        v["measures"]["random_heads"].pop("rows")
    return {"depths": {str(d): v for d, v in depths.items()}, "increase": increase, "image_pairing": _pairing(grids)}


def read_part(root: str | Path, cell: dict[str, Any], *, manifest: Manifest, n_boot: int, level: float,
              seed: int = 0, levels: tuple[float, ...] = (), control_draws: int = 20) -> dict[str, Any]:
    """The metrics of one part (:func:`part_cells`) from the copy at ``root``; every file is checked
    against ``manifest`` before it is read (headgeom.released.ReleasedFileError when one is bad).
    ``levels``: the CI levels every interval is also given at; ``control_draws``: random heads per control."""
    root = Path(root)
    part = cell["part"]
    if part == "C5":
        return _collapse(root, cell, manifest)
    if part == "C8":
        return _hessian(root, manifest)
    if part == "C9":
        o = read_orbits(root, cell["backbone"], manifest)
        return {"measures": orbit_measures(o, n_boot=n_boot, seed=seed, level=level, levels=levels,
                                           head=orbit_head(o.grid), draws=control_draws), "file": str(o.path),
                "n_images": o.grid.images, "angles": o.grid.steps, "classes": list(o.class_names),
                "dims": {"z": int(o.grid.z.shape[-1]), "h": int(o.grid.h.shape[-1])},
                "train_budget": _logged_budget(root, cell, manifest, "orbit_visualization.npy")}
    if part == "C11":
        basis = ("no log; the paper's SimCLR protocol assumed (docs/paper.md §3.5): "
                 f"{SIMCLR_PRETRAINING.epochs} epochs at batch {SIMCLR_PRETRAINING.batch}")
        return {**_depths(root, manifest, n_boot, level, levels, seed, control_draws), "num_classes": 10,
                "n_test": ROTATION_TEST_EXAMPLES, "chance": ROTATION_CHANCE,
                "train_budget": _budget(SIMCLR_PRETRAINING.epochs, SIMCLR_PRETRAINING.batch, basis)}
    if part == "C12":
        g = read_guillotine(root, cell["dataset"], cell["backbone"], manifest)
        return {"accuracy": {"linear": {"z": g.backbone_linear, "h": g.head_linear},
                             "mlp": {"z": g.backbone_mlp, "h": g.head_mlp}}, "file": str(g.path),
                "n_test": ROTATION_TEST_EXAMPLES, "chance": ROTATION_CHANCE,
                "train_budget": _logged_budget(root, cell, manifest, "guillotine_results.npy")}
    if part == "C3":
        c = read_curvature(root, cell["dataset"], cell["backbone"], manifest)
        return {"curvature_z": c.curvature_z.tolist(), "curvature_h": c.curvature_h.tolist(),
                "ratio": c.ratio.tolist(), "file": str(c.path),
                "train_budget": _logged_budget(root, cell, manifest, "curvature_results.npy")}
    raise ValueError(f"unknown released part {part!r}; the parts are {', '.join(PARTS)}")

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

from headgeom.claims.budget import CIFAR10_TRAIN
from headgeom.claims.paper_budgets import COLLAPSE_GRID, HESSIAN_TRACKING, SIMCLR_PRETRAINING
from headgeom.heads.activations import ALIASES
from headgeom.released.collapse import read_collapse
from headgeom.released.depth import DEPTHS, read_depth
from headgeom.released.hessian import HESSIAN_RUNS, read_hessian
from headgeom.released.log import ExperimentLog, LogSession, read_log
from headgeom.released.manifest import Manifest
from headgeom.released.measures import orbit_measures
from headgeom.released.orbits import ORBIT_BACKBONES, read_orbits
from headgeom.released.probes import PROBE_RUNS, read_curvature, read_guillotine

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


def read_part(root: str | Path, cell: dict[str, Any], *, manifest: Manifest, n_boot: int, level: float,
              seed: int = 0) -> dict[str, Any]:
    """The metrics of one part (:func:`part_cells`) from the copy at ``root``; every file is checked
    against ``manifest`` before it is read (headgeom.released.ReleasedFileError when one is bad)."""
    root = Path(root)
    part = cell["part"]
    if part == "C5":
        return _collapse(root, cell, manifest)
    if part == "C8":
        return _hessian(root, manifest)
    if part == "C9":
        o = read_orbits(root, cell["backbone"], manifest)
        return {"measures": orbit_measures(o, n_boot=n_boot, seed=seed, level=level), "file": str(o.path),
                "n_images": o.grid.images, "angles": o.grid.steps, "classes": list(o.class_names),
                "dims": {"z": int(o.grid.z.shape[-1]), "h": int(o.grid.h.shape[-1])},
                "train_budget": _logged_budget(root, cell, manifest, "orbit_visualization.npy")}
    if part == "C11":
        depths = {}
        for d in DEPTHS:
            a = read_depth(root, d, manifest)
            depths[str(d)] = {"measures": orbit_measures(a.grid, n_boot=n_boot, seed=seed, level=level),
                              "acc_backbone_linear": a.acc_backbone_linear, "acc_head_linear": a.acc_head_linear,
                              "n_images": a.grid.images, "file": str(a.path)}
        basis = ("no log; the paper's SimCLR protocol assumed (docs/paper.md §3.5): "
                 f"{SIMCLR_PRETRAINING.epochs} epochs at batch {SIMCLR_PRETRAINING.batch}")
        return {"depths": depths, "num_classes": 10,
                "train_budget": _budget(SIMCLR_PRETRAINING.epochs, SIMCLR_PRETRAINING.batch, basis)}
    if part == "C12":
        g = read_guillotine(root, cell["dataset"], cell["backbone"], manifest)
        return {"accuracy": {"linear": {"z": g.backbone_linear, "h": g.head_linear},
                             "mlp": {"z": g.backbone_mlp, "h": g.head_mlp}}, "file": str(g.path),
                "train_budget": _logged_budget(root, cell, manifest, "guillotine_results.npy")}
    if part == "C3":
        c = read_curvature(root, cell["dataset"], cell["backbone"], manifest)
        return {"curvature_z": c.curvature_z.tolist(), "curvature_h": c.curvature_h.tolist(),
                "ratio": c.ratio.tolist(), "file": str(c.path),
                "train_budget": _logged_budget(root, cell, manifest, "curvature_results.npy")}
    raise ValueError(f"unknown released part {part!r}; the parts are {', '.join(PARTS)}")

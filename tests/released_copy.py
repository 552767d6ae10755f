"""A small synthetic copy of the authors' released results, file for file in their layout and
formats (pickled dicts saved with numpy.save, numpy.savez archives, logs in their line format), with
a manifest of its own sizes and sha256, so every reader of headgeom.released is tested whether or
not the real copy is present. ``expected`` holds what each file was built from; :class:`Response` serves
a file to a faked download."""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headgeom.released.manifest import MANIFEST, Manifest, ManifestEntry

N_PER_CLASS, CLASSES, K = 2, (0, 2, 9), 4
ANGLES = np.arange(K) * 90.0


@dataclass
class SyntheticCopy:
    root: Path
    manifest: Manifest
    expected: dict = field(default_factory=dict)

    def file(self, path: str) -> Path:
        return self.root / path

    def repin(self) -> None:
        """Pin the files as they are now (after a test changed one on purpose)."""
        self.manifest = manifest_of(self.root)


class Response(io.BytesIO):
    """What a faked ``urllib.request.urlopen`` returns for a served file (a context manager, as the real one)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def manifest_of(root: Path) -> Manifest:
    files = []
    for entry in MANIFEST.files:
        p = root / entry.path
        data = p.read_bytes() if p.is_file() else b""
        files.append(ManifestEntry(entry.path, len(data), hashlib.sha256(data).hexdigest()))
    return Manifest(source="https://example.invalid/authors/repo", commit="0" * 40,
                    raw_url_pattern="https://example.invalid/raw/<commit>/<path>", files=tuple(files))


def _collapse(rng, keys, epochs, extra):
    out = {}
    for key in keys:
        entry = {}
        for name in [""] + list(extra):
            raw = rng.uniform(1e-6, 1e-2, size=(3, epochs))
            pre = f"{name}_" if name else ""
            entry[f"{pre}mean"], entry[f"{pre}std"], entry[f"{pre}raw"] = raw.mean(0), raw.std(0), raw
        out[key] = entry
    return out


def _flat_orbits(rng, dz, dh):
    """(grid, flat dict): orbits (N, K, D) and the authors' flat rows, orbits and angles shuffled."""
    labels = np.repeat(CLASSES, N_PER_CLASS)
    n = labels.size
    z = rng.normal(size=(n, K, dz)).astype(np.float32)
    h = rng.normal(size=(n, K, dh)).astype(np.float32)
    rows = rng.permutation(n * K)  # the authors' rows are orbit blocks; any order must come back
    ids = np.repeat(np.arange(n), K)
    flat = {"orbits_z": z.reshape(n * K, dz)[rows], "orbits_h": h.reshape(n * K, dh)[rows],
            "orbit_ids": ids[rows], "orbit_labels": np.repeat(labels, K)[rows],
            "orbit_angles": np.tile(ANGLES, n)[rows]}
    return {"z": z, "h": h, "labels": labels, "angles": ANGLES}, flat


LOG = """14:13:58 - INFO - Logging to logs/20260108_141358.log
14:13:59 - INFO - Device: cuda
14:13:59 - INFO - PyTorch version: 2.9.1+cu128
14:13:59 - INFO - Configuration:
14:13:59 - INFO -   Dataset: {dataset}
14:13:59 - INFO -   Batch size: 512
14:13:59 - INFO -   Num seeds: 3
14:13:59 - INFO -   Collapse epochs: 20
14:13:59 - INFO -   Guillotine epochs: 50
14:13:59 - INFO -   Probe epochs: 5
14:13:59 - INFO -   Learning rates: collapse=0.05, guillotine=0.001
14:13:59 - INFO - EXPERIMENT 1: Collapse Dynamics ({dataset})
14:14:03 - INFO - [{dataset}] Exp 1: relu head (Seed 0)
15:04:42 - INFO - [{dataset}] Exp 1: relu head (Seed 1)
18:20:10 - INFO - Saved collapse data to results/{dataset}/collapse_results.npy
19:04:53 - INFO -   Backbone - Linear Probe: {bl}
19:04:53 - INFO -   Backbone - MLP Probe:    {bm} (Gap: +0.0319)
19:04:53 - INFO -   Head - Linear Probe:     {hl}
19:04:53 - INFO -   Head - MLP Probe:        {hm} (Gap: +0.0601)
19:05:38 - INFO - Total runtime: 291.66 minutes (17499.6 seconds)
"""


def write_copy(root: Path, seed: int = 0) -> SyntheticCopy:
    """Every pinned path of the real manifest, written under ``root`` with small synthetic content."""
    rng = np.random.default_rng(seed)
    exp: dict = {}
    r = root / "results"
    for d, b, keys, epochs, extra in (
            ("cifar10", "resnet18", ["linear_bn_False_lr_base", "relu_bn_True_lr_small", "swish_bn_False_lr_large"],
             5, ["cond_nums", "proj_update_norms"]),
            ("cifar10", "vit_tiny", ["relu_bn_False_lr_base", "gelu_bn_False_lr_base"], 5, ["cond_nums", "grad_norms"]),
            ("cifar100", "resnet18", ["linear", "relu"], 4, [])):
        folder = r / d / b
        folder.mkdir(parents=True, exist_ok=True)
        grid = _collapse(rng, keys, epochs, extra)
        np.save(folder / "collapse_results.npy", grid)
        exp[("collapse", d, b)] = grid
        acc = {k: float(np.round(rng.uniform(0.2, 0.6), 4)) for k in
               ("backbone_acc_linear", "head_acc_linear", "backbone_acc_mlp", "head_acc_mlp")}
        np.save(folder / "guillotine_results.npy", {**acc, "gap_backbone": 0.0, "gap_head": 0.0, "dataset": d})
        exp[("guillotine", d, b)] = acc
        cz, ch = rng.uniform(0.1, 0.2, 3).astype(np.float32), rng.uniform(0.2, 0.3, 3).astype(np.float32)
        np.save(folder / "curvature_results.npy",
                {"curvatures_z_per_seed": list(cz), "curvatures_h_per_seed": list(ch), "ratios_per_seed": list(ch / cz),
                 "mean_curv_z": cz.mean(), "std_curv_z": cz.std(), "mean_curv_h": ch.mean(), "std_curv_h": ch.std(),
                 "mean_ratio": (ch / cz).mean(), "std_ratio": (ch / cz).std(), "num_seeds": 3, "dataset": d})
        exp[("curvature", d, b)] = (cz, ch)
        (folder / "experiment_log.txt").write_text(LOG.format(
            dataset=d, bl=acc["backbone_acc_linear"], bm=acc["backbone_acc_mlp"], hl=acc["head_acc_linear"],
            hm=acc["head_acc_mlp"]))
    for b, dz in (("resnet18", 6), ("vit_tiny", 5)):
        grid, flat = _flat_orbits(rng, dz, 8)
        np.save(r / "cifar10" / b / "orbit_visualization.npy",
                {**flat, "selected_classes": list(CLASSES), "class_names": ["airplane", "bird", "truck"],
                 "num_rotations": K, "num_classes": len(CLASSES), "images_per_class": N_PER_CLASS,
                 "dataset": "cifar10"})
        exp[("orbits", b)] = grid
    (r / "cifar10/resnet18/hessian_tracker").mkdir()
    for run in ("normal_swish", "collapsed_swish", "collapsed_relu"):
        track = {"epochs": np.arange(7), "min_eigenvalues": rng.normal(scale=1e-6, size=7),
                 "variances": rng.uniform(size=7), "condition_numbers": rng.uniform(1e3, 1e5, size=7)}
        np.savez(r / f"cifar10/resnet18/hessian_tracker/raw_data_{run}.npz", **track)
        exp[("hessian", run)] = track
    (r / "cifar10/resnet18/head_depth_ablations").mkdir()
    for depth in (1, 2, 3):
        grid, flat = _flat_orbits(rng, 6, 8)
        acc = {"acc_z_linear": np.float64(0.5), "acc_h_linear": np.float64(0.5 - 0.05 * depth)}
        np.savez(r / f"cifar10/resnet18/head_depth_ablations/geometric_ablation_depth_{depth}.npz",
                 depth=np.int64(depth), curvatures_z=rng.uniform(size=9).astype(np.float32),
                 curvatures_h=rng.uniform(size=9).astype(np.float32), **acc, **flat)
        exp[("depth", depth)] = grid
    return SyntheticCopy(root=root, manifest=manifest_of(root), expected=exp)

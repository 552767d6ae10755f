"""C10, §6.3 (pretrained dichotomy): do DINO heads compress augmentation orbits while VICReg and
Barlow Twins heads expand them? Measured on the official full checkpoints.

Checkpoints (headgeom.checkpoints.pretrained_files): DINO ViT-S/16 and DINO ResNet-50 (the teacher, as
DINO evaluates it), VICReg ResNet-50 and Barlow Twins ResNet-50, read by
``headgeom.checkpoints.load_checkpoint`` (no pickled code runs; sha256 recorded). One cell per
file; an absent file gives an "absent" cell, and every claim that needs it is ``inconclusive``
with the exact file names, the directory and the official download addresses in the report.

Protocol (docs/paper.md §3 "Pretrained", §4 pitfalls 4-6): CIFAR-10 test images (the first
``per_class`` of each of the first ``n_classes`` classes, in file order), resized from 32 px to
``image_size`` (224) by bilinear interpolation *before* the augmentation, so geometric and blur
parameters are in 224-px units; orbits of ``steps`` values of each family on [0, 1] pixels; then
ImageNet mean/std normalisation; features of the backbone z and of every head layer, the head
fed raw z (default, the trained map) and the paper's z/‖z‖ (pitfall 5). Metrics
(headgeom.orbits.analyze_orbits, BCa bootstrap over images stratified by class) at the
head's output h(z), all as z over h(z) (> 1: the orbit variance falls through the head):

- ``per_dim_ratio_raw``: (tr Σ_z / D_z) / (tr Σ_h / D_h), the paper's per-dimension variance ratio;
- ``trace_ratio_raw``: tr Σ_z / tr Σ_h, dimension-fair (pitfall 4); per_dim = trace · D_h / D_z;
- ``trace_ratio`` / ``per_dim_ratio``: the same on L2-normalised features (trace_ratio = C9's
  compression), and ``class_orbit_change``: class/orbit ratio of h over that of z;
- controls: a freshly initialised head of the same architecture, random-direction orbits.

- ``selectivity`` = trace_ratio / ``global_ratio`` (global spread of all orbit points of z over
  that of h(z), L2-normalised) and ``compression_centred`` (headgeom.orbits.selective).

Σ is the within-orbit covariance, averaged over images. The verdicts use ``selectivity`` with
raw head input (the summary, :mod:`.summary`, says why: the raw trace ratio depends on the two spaces' scales, the
L2 ratios on their centring and on global shrinkage; selectivity compares each orbit with the
cloud it lives in, in its own space). The report shows the verdict every other metric would give,
the paper's per-dimension ratio beside the trace ratio (they differ by D_h / D_z alone, pitfall
4), and the mean pairwise cosine at the head for each head input: z/‖z‖ into a head trained on
raw z is out of distribution (pitfall 5).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from headgeom.checkpoints import load_checkpoint
from headgeom.checkpoints.pretrained_files import EXPECTED_FILES, checkpoints_dir, file_cell, placement_message
from headgeom.data import DATASET_STATS, load_dataset
from headgeom.eval.features import point_modules, point_names
from headgeom.experiments.c10_pretrained.summary import STATEMENT, summarize
from headgeom.experiments.registry import Experiment, register
from headgeom.launch.resources import Resources
from headgeom.orbits import analyze_orbits
from headgeom.orbits.model_input import prepare_images
from headgeom.report.paper_protocol import PaperProtocol

__all__ = ["C10Config", "FAMILIES", "RATIO_KEYS", "STATEMENT", "cells", "load_images", "quick", "small", "paper",
           "run_cell", "summarize"]

FAMILIES = ("rotation_45", "hue", "saturation", "blur")  # the paper's pretrained orbits
RATIO_KEYS = ("per_dim_ratio_raw", "trace_ratio_raw", "per_dim_ratio", "trace_ratio", "class_orbit_change",
              "global_ratio", "selectivity", "compression_centred")


@dataclass(frozen=True)
class C10Config:
    """Every setting of C10 (see the module docstring)."""

    preset: str = "quick"
    checkpoints_dir: str | None = None  # None: $HEADGEOM_CHECKPOINTS (set by `reproduce --checkpoints DIR`)
    releases: tuple[str, ...] = tuple(EXPECTED_FILES)
    which: str = "teacher"  # the DINO network analysed
    data: str = "cifar10"
    data_dir: str | None = None  # None: $HEADGEOM_DATA
    data_options: tuple[tuple[str, Any], ...] = ()
    split: str = "test"
    n_classes: int = 5
    per_class: int = 3
    image_size: int = 224  # ImageNet models: 224-px inputs
    families: tuple[str, ...] = ("rotation_45", "hue")
    steps: int = 6
    head_inputs: tuple[str, ...] = ("raw", "l2")
    n_boot: int = 200
    level: float = 0.95
    seed: int = 0  # bootstrap and controls
    controls: bool = True
    batch_size: int = 64  # augmented images per backbone batch
    device: str = "auto"  # "auto": cuda when available, else cpu
    num_threads: int | None = None


def quick() -> C10Config:
    """15 CIFAR-10 test images (5 classes × 3) at 224 px, rotation 0-45° and hue ±0.4, 6 steps.

    Command: ``headgeom reproduce --only C10 --preset quick --checkpoints DIR``. Runtime: under a
    second without the files (all claims inconclusive; the report lists what to place where).
    With files, about 195 224-px forward passes per checkpoint: measured on full-size synthetic
    files of the official layouts, 166 s (DINO ViT-S/16, 65536-d head) and 256 s (VICReg
    ResNet-50, 8192-d head) per cell on 2 CPU cores shared with other jobs (load average ~11),
    so about 15 min for the four (less on an idle machine); seconds per cell on one GPU, plus
    loading each file (8-13 s).
    """
    return C10Config(preset="quick")


def small() -> C10Config:
    """30 images (10 classes × 3), the paper's four families at 12 steps, 500 bootstrap resamples.

    Command: ``headgeom reproduce --only C10 --preset small --checkpoints DIR``. Runtime: about
    1,530 224-px forward passes per checkpoint, 8× quick: estimated 1-2 h on 2 CPU cores from
    the measured quick cells, a few minutes on one GPU.
    """
    return C10Config(preset="small", n_classes=10, per_class=3, families=FAMILIES, steps=12, n_boot=500)


def paper() -> C10Config:
    """The paper's protocol: 50 CIFAR-10 test images (10 classes × 5) at 224 px, 12-step orbits of
    rotation 0-45°, hue ±0.4, saturation 0-2 and blur σ 0.1-3.0, 1,000 bootstrap resamples.

    Command: ``headgeom reproduce --only C10 --preset paper --checkpoints DIR``. Runtime: about
    2,550 224-px forward passes per checkpoint, 13× quick: estimated 2-3 h on 2 CPU cores from
    the measured quick cells, a few minutes on one GPU.
    """
    return C10Config(preset="paper", n_classes=10, per_class=5, families=FAMILIES, steps=12, n_boot=1000)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# one GPU per checkpoint: about 2,550 224-px forward passes, a few minutes (estimated, not measured)
RESOURCES = {"paper": Resources(gpus=1, cpus=8, mem_gb=32, time_min=60, expected_min=5)}


def _validate(config: C10Config) -> None:
    bad = [r for r in config.releases if r not in EXPECTED_FILES]
    if bad or not config.releases:
        raise ValueError(f"C10 config releases {list(config.releases)} must be a non-empty subset of "
                         f"{list(EXPECTED_FILES)}")
    if config.which not in ("teacher", "student"):
        raise ValueError(f"C10 config which={config.which!r}: the DINO network is 'teacher' or 'student'")
    if "raw" not in config.head_inputs:
        raise ValueError(f"C10 config head_inputs {config.head_inputs} must include 'raw' (the verdicts use "
                         f"the head fed raw z)")
    if config.n_classes < 2 or config.per_class < 2:
        raise ValueError(f"C10 needs at least 2 classes and 2 images per class (class/orbit ratio and a class-"
                         f"stratified bootstrap); got n_classes={config.n_classes}, per_class={config.per_class}")


def cells(config: C10Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per checkpoint file: where it is expected and whether (size, mtime) it is there.

    The directory is read now (config.checkpoints_dir, else $HEADGEOM_CHECKPOINTS), so a rerun
    after the files appear yields new cells. ``seeds`` is ignored: the checkpoints are fixed and
    the bootstrap seed is ``config.seed``.
    """
    _validate(config)
    directory = checkpoints_dir(config.checkpoints_dir)
    return [file_cell(r, directory) for r in config.releases]


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_images(config: C10Config) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """(images float (N, 3, S, S) in [0, 1], labels (N,), description): the first ``per_class``
    images of each of the first ``n_classes`` classes of the split, resized to S = image_size."""
    ds = load_dataset(config.data, split=config.split, data_dir=config.data_dir, **dict(config.data_options))
    if ds.num_classes < config.n_classes:
        raise ValueError(f"{config.data}/{config.split} has {ds.num_classes} classes; C10 asks for "
                         f"n_classes={config.n_classes}")
    idx = []
    for c in range(config.n_classes):
        where = torch.nonzero(ds.labels == c).flatten()[:config.per_class]
        if where.numel() < config.per_class:
            raise ValueError(f"{config.data}/{config.split} has {where.numel()} images of class {c}; C10 asks "
                             f"for per_class={config.per_class}")
        idx.append(where)
    index = torch.cat(idx)
    native = tuple(ds.images.shape[-2:])
    # bilinear on [0, 1] pixels, clamped (the same resize as `headgeom analyze`), before the orbit
    x = prepare_images(ds.images[index], config.image_size)
    info = {"data": config.data, "split": config.split, "indices": index.tolist(),
            "classes": [ds.classes[c] for c in range(config.n_classes)], "native_size": list(native),
            "image_size": config.image_size,
            "resize": "bilinear (antialias) on [0, 1] pixels before the augmentation" if native != (
                config.image_size, config.image_size) else "none"}
    return x, ds.labels[index].clone(), info


def run_cell(config: C10Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Orbit ratios of one checkpoint (or, for an absent file, where to place it)."""
    if not cell.get("present"):
        return {"status": "absent", "release": cell["release"], "file": cell["file"], "dir": cell.get("dir"),
                "message": placement_message([cell["release"]], cell.get("dir"))}
    return _analyse(config, cell)


def _last_points(names: list[str], head_inputs: tuple[str, ...]) -> dict[str, str]:
    """{head input: the name of the head's output point} ("head.<i>" raw, "l2z/head.<i>" l2)."""
    out = {}
    for v in head_inputs:
        mine = [n for n in names if n != "z" and n.startswith("l2z/") == (v == "l2")]
        out[v] = mine[-1]
    return out


def _compact(fr: dict[str, Any], last: dict[str, str], modules: dict[str, str]) -> dict[str, Any]:
    """The parts of one family's analyze_orbits result that C10 reports (``modules``: point -> the
    layer it reads, from headgeom.eval.features.point_modules)."""
    dims = fr["dims"]
    out: dict[str, Any] = {
        "dim_z": dims["z"], "dim_head": dims[last["raw"]], "xi": fr["xi"], "units": fr["units"],
        "ratios": {v: {k: fr["ratios"][p][k] for k in RATIO_KEYS if k in fr["ratios"][p]} for v, p in last.items()},
        "class_orbit_ratio": {"z": fr["points"]["z"].get("class_orbit_ratio"),
                              **{v: fr["points"][p].get("class_orbit_ratio") for v, p in last.items()}},
        "mean_pairwise_cosine_h": {v: fr["points"][p].get("mean_pairwise_cosine") for v, p in last.items()},
        "by_point": {p: {"dim": dims[p], "module": modules.get(p.removeprefix("l2z/"), ""),
                         "trace_ratio_raw": r["trace_ratio_raw"]["value"],
                         "per_dim_ratio_raw": r["per_dim_ratio_raw"]["value"]} for p, r in fr["ratios"].items()},
    }
    if "controls" in fr:
        keys = ("trace_ratio_raw", "per_dim_ratio_raw")
        out["controls"] = {c: {v: {k: fr["controls"][c]["ratios"][p][k] for k in keys} for v, p in last.items()}
                           for c in ("fresh_head", "random_directions")}
    return out


def _analyse(config: C10Config, cell: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    release = cell["release"]
    path = Path(cell["dir"]) / cell["file"]
    if not path.is_file():
        raise FileNotFoundError(f"{path} was listed when the cells were made but is gone; "
                                + placement_message([release], cell["dir"]))
    model = load_checkpoint(path, which=config.which if release.startswith("dino") else None)
    if model.release != release:
        raise ValueError(f"{path} holds a {model.release!r} checkpoint, but C10 reads the official "
                         f"{EXPECTED_FILES[release].label} file under this name ({release!r}); put the right file "
                         "there")
    if model.head is None:
        raise ValueError(f"{path} has no projection head ({model.release}); C10 needs the full checkpoint, "
                         f"download {EXPECTED_FILES[release].url}")
    t_load = time.perf_counter() - t0
    device = _device(config.device)
    images, labels, image_info = load_images(config)
    heads = {"head": model.head.to(device)}
    stats = DATASET_STATS["imagenet"]
    res = analyze_orbits(model.backbone.to(device), heads, images, labels, list(config.families), config.steps,
                         head_input=tuple(config.head_inputs), n_boot=config.n_boot, seed=config.seed,
                         level=config.level, controls=config.controls, batch_size=config.batch_size,
                         device=device, mean=stats.mean, std=stats.std)
    last = _last_points(point_names(heads, tuple(config.head_inputs)), tuple(config.head_inputs))
    summary = model.summary()
    return {
        "status": "measured", "release": release, "file": str(path), "sha256": model.sha256,
        "sha256_check": summary["sha256_check"], "backbone": summary["backbone"], "head": summary["head"],
        "missing_keys": summary["missing"], "unexpected_keys": summary["unexpected"], "loader_notes": summary["notes"],
        "which": config.which if release.startswith("dino") else None, "head_points": last,
        "images": image_info, "n_images": int(images.shape[0]), "protocol": res["protocol"],
        "families": {f: _compact(res["families"][f], last, point_modules(heads)) for f in config.families},
        "device": str(device), "load_seconds": t_load, "seconds": time.perf_counter() - t0,
    }


PAPER_PROTOCOL = PaperProtocol({"test_images": 50, "image_size": 224, "steps": 12, "releases": 4,
                                "families": ("rotation_45", "hue", "saturation", "blur")})  # docs/paper.md#c10

EXPERIMENT = register(Experiment(
    id="C10",
    title="Pretrained dichotomy: DINO heads compress orbits, VICReg and Barlow Twins heads expand (§6.3)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    resources=RESOURCES,
    protocol=PAPER_PROTOCOL,
))

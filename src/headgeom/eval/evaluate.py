"""Evaluate a frozen SSL model at every point of the guillotine sweep (claim C12, docs/paper.md#c12).

:func:`evaluate_model` runs, for the backbone output z and the output of every head layer
(points of :mod:`headgeom.eval.features`):

- the class probes: weighted kNN (cosine, k = 200, T = 0.1; :mod:`.knn`) and the linear probe
  (standardised features, float64 L-BFGS, weight decay 1e-4; :mod:`.linear_probe`), and on
  request (``mlp=True``) the MLP probe (one hidden ReLU layer of 512, AdamW, 50 epochs;
  :mod:`.mlp_probe`), trained on the train split and scored top-1 on the test split;
- the paper's 4-way rotation probe (:mod:`.rotation`), linear, on a seeded subset of the
  train split (default 10,000 images × 4 rotations) and the class probes' test images;
- representation statistics of the test features (:mod:`.rankme`): RankMe, spread of the
  L2-normalised outputs, their total variance, covariance condition number over eigenvalues
  above ``stats_rtol`` · λ_max.

The backbone runs once per image set (train, test, and their four rotations); every point is
then computed from the stored z, probed and dropped, so memory holds z plus one point.

:func:`evaluate_run` rebuilds a ``headgeom train`` run (config.json + checkpoints/last.pt)
and evaluates it on the run's dataset, optionally beside a randomly initialised model of the
same architecture (the baseline that shows what training added).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.data import ImageDataset, load_dataset
from headgeom.device import resolve_device
from headgeom.eval.features import (Heads, extract_features, head_features, point_modules,
                                    point_names)
from headgeom.eval.knn import knn_accuracy
from headgeom.eval.linear_probe import LinearProbeConfig, linear_probe_accuracy
from headgeom.eval.mlp_probe import MLPProbeConfig, mlp_probe_accuracy
from headgeom.eval.rankme import representation_stats
from headgeom.eval.rotation import rotation_features
from headgeom.runs.provenance import environment
from headgeom.runs.trained import load_trained

__all__ = ["EvalConfig", "evaluate_model", "evaluate_run", "subsample"]


@dataclass(frozen=True)
class EvalConfig:
    """The evaluation protocol; defaults are the standard SSL protocol and the paper's probes.

    ``max_train``/``max_test``/``rotation_train``/``rotation_test``/``stats_max`` cap the
    number of images used (a seeded uniform subset, ``seed``); None means all, except that
    ``rotation_test=None`` means the class probes' test images (all, or ``max_test``).
    ``head_inputs`` ("raw", "l2"): feed the heads z, and/or z/‖z‖ (docs/paper.md §4 pitfall 5).
    ``mlp``: also fit the class MLP probe (``mlp_probe``), off by default: it costs about as much as
    the linear probe and none of the paper's probes is nonlinear.
    """

    k: tuple[int, ...] = (200,)
    temperature: float = 0.1
    knn: bool = True
    linear: bool = True
    rotation: bool = True
    stats: bool = True
    mlp: bool = False
    probe: LinearProbeConfig = field(default_factory=LinearProbeConfig)
    mlp_probe: MLPProbeConfig = field(default_factory=MLPProbeConfig)
    head_inputs: tuple[str, ...] = ("raw",)
    points: tuple[str, ...] | None = None
    max_train: int | None = None
    max_test: int | None = None
    rotation_train: int | None = 10_000
    rotation_test: int | None = None
    stats_max: int | None = 10_000
    stats_rtol: float = 1e-6
    batch_size: int = 256
    knn_chunk: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", (self.k,) if isinstance(self.k, int) else tuple(self.k))
        object.__setattr__(self, "head_inputs", tuple(self.head_inputs))
        if self.points is not None:
            object.__setattr__(self, "points", tuple(self.points))
        if not self.k or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in self.k):
            raise ValueError(f"k must be positive ints, got {self.k!r}")
        for name in ("max_train", "max_test", "rotation_train", "rotation_test", "stats_max"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 2):
                raise ValueError(f"EvalConfig.{name} must be None or an int >= 2, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["probe"] = self.probe.to_dict()
        d["mlp_probe"] = self.mlp_probe.to_dict()
        return d


def subsample(data: ImageDataset, n: int | None, seed: int) -> ImageDataset:
    """A seeded uniform subset of ``n`` images in their original order (all when n is None)."""
    if n is None or n >= len(data):
        return data
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(data), generator=g)[:n].sort().values
    return data.subset(idx)


def _check_datasets(train: ImageDataset, test: ImageDataset) -> None:
    for what, ds in (("train", train), ("test", test)):
        if not isinstance(ds, ImageDataset):
            raise TypeError(f"{what} must be a headgeom.data.ImageDataset, got {type(ds).__name__}")
        if len(ds) < 2:
            raise ValueError(f"the {what} set has {len(ds)} image(s); evaluation needs at least 2")
    if train.image_size != test.image_size:
        raise ValueError(f"train and test images differ in size: {train.image_size} vs "
                         f"{test.image_size}")
    if train.classes != test.classes:
        raise ValueError(f"train and test sets have different classes: {train.num_classes} vs "
                         f"{test.num_classes} ({train.classes[:3]}... vs {test.classes[:3]}...)")


def evaluate_model(backbone: Callable[[Tensor], Tensor], heads: Heads | Callable | None,
                   train: ImageDataset, test: ImageDataset, *,
                   mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
                   config: EvalConfig = EvalConfig(), device: torch.device | str = "cpu",
                   log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Probe accuracies and statistics at every feature point.

    Args:
        backbone: images (B, 3, H, W) normalised with ``mean``/``std`` -> z (B, d).
        heads: None, one head, or an ordered mapping name -> head (e.g. {"head": projector}).
        train, test: uint8 ImageDatasets with the same classes and image size.
        mean, std: per-channel normalisation the model was trained with (None: none).

    Returns a JSON-able dict: ``protocol`` (settings, the module at each point, normalisation),
    ``n_train``, ``n_test``, ``num_classes``, ``seconds`` and ``points`` =
    {point: {"dim", "knn_top1": {k: acc}, "linear": {...}, "mlp": {...} (with ``mlp``),
    "rotation_linear": {...}, "stats": {...}}}; accuracies are fractions in [0, 1].
    """
    _check_datasets(train, test)
    say = log or (lambda msg: None)
    cfg = config
    names = point_names(heads, cfg.head_inputs)
    points = list(names) if cfg.points is None else list(cfg.points)
    missing = [p for p in points if p not in names]
    if missing:
        raise ValueError(f"unknown feature point(s) {missing}; this model has {names}")
    train_c = subsample(train, cfg.max_train, cfg.seed)
    test_c = subsample(test, cfg.max_test, cfg.seed + 1)
    if cfg.knn and max(cfg.k) > len(train_c):
        raise ValueError(f"k = {max(cfg.k)} exceeds the {len(train_c)} training images; pass a "
                         f"smaller --k (or more training images)")
    if cfg.rotation and train.image_size[0] != train.image_size[1]:
        raise ValueError(f"the rotation probe needs square images, got {train.image_size}; "
                         f"disable it (--no-rotation) or crop the images")
    # the backbone runs once per image set; each point is then computed from the stored z,
    # probed and dropped, so memory holds z and one point (heads are cheap next to backbones)
    ekw = dict(batch_size=cfg.batch_size, device=device, mean=mean, std=std)
    hkw = dict(batch_size=max(cfg.batch_size, 1024), device=device)
    seconds: dict[str, float] = {"features": 0.0, "head_features": 0.0}
    t0 = time.perf_counter()
    say(f"backbone features of {len(train_c)} train and {len(test_c)} test images")
    z_train = extract_features(backbone, train_c, **ekw)["z"]
    z_test = extract_features(backbone, test_c, **ekw)["z"]
    if cfg.rotation:
        r_train = subsample(train, cfg.rotation_train, cfg.seed + 2)
        r_test = test_c if cfg.rotation_test is None else subsample(test, cfg.rotation_test,
                                                                       cfg.seed + 3)
        say(f"rotation probe: {len(r_train)} train and {len(r_test)} test images x 4 rotations")
        rz_train, ry_train = rotation_features(backbone, r_train, None, **ekw)
        rz_test, ry_test = rotation_features(backbone, r_test, None, **ekw)
    seconds["features"] += time.perf_counter() - t0
    num_classes = train.num_classes
    y_train, y_test = train_c.labels, test_c.labels
    probe_dev = torch.device(device)
    results: dict[str, dict[str, Any]] = {}

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        t = time.perf_counter()
        out = fn()
        seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t
        return out

    for p in points:
        f_train = timed("head_features", lambda: head_features(z_train, heads, p, **hkw))
        f_test = timed("head_features", lambda: head_features(z_test, heads, p, **hkw))
        r = results[p] = {"dim": int(f_train.shape[1])}
        if cfg.knn:
            acc = timed("knn", lambda: knn_accuracy(
                f_train.to(probe_dev), y_train.to(probe_dev), f_test.to(probe_dev), y_test,
                k=cfg.k, temperature=cfg.temperature, num_classes=num_classes,
                chunk_size=cfg.knn_chunk))
            r["knn_top1"] = {str(k): v for k, v in acc.items()}
            say(f"  {p}: kNN " + ", ".join(f"k={k} {100 * v:.2f}%" for k, v in acc.items()))
        if cfg.linear:
            r["linear"] = timed("linear", lambda: linear_probe_accuracy(
                f_train.to(probe_dev), y_train.to(probe_dev), f_test.to(probe_dev), y_test,
                num_classes, cfg.probe))
            say(f"  {p}: linear {100 * r['linear']['test_top1']:.2f}% "
                f"({r['linear']['n_iter']} L-BFGS iterations, stopped: {r['linear']['stopped']})")
        if cfg.mlp:
            r["mlp"] = timed("mlp", lambda: mlp_probe_accuracy(
                f_train.to(probe_dev), y_train.to(probe_dev), f_test.to(probe_dev), y_test,
                num_classes, cfg.mlp_probe))
            say(f"  {p}: MLP {100 * r['mlp']['test_top1']:.2f}% ({r['mlp']['steps']} AdamW steps)")
        if cfg.stats:
            sub = _first(cfg.stats_max, len(test_c))
            r["stats"] = timed("stats", lambda: representation_stats(f_test[:sub],
                                                                     rtol=cfg.stats_rtol))
        del f_train, f_test
        if cfg.rotation:
            rf_train = timed("head_features", lambda: head_features(rz_train["z"], heads, p, **hkw))
            rf_test = timed("head_features", lambda: head_features(rz_test["z"], heads, p, **hkw))
            r["rotation_linear"] = timed("rotation", lambda: linear_probe_accuracy(
                rf_train.to(probe_dev), ry_train.to(probe_dev), rf_test.to(probe_dev), ry_test,
                4, cfg.probe))
            say(f"  {p}: rotation {100 * r['rotation_linear']['test_top1']:.2f}%")
            del rf_train, rf_test
    modules = point_modules(heads)
    protocol = {**cfg.to_dict(), "points": points,
                "point_modules": {p: modules.get(p.removeprefix("l2z/"), "") for p in points},
                "mean": None if mean is None else [float(m) for m in mean],
                "std": None if std is None else [float(s) for s in std],
                "rotation_n_train": len(r_train) if cfg.rotation else 0,
                "rotation_n_test": len(r_test) if cfg.rotation else 0}
    return {"protocol": protocol, "n_train": len(train_c), "n_test": len(test_c),
            "num_classes": num_classes, "dataset": {"train": repr(train), "test": repr(test)},
            "seconds": seconds, "points": results}


def _first(n: int | None, total: int) -> int:
    return total if n is None else min(n, total)


class _Resized(nn.Module):
    """backbone(resize(x)): views were resized to ``size`` in training (TrainConfig.image_size).

    Bilinear resizing commutes with the per-channel normalisation, so it runs after it.
    """

    def __init__(self, backbone: nn.Module, size: int) -> None:
        super().__init__()
        self.backbone, self.size = backbone, size

    def forward(self, x: Tensor) -> Tensor:
        if tuple(x.shape[-2:]) != (self.size, self.size):
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear",
                              align_corners=False, antialias=True)
        return self.backbone(x)


def evaluate_run(run_dir: str | Path, *, data_dir: str | None = None,
                 config: EvalConfig = EvalConfig(), device: str = "auto",
                 checkpoint: str | Path | None = None, predictor: bool = False,
                 random_baseline: bool = False,
                 log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Rebuild the run in ``run_dir`` from config.json and its checkpoint
    (:func:`headgeom.runs.trained.load_trained`) and evaluate it.

    Points: z, every projector layer (``head.i``) and with ``predictor=True`` every predictor
    layer (``pred.i``). Normalisation: the run's own (:meth:`headgeom.runs.trained.TrainedRun.normalisation`:
    the dataset's mean/std when the run normalised), as in training. With ``random_baseline`` the
    same architecture at a fresh initialisation (seed + 10000; as training starts, so with
    the run's pseudo-collapse if any) is evaluated the same way, under ``"random_init"``.
    """
    run = Path(run_dir)
    dev = resolve_device(device)
    say = log or (lambda msg: None)
    loaded = load_trained(run, checkpoint, reseed=True)  # checkpoint errors before the data are loaded
    tc = loaded.settings
    method = loaded.method.to(dev)
    info: dict[str, Any] = {"checkpoint": str(loaded.checkpoint), "step": loaded.step, "epoch": int(loaded.epoch)}
    root = data_dir if data_dir is not None else tc.data_dir
    train = load_dataset(tc.data, "train", root, **tc.data_options)
    test = load_dataset(tc.data, "test", root, **tc.data_options)
    size = tc.image_size or train.image_size[0]
    mean, std = loaded.normalisation(data_dir)

    def heads_of(m: nn.Module) -> dict[str, nn.Module]:
        chain = {"head": m.projector}
        if predictor and getattr(m, "predictor", None) is not None:
            chain["pred"] = m.predictor
        return chain

    def backbone_of(m: nn.Module) -> Callable[[Tensor], Tensor]:
        return m.backbone if size == train.image_size[0] else _Resized(m.backbone, size)

    say(f"evaluating {run} ({tc.method}, {tc.backbone}, step {info['step']}) on {tc.data}")
    trained = evaluate_model(backbone_of(method), heads_of(method), train, test, mean=mean,
                             std=std, config=config, device=dev, log=log)
    out = {"run": str(run), "method": tc.method, "backbone": tc.backbone, "data": tc.data,
           **info, "device": str(dev), "environment": environment(), "trained": trained}
    if random_baseline:
        del method
        base = loaded.fresh_method(tc.seed + 10_000).to(dev)
        say("random-init baseline (same architecture, seed + 10000)")
        out["random_init"] = evaluate_model(backbone_of(base), heads_of(base), train, test,
                                            mean=mean, std=std, config=config, device=dev, log=log)
        out["random_init"]["init_seed"] = tc.seed + 10_000
    return out


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str, float, float, float, float]]:
    """(point, module, kNN@first k, linear, MLP, rotation) percentages (NaN when not run)."""
    rows = []
    proto = results["protocol"]
    k0 = str(proto["k"][0])
    for p, r in results["points"].items():
        rows.append((p, proto["point_modules"].get(p, ""),
                     100 * r["knn_top1"][k0] if "knn_top1" in r else math.nan,
                     100 * r["linear"]["test_top1"] if "linear" in r else math.nan,
                     100 * r["mlp"]["test_top1"] if "mlp" in r else math.nan,
                     100 * r["rotation_linear"]["test_top1"] if "rotation_linear" in r else math.nan))
    return rows

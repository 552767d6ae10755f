"""Probes and rotation orbits of one trained run: the backbone's class probes and the rotation
orbits through the head (docs/paper.md §2 C11, §3 "Orbits"; §4 pitfalls 4-5).

C11 (headgeom.experiments.c11_depth) calls :func:`measure_run` on each cell's ``headgeom train``
run directory.

- Probes: :func:`headgeom.eval.evaluate_run` at the backbone output z and at the head output
  h(z) (weighted cosine kNN and the linear probe, class labels, test split).
- Orbits: :func:`headgeom.orbits.extract_orbits` and :func:`~headgeom.orbits.analyze_orbit_features` on ``per_class`` test images of each of the
  first ``classes`` classes (a seeded choice, the same for every depth and seed), rotation
  0-330° in ``steps`` steps, heads fed raw z (the trained map) and, with ``"l2"`` in
  ``head_inputs``, the paper's z/‖z‖ (pitfall 5). Each ratio is z over h(z) with a BCa
  bootstrap CI over images (stratified by class; headgeom.orbits.bootstrap), beside the same ratio for a freshly
  initialised head of the same depth (the control that separates training from architecture).
- The random-head control of the single-run standard (headgeom.orbits.random_heads): per head input,
  ``control_draws`` heads of the trained head's architecture on the same stored z, their selectivity at
  every bootstrap and leave-one-out row of the orbit bootstrap, kept (``random_heads[<v>]``, with the
  orbit labels and the number of bootstrap rows) so C11's summary can pair the depths' rows (the same
  images and rows at every depth and seed).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from headgeom.data import load_dataset
from headgeom.device import resolve_device
from headgeom.claims.single_run import LEVELS
from headgeom.eval import EvalConfig, LinearProbeConfig, evaluate_run
from headgeom.orbits.analyze import analyze_orbit_features
from headgeom.orbits.bootstrap import Resamples, bootstrap_counts, bootstrap_indices
from headgeom.orbits.extract import extract_orbits
from headgeom.orbits.random_heads import random_head_control
from headgeom.runs.trained import load_trained

# the ratios of headgeom.orbits read at h(z) (definitions in headgeom.orbits.DEFINITIONS)
RATIOS = ("compression", "global_ratio", "selectivity", "compression_centred", "trace_ratio", "per_dim_ratio",
          "trace_ratio_raw", "d_intra_ratio", "class_orbit_change")


def orbit_images(data: Any, classes: int, per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``per_class`` images of each of the first ``classes`` classes of ``data`` (an ImageDataset),
    chosen uniformly with ``seed``; returns (uint8 images (n, 3, H, W), labels (n,)), class by class."""
    if classes < 2 or per_class < 2:
        raise ValueError(f"orbit images need >= 2 classes (for D_inter) and >= 2 images per class (for the "
                         f"bootstrap); got classes={classes}, per_class={per_class}")
    if classes > data.num_classes:
        raise ValueError(f"orbit_classes = {classes} but {data.name} has {data.num_classes} classes; lower it")
    g = torch.Generator().manual_seed(seed)
    picked = []
    for c in range(classes):
        idx = torch.nonzero(data.labels == c).flatten()
        if idx.numel() < per_class:
            raise ValueError(f"class {c} ({data.classes[c]}) of the {data.split} split has {idx.numel()} images, "
                             f"fewer than orbit_per_class = {per_class}; lower it or use more images")
        picked.append(idx[torch.randperm(idx.numel(), generator=g)[:per_class]].sort().values)
    index = torch.cat(picked)
    return data.images[index], data.labels[index]


def load_run(run_dir: Path, device: str = "cpu") -> dict[str, Any]:
    """The trained model of a ``headgeom train`` run and what orbits need: {"method" (eval mode, on
    ``device``; "auto" = CUDA when available), "config" (the run's headgeom.runs.RunSettings),
    "mean", "std" (the normalisation used in training, or None), "test"}."""
    run = load_trained(run_dir)
    tc = run.settings
    test = load_dataset(tc.data, "test", tc.data_dir, **tc.data_options)
    if tc.image_size not in (None, test.image_size[0]):
        raise ValueError(f"C11 orbits read images at their stored size {test.image_size}; this run trained at "
                         f"image_size={tc.image_size}. Leave image_size unset for C11.")
    mean, std = run.normalisation()
    return {"method": run.method.to(resolve_device(device)), "config": tc, "mean": mean, "std": std, "test": test}


def head_output_point(n_layers: int, variant: str) -> str:
    """The feature-point name of h(z) for a head with ``n_layers`` leaf modules (headgeom.eval.features)."""
    return ("l2z/" if variant == "l2" else "") + f"head.{n_layers - 1}"


def orbit_metrics(analysis: dict[str, Any], family: str, n_layers: int, variants: Sequence[str]) -> dict[str, Any]:
    """The C11 numbers of one ``analyze_orbits`` result: per head input ``v``, each ratio of RATIOS
    at h(z) as {"value", "ci"} under ``<ratio>[<v>]``, the fresh head's under ``fresh_<ratio>[<v>]``,
    the trace ratio of the random-direction control under ``random_dir_trace_ratio[<v>]``, and the
    class/orbit ratio at z and at h(z), and the mean pairwise cosine at h(z) under
    ``mean_pairwise_cosine_h[<v>]`` (near 1 for a BN head fed z/‖z‖: out of distribution)."""
    fam = analysis["families"][family]
    out: dict[str, Any] = {"class_orbit_ratio[z]": _est(fam["points"]["z"]["class_orbit_ratio"])}
    for v in variants:
        p = head_output_point(n_layers, v)
        out[f"class_orbit_ratio[{v}]"] = _est(fam["points"][p]["class_orbit_ratio"])
        out[f"mean_pairwise_cosine_h[{v}]"] = _est(fam["points"][p]["mean_pairwise_cosine"])
        for r in RATIOS:
            out[f"{r}[{v}]"] = _est(fam["ratios"][p][r])
            out[f"fresh_{r}[{v}]"] = _est(fam["controls"]["fresh_head"]["ratios"][p][r])
        out[f"random_dir_trace_ratio[{v}]"] = _est(fam["controls"]["random_directions"]["ratios"][p]["trace_ratio"])
    out["dims"] = {"z": fam["dims"]["z"], "h": fam["dims"][head_output_point(n_layers, variants[0])]}
    return out


def _est(e: dict[str, Any]) -> dict[str, Any]:
    return {"value": e["value"], "ci": list(e["ci"])}


def measure_run(run_dir: Path, cfg: Any, seed: int = 0) -> dict[str, Any]:
    """Probe accuracies at z and h(z), orbit metrics and the random-head control (module docstring) of the
    run in ``run_dir``; ``seed`` seeds the control's draws.

    ``cfg`` supplies knn_k, eval_train, eval_test, probe_max_iter, head_inputs, orbit_classes,
    orbit_per_class, orbit_steps, orbit_seed, n_boot, level, control_draws, device (C11Config)."""
    run = load_run(run_dir, cfg.train.device)
    projector = run["method"].projector
    n_layers = len(projector.layers)
    points = ("z", head_output_point(n_layers, "raw"))
    ecfg = EvalConfig(k=(cfg.knn_k,), rotation=False, stats=False, points=points, max_train=cfg.eval_train,
                      max_test=cfg.eval_test, probe=LinearProbeConfig(max_iter=cfg.probe_max_iter))
    probes = evaluate_run(run_dir, config=ecfg, device=cfg.train.device)["trained"]
    k = str(cfg.knn_k)
    out: dict[str, Any] = {"n_head_layers": n_layers, "head_output_point": points[1],
                           "n_train": probes["n_train"], "n_test": probes["n_test"],
                           "num_classes": probes["num_classes"]}
    for name, p in zip(("z", "h"), points):
        out[f"knn[{name}]"] = probes["points"][p]["knn_top1"][k]
        out[f"linear[{name}]"] = probes["points"][p]["linear"]["test_top1"]
        out[f"linear_converged[{name}]"] = bool(probes["points"][p]["linear"].get("converged", True))
    images, labels = orbit_images(run["test"], cfg.orbit_classes, cfg.orbit_per_class, cfg.orbit_seed)
    dev = next(projector.parameters()).device
    heads = {"head": projector}
    of = extract_orbits(run["method"].backbone, images, "rotation", cfg.orbit_steps, heads,
                        head_input=list(cfg.head_inputs), device=dev, mean=run["mean"], std=run["std"])
    analysis = {"families": {"rotation": analyze_orbit_features(of, labels, heads=heads, n_boot=cfg.n_boot,
                                                                seed=cfg.orbit_seed, controls=True, device=dev)}}
    out.update(orbit_metrics(analysis, "rotation", n_layers, cfg.head_inputs))
    n = int(images.shape[0])
    out["orbit_n_images"] = n
    # the resamples analyze_orbit_features drew (the same seed and strata), shared by every depth and seed
    rs = Resamples(bootstrap_counts(bootstrap_indices(n, cfg.n_boot, cfg.orbit_seed, strata=labels), n), labels)
    levels = tuple(sorted({*LEVELS, cfg.level}))
    for v in cfg.head_inputs:
        out[f"random_heads[{v}]"] = random_head_control(
            of.features["z"], of.features[head_output_point(n_layers, v)], projector, rs, head_input=v,
            draws=cfg.control_draws, seed=seed, level=cfg.level, levels=levels, keep_rows=True)
    out["orbit_labels"] = [int(x) for x in labels.tolist()]
    out["orbit_n_boot"] = int(cfg.n_boot)
    return out

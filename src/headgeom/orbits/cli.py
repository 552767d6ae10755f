"""``headgeom analyze CHECKPOINT_OR_RUN``: orbit, invariance and tangent-metric report of a model;
``headgeom analyze FILE.npz``: the orbit report of embeddings computed elsewhere
(headgeom.orbits.external).

Wiring (in headgeom.cli.build_parser): ``from headgeom.orbits.cli import add_parser as
add_analyze`` then ``add_analyze(sub)``; the parser's ``func`` is :func:`run`.

Writes OUT/analysis.json (everything: model source and sha256, preprocessing, protocol, every
estimate with its CI), OUT/report.md (tables and figure links) and OUT/figures/*.png (orbit PCA
per family at z and the head's output; tangent-metric spectra), atomically, and prints a short
table and the paths written.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

__all__ = ["add_parser", "default_out", "run"]

_DEFAULTS = {"steps": 12, "boot": 1000, "tangent_images": 16}


def _positive(minimum: int):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {v}")
        return v
    return parse


def _families(text: str) -> list[str]:
    from headgeom.augment.families import FAMILIES

    names = [f.strip() for f in text.split(",") if f.strip()]
    if names == ["all"]:
        return list(FAMILIES)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown augmentation famil{'y' if len(unknown) == 1 else 'ies'} {unknown or text!r}; "
            f"choose from {', '.join(FAMILIES)} (comma-separated) or 'all'")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a family is listed twice in {text!r}")
    return names


def _value_range(text: str) -> tuple[str, tuple[float, float]]:
    from headgeom.augment.families import FAMILIES

    m = re.fullmatch(r"\s*([A-Za-z0-9_]+)\s*=\s*([-+0-9.eE]+)\s*:\s*([-+0-9.eE]+)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected FAMILY=LO:HI (e.g. rotation=0:45), got {text!r}")
    name = m.group(1)
    if name not in FAMILIES:
        raise argparse.ArgumentTypeError(f"unknown family {name!r} in --range; choose from "
                                         f"{', '.join(FAMILIES)}")
    try:
        lo, hi = float(m.group(2)), float(m.group(3))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--range {text!r}: LO and HI must be numbers") from None
    if not lo < hi:
        raise argparse.ArgumentTypeError(f"--range {text!r}: need LO < HI")
    return name, (lo, hi)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``analyze`` on the ``headgeom`` sub-command parser."""
    p = subparsers.add_parser(
        "analyze", help="orbit compression, invariance and tangent metric of a checkpoint or run",
        description="Augmentation orbits (N test images x K parameter steps per family) through the "
        "backbone and every head layer: the paper's spread and compression beside the trace and "
        "per-dimension ratios, D_intra, D_inter, class/orbit ratio, effective rank, curvature and "
        "alignment, each with a bootstrap CI, with a fresh-head and a random-direction control; then "
        "the tangent metric (Rayleigh quotients of G on augmentation tangents) and Fisher ranks. "
        "ImageNet models get 224-px inputs with ImageNet mean/std after the colour operations; "
        "headgeom runs their own preprocessing. Writes OUT/analysis.json, OUT/report.md and "
        "OUT/figures/*.png.",
    )
    p.add_argument("path", metavar="CHECKPOINT_OR_RUN",
                   help="checkpoint file (official DINO/VICReg/Barlow/SimSiam, torchvision layout, "
                        "headgeom last.pt), a `headgeom train --out RUN` directory, or FILE.npz of "
                        "orbit embeddings computed elsewhere (z (N, K, D_z), head points (N, K, D) "
                        "under their own names, optional labels (N,) and xi (K,))")
    p.add_argument("--data", default=None, metavar="NAME",
                   help="analysis dataset (cifar10, cifar100, shapes, imagefolder; default: a run's "
                        "own dataset, else cifar10)")
    p.add_argument("--data-dir", default=None, metavar="DIR", help="dataset folder (default: the "
                   "run's, then $HEADGEOM_DATA)")
    p.add_argument("--split", default="test", help="split the images come from (default test)")
    from headgeom.augment.families import FAMILIES

    p.add_argument("--families", type=_families, default=None, metavar="F[,F...]",
                   help=f"augmentation families ({', '.join(FAMILIES)}) or 'all' (default: the "
                        "paper's protocol, "
                        "rotation_45,hue,saturation,blur for ImageNet models, "
                        "rotation,hue,saturation,blur otherwise)")
    p.add_argument("--range", dest="ranges", type=_value_range, action="append", default=[],
                   metavar="FAMILY=LO:HI", help="parameter interval of a family (repeatable)")
    p.add_argument("--images", type=_positive(2), default=None, metavar="N",
                   help="test images, seeded and balanced over classes (default: 50 for ImageNet "
                        "models, the paper's pretrained protocol; 200 otherwise)")
    p.add_argument("--steps", type=_positive(2), default=_DEFAULTS["steps"], metavar="K",
                   help=f"parameter steps per orbit (default {_DEFAULTS['steps']})")
    p.add_argument("--head-input", choices=("raw", "l2", "both"), default="raw",
                   help="feed the head z (raw, default), the paper's z/||z|| (l2), or both "
                        "(PAPER.md §4 pitfall 5)")
    p.add_argument("--predictor", action="store_true", help="also read every predictor layer (pred.i)")
    p.add_argument("--which", choices=("teacher", "student"), default=None,
                   help="DINO only: which network (default teacher)")
    p.add_argument("--num-heads", type=_positive(1), default=None, metavar="H",
                   help="ViT attention heads when not embed_dim // 64")
    p.add_argument("--normalization", choices=("auto", "imagenet", "dataset", "none"), default="auto",
                   help="mean/std after the augmentation: auto (ImageNet for ImageNet models, a run's "
                        "own, else the data's), or force one")
    p.add_argument("--input-size", type=_positive(0), default=None, metavar="PX",
                   help="resize images to PX before the orbit (0 = native; default by model)")
    p.add_argument("--boot", type=_positive(1), default=_DEFAULTS["boot"], metavar="B",
                   help=f"bootstrap replicates (default {_DEFAULTS['boot']})")
    p.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--no-controls", action="store_true",
                   help="skip the fresh-head and random-direction controls")
    p.add_argument("--no-tangents", action="store_true", help="skip the tangent metric and Fisher ranks")
    p.add_argument("--tangent-images", type=_positive(1), default=_DEFAULTS["tangent_images"],
                   metavar="N", help="images for the (costlier, float64) tangent metric "
                                     f"(default {_DEFAULTS['tangent_images']})")
    p.add_argument("--tangent-loss", choices=("negative_cosine", "mse"), default="negative_cosine",
                   help="loss whose Hessian weighs the head metric (default negative_cosine)")
    p.add_argument("--tangent-random", type=_positive(1), default=8, metavar="R",
                   help="random directions per image for the tangent comparison (default 8)")
    p.add_argument("--batch-size", type=_positive(1), default=128,
                   help="augmented images per backbone batch (default 128)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda[:i]")
    p.add_argument("--seed", type=int, default=0, help="seed of the images, bootstrap and controls")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default analyze-out/<name>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    p.add_argument("--family", default=None, metavar="NAME",
                   help="FILE.npz only: the name of its orbits' augmentation family (default "
                        "external); --head-input l2 says its heads were fed z/||z|| though trained "
                        "on raw z")
    p.set_defaults(func=run)
    return p


def default_out(path: str | Path) -> Path:
    """analyze-out/<name>: a run directory's name, or the file name without .pth/.pt/.tar."""
    path = Path(path)
    name = path.name if path.is_dir() else re.sub(r"(\.pth|\.pt|\.tar|\.ckpt|\.npz)+$", "", path.name)
    return Path("analyze-out") / (name or "model")


def _check_ranges(ranges: list[tuple[str, tuple[float, float]]], families: list[str]) -> None:
    extra = sorted({n for n, _ in ranges} - set(families))
    if extra:
        raise ValueError(f"--range names {extra}, which are not analysed ({families}); add them to "
                         f"--families")


def _check_args(args: argparse.Namespace) -> None:
    """Checks that need no model: fail before loading anything."""
    if not 0 < args.level < 1:
        raise ValueError(f"--level must lie in (0, 1), got {args.level}")
    if args.families is not None:
        _check_ranges(args.ranges, args.families)


def _write_outputs(out: Path, result: dict, figures: dict[str, bytes]) -> tuple[Path, Path, list[Path]]:
    """Write OUT/figures/*.png, OUT/report.md and OUT/analysis.json atomically (in that order,
    so analysis.json lists the files); returns (json path, report path, figure paths)."""
    from headgeom.io import atomic_write_bytes, atomic_write_json, atomic_write_text
    from headgeom.orbits.report import format_report

    written = [atomic_write_bytes(out / "figures" / name, png) for name, png in figures.items()]
    result["files"] = {"report": str(out / "report.md"), "figures": [str(p) for p in written]}
    report = atomic_write_text(out / "report.md", format_report(result))
    return atomic_write_json(out / "analysis.json", result), report, written


def run_npz(args: argparse.Namespace) -> int:
    """``headgeom analyze FILE.npz``: orbit embeddings computed elsewhere (headgeom.orbits.external)."""
    from headgeom.experiments.runner import environment
    from headgeom.orbits.external import analyze_npz
    from headgeom.orbits.report import format_summary

    _check_args(args)
    if args.families is not None:
        raise ValueError("--families chooses augmentations of a model's images; an .npz already "
                         "holds its orbits: name their family with --family NAME")
    if args.head_input == "both":
        raise ValueError("--head-input both needs a model; for an .npz say l2 when its heads were "
                         "fed z/||z|| though trained on raw z")
    result, figures = analyze_npz(args.path, args.family or "external", n_boot=args.boot,
                                  seed=args.seed, level=args.level,
                                  heads_fed_l2=args.head_input == "l2")
    result.update(command={k: v for k, v in vars(args).items() if k != "func"},
                  environment=environment())
    out = Path(args.out) if args.out else default_out(args.path)
    json_path, report, written = _write_outputs(out, result, figures)
    n, k = result["data"]["n_images"], result["orbits"]["protocol"]["steps"]
    print(f"{args.path}: {n} orbits x {k} steps; ratios z / point ({int(100 * args.level)}% CI):")
    print(format_summary(result))
    print(f"\nwrote {json_path}\nwrote {report}")
    print(f"wrote {len(written)} figure(s) under {out / 'figures'}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Analyse ``args.path`` and write analysis.json, report.md and figures; returns 0."""
    from headgeom.orbits.external import is_npz

    if is_npz(args.path):
        return run_npz(args)
    if args.family is not None:
        raise ValueError("--family names the orbits of an .npz file; for a model choose "
                         "augmentations with --families")
    from tqdm.auto import tqdm

    from headgeom.data import load_dataset
    from headgeom.experiments.runner import environment
    from headgeom.orbits.model_input import resolve_model
    from headgeom.orbits.pipeline import AnalysisOptions, run_analysis, select_images
    from headgeom.orbits.report import format_summary
    from headgeom.train import resolve_device

    t_start = time.perf_counter()
    _check_args(args)
    say = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    device = resolve_device(args.device)
    mi = resolve_model(args.path, which=args.which, num_heads=args.num_heads,
                       predictor=args.predictor, normalization=args.normalization,
                       input_size=args.input_size, data=args.data, data_dir=args.data_dir)
    families = args.families or list(mi.default_families)
    _check_ranges(args.ranges, families)
    data = load_dataset(mi.data, args.split, mi.data_dir, **mi.data_options)
    n_images = args.images
    if n_images is None:  # the default, capped by a small split (an explicit --images is not)
        n_images = min(mi.default_images, len(data))
    indices = select_images(data, n_images, args.seed)
    out = Path(args.out) if args.out else default_out(args.path)
    say(f"{mi.source['release']}: {mi.reason}")
    say(f"{len(indices)} {data.name}/{data.split} images x {args.steps} steps x {len(families)} "
        f"families on {device}; writing to {out}")
    mi.backbone.to(device)
    for h in mi.heads.values():
        h.to(device)
    opts = AnalysisOptions(
        families=tuple(families), steps=args.steps,
        head_input=("raw", "l2") if args.head_input == "both" else (args.head_input,),
        value_ranges=dict(args.ranges), n_boot=args.boot, level=args.level, seed=args.seed,
        controls=not args.no_controls, batch_size=args.batch_size, tangents=not args.no_tangents,
        tangent_images=args.tangent_images, tangent_loss=args.tangent_loss,
        tangent_random=args.tangent_random)
    t_load = time.perf_counter() - t_start
    bar = lambda total: tqdm(total=total, desc="orbits", unit="img", disable=args.quiet,  # noqa: E731
                             file=sys.stderr, smoothing=0.1)
    analysis, figures = run_analysis(mi, data, indices, opts, device=device, progress=bar, say=say)
    counts = [int(v) for v in data.labels[indices].bincount(minlength=data.num_classes)]
    seconds = {"load": t_load, **analysis.pop("seconds")}
    seconds["total"] = time.perf_counter() - t_start
    result = {
        "format": "headgeom.analyze", "version": 1,
        "command": {k: v for k, v in vars(args).items() if k != "func"},
        "model": {**mi.source, "notes": mi.notes},
        "preprocessing": mi.preprocessing(),
        "data": {"name": data.name, "split": data.split, "n_images": len(indices),
                 "seed": args.seed, "indices": indices.tolist(),
                 "tangent_indices": indices[:args.tangent_images].tolist()
                 if "skipped" not in analysis["tangent_metric"] else [],
                 "labels": data.labels[indices].tolist(), "classes": data.classes,
                 "per_class": {data.classes[c]: n for c, n in enumerate(counts) if n}},
        "device": str(device), "environment": environment(),
        "orbits": {k: analysis[k] for k in ("protocol", "definitions", "families")},
        "tangent_metric": analysis["tangent_metric"], "seconds": seconds,
    }
    json_path, report, written = _write_outputs(out, result, figures)
    print(f"{mi.source['release']} ({mi.source['backbone']['name']}), {len(indices)} "
          f"{data.name}/{data.split} images, {args.steps} steps; ratios z / head output "
          f"({int(100 * args.level)}% CI):")
    print(format_summary(result))
    tm = result["tangent_metric"]
    if "skipped" in tm:
        print(f"tangent metric: not computed ({tm['skipped']})")
    print(f"\nwrote {json_path}\nwrote {report}")
    print(f"wrote {len(written)} figure(s) under {out / 'figures'}")
    return 0

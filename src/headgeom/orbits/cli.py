"""``headgeom analyze CHECKPOINT_OR_RUN``: orbit, invariance and tangent-metric report of a model;
``headgeom analyze FILE.npz``: the orbit report of embeddings computed elsewhere
(headgeom.orbits.external).

The parser is :func:`headgeom.commands.analyze.add_parser` (torch-free); it names :func:`run`.

Writes OUT/analysis.json (everything: model source and sha256, preprocessing, protocol, every
estimate with its CI), OUT/report.md (tables and figure links), OUT/report.html (the same as one
self-contained page, figures embedded) and OUT/figures/*.png (orbit PCA
per family at z and the head's output; tangent-metric spectra), atomically, and prints a short
table and the paths written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm.auto import tqdm

from headgeom.commands.analyze import add_parser, default_out  # the parser lives with the torch-free parsers
from headgeom.data import load_dataset
from headgeom.device import resolve_device
from headgeom.io import atomic_write_bytes, atomic_write_json, atomic_write_text
from headgeom.orbits.external import analyze_npz, is_npz
from headgeom.orbits.model_input import resolve_model
from headgeom.orbits.pipeline import AnalysisOptions, run_analysis, select_images
from headgeom.orbits.report import format_report, format_summary
from headgeom.report.html_markdown import write_markdown_html
from headgeom.runs.provenance import environment

__all__ = ["add_parser", "default_out", "run"]


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
    """Write OUT/figures/*.png, OUT/report.md, OUT/report.html (the same, one self-contained page with
    the figures embedded) and OUT/analysis.json atomically (in that order, so analysis.json lists the
    files); returns (json path, report path, figure paths)."""
    written = [atomic_write_bytes(out / "figures" / name, png) for name, png in figures.items()]
    result["files"] = {"report": str(out / "report.md"), "html": str(out / "report.html"),
                       "figures": [str(p) for p in written]}
    text = format_report(result)
    report = atomic_write_text(out / "report.md", text)
    write_markdown_html(out / "report.html", text, text.splitlines()[0].lstrip("# "))
    return atomic_write_json(out / "analysis.json", result), report, written


def run_npz(args: argparse.Namespace) -> int:
    """``headgeom analyze FILE.npz``: orbit embeddings computed elsewhere (headgeom.orbits.external)."""
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
    print(f"\nwrote {json_path}\nwrote {report}\nwrote {report.with_suffix('.html')}")
    print(f"wrote {len(written)} figure(s) under {out / 'figures'}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Analyse ``args.path`` and write analysis.json, report.md and figures; returns 0."""
    if is_npz(args.path):
        return run_npz(args)
    if args.family is not None:
        raise ValueError("--family names the orbits of an .npz file; for a model choose "
                         "augmentations with --families")
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
    print(f"\nwrote {json_path}\nwrote {report}\nwrote {report.with_suffix('.html')}")
    print(f"wrote {len(written)} figure(s) under {out / 'figures'}")
    return 0

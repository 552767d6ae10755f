"""Benchmark: ``headgeom analyze`` of a DINO ViT-S/16 full checkpoint against ResNet-50 checkpoints.

    python benchmarks/bench_analyze.py [--images 4] [--repeats 2] [--data-dir DIR | --cifar10-jpeg PATH]
        [--models dino_vit_s16,dino_resnet50,simsiam_resnet50] [--profile] [--workdir DIR] [--json PATH]
    python benchmarks/bench_analyze.py --tiny --json out.json     # toy widths on `shapes`, seconds

Checkpoints: synthetic files in the official layouts with random weights (timing does not depend
on the weights), written by tests/official_models.py (re-writings of the official modules, so the
keys are the official ones) into ``--workdir`` and reused from there when present:

- ``dino_vit_s16``: ``dino_deitsmall16_pretrain_full_checkpoint.pth``: student (DDP) and teacher,
  each MultiCropWrapper(ViT-S/16, DINOHead 384→2048→2048→256, L2, weight-normed 256→65536);
- ``dino_resnet50``: ``dino_resnet50_pretrain_full_checkpoint.pth``: ResNet-50 with the released
  head (2048→4096, BN, GELU, →256, L2, plain 256→65536): the same method and the same 65,536-wide
  output, so the ratio isolates the backbone (ViT-S/16 at 224 px against ResNet-50);
- ``simsiam_resnet50``: SimSiam's ``checkpoint_0099.pth.tar`` (projector 2048→2048→2048→2048
  with BN, predictor 2048→512→2048): a plain MLP head of the paper's shapes (docs/paper.md §3),
  so the ratio against it also prices the DINO head. SimSiam rather than VICReg because VICReg's
  8192³ expander is the costliest head of the releases: a ratio against it would hide the DINO
  head's cost rather than price it.

Each model is analysed by ``headgeom analyze FILE`` in a fresh process with the defaults (the
ImageNet protocol: 224 px, four families, 12 steps, 1000 bootstrap replicates, controls, the
tangent metric and Fisher ranks) except ``--images N`` (the tangent metric takes min(N, 16) of
them), on real CIFAR-10 test images: ``--data-dir`` names a folder holding
``cifar-10-batches-bin`` (headgeom's cifar10 layout), else the JPEG archive that ``--cifar10-jpeg``
or ``$HEADGEOM_CIFAR10_JPEG`` names is converted once by tools/make_cifar10.py into the workdir.
Recorded per run: wall and child CPU seconds (total and per image), the load average before and
after, analyze's own stage seconds (analysis.json ``seconds``: load, orbits per family, tangent
metric) and, with ``--profile``, cumulative seconds of the main stage functions under cProfile.
Models run in a fresh order each repeat (forward, then reversed) so load changes on a shared
machine weigh on all; ratios DINO ViT-S / each other model are per repeat, then the median.
"""
from __future__ import annotations

import argparse
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the official-layout writers live with the loader tests
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts

from bench_fixed_cost import load, write_json  # noqa: E402
from headgeom.backbones import VisionTransformer, resnet50, vit_small  # noqa: E402
from official_models import SimSiam, dino_full_checkpoint, randomise_, simsiam_checkpoint  # noqa: E402

REFERENCE = "dino_vit_s16"
ENV_JPEG = "HEADGEOM_CIFAR10_JPEG"
# cProfile entries (file suffix, function) reported as the stage breakdown with --profile
STAGES = {
    "extract_orbits (augment + backbone + head)": ("orbits/extract.py", "extract_orbits"),
    "analyze_orbit_features (metrics, CIs, controls)": ("orbits/analyze.py", "analyze_orbit_features"),
    "controls": ("orbits/controls.py", None),
    "orbit figures": ("orbits/figures.py", "plot_orbit_pca"),
    "tangent_metric_analysis": ("orbits/tangent_metric.py", "tangent_metric_analysis"),
    "tangent: base points (jvps, loss curvature, I_h eigh)": ("orbits/tangent_metric.py", "_base_point"),
    "tangent: I_h(z) = J_h^T J_h": ("geometry/invariance/pullback_gram.py", "__call__"),
    "tangent: loss curvature check": ("geometry/engine/loss_curvature.py", "curvature_for"),
    "tangent: augmentation tangents": ("geometry/invariance/tangents.py", "augmentation_tangent"),
    "tangent figures": ("orbits/tangent_figures.py", "plot_tangent_spectra"),
    "resolve_model (load checkpoint)": ("orbits/model_input.py", "resolve_model"),
}


def _dino_vit(tiny: bool) -> dict:
    if tiny:
        obj, _ = dino_full_checkpoint(lambda: VisionTransformer(img_size=16, patch_size=4, embed_dim=64, depth=1,
                                                                num_heads=1),
                                      in_dim=64, out_dim=48, nlayers=3, hidden_dim=32, bottleneck_dim=8)
        return obj
    return dino_full_checkpoint(vit_small, in_dim=384, out_dim=65536, nlayers=3, hidden_dim=2048,
                                bottleneck_dim=256)[0]


def _dino_resnet50(tiny: bool) -> dict:
    w, d, hidden, bottleneck, out = (0.0625, 128, 64, 12, 40) if tiny else (1.0, 2048, 4096, 256, 65536)
    return dino_full_checkpoint(lambda: resnet50(width=w), in_dim=d, out_dim=out, use_bn=True, nlayers=2,
                                hidden_dim=hidden, bottleneck_dim=bottleneck, plain_last=True)[0]


def _simsiam_resnet50(tiny: bool) -> dict:
    w, dim, pred = (0.0625, 72, 24) if tiny else (1.0, 2048, 512)
    return simsiam_checkpoint(randomise_(SimSiam(resnet50(width=w), dim=dim, pred_dim=pred), seed=7))


# name -> (official file name, expected release, writer(tiny) -> the dict to torch.save)
MODELS: dict[str, tuple[str, str, Callable[[bool], dict]]] = {
    "dino_vit_s16": ("dino_deitsmall16_pretrain_full_checkpoint.pth", "dino_vit", _dino_vit),
    "dino_resnet50": ("dino_resnet50_pretrain_full_checkpoint.pth", "dino_resnet50", _dino_resnet50),
    "simsiam_resnet50": ("checkpoint_0099.pth.tar", "simsiam", _simsiam_resnet50),
}
TINY_ANALYZE = ["--input-size", "32", "--steps", "3", "--boot", "20", "--families", "rotation_45,hue",
                "--tangent-random", "2"]


def write_checkpoint(name: str, folder: Path, tiny: bool) -> Path:
    """The synthetic checkpoint of ``name`` in ``folder`` (written atomically unless already there)."""
    filename, _, writer = MODELS[name]
    path = folder / ("tiny" if tiny else "full") / filename
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(writer(tiny), tmp)
    tmp.replace(path)
    return path


def cifar10_dir(args: argparse.Namespace, workdir: Path) -> Path:
    """A folder holding cifar-10-batches-bin: --data-dir, else built once from the JPEG archive."""
    if args.data_dir:
        root = Path(args.data_dir)
        if not (root / "cifar-10-batches-bin").is_dir():
            raise SystemExit(f"--data-dir {root} holds no cifar-10-batches-bin/; build one with "
                             f"`python tools/make_cifar10.py ARCHIVE {root}`")
        return root
    source = args.cifar10_jpeg or os.environ.get(ENV_JPEG)
    if not source:
        raise SystemExit(f"no CIFAR-10: pass --data-dir DIR (holding cifar-10-batches-bin/), --cifar10-jpeg "
                         f"ARCHIVE, or set {ENV_JPEG}; or --tiny for synthetic shapes")
    root = workdir / "cifar10"
    if not (root / "cifar-10-batches-bin" / "test_batch.bin").is_file():
        subprocess.run([sys.executable, str(REPO / "tools" / "make_cifar10.py"), source, str(root)], check=True)
    return root


def run_order(names: list[str], repeat: int) -> list[str]:
    """Forward on even repeats, reversed on odd ones: load drift weighs on every model alike."""
    return list(names) if repeat % 2 == 0 else list(reversed(names))


def stage_seconds(profile: Path) -> dict[str, float]:
    """Cumulative seconds of each STAGES entry in a cProfile dump (a module's functions summed
    at the top level when the function is None: the controls are called from the metrics)."""
    stats = pstats.Stats(str(profile)).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    out = {}
    for label, (suffix, func) in STAGES.items():
        rows = [(k, v) for k, v in stats.items() if k[0].endswith(suffix) and (func is None or k[2] == func)]
        if func is None:  # only the module's entry points: callers outside the module
            rows = [(k, v) for k, v in rows if any(not c[0].endswith(suffix) for c in v[4])]
        out[label] = round(sum(v[3] for _, v in rows), 3)
    return out


def analyze_once(path: Path, out: Path, data_args: list[str], images: int, extra: list[str],
                 profile: bool) -> dict:
    """One ``headgeom analyze`` in a fresh process: wall and child CPU seconds, loads, stage seconds."""
    prof = out.with_suffix(".prof")
    prefix = ["-m", "cProfile", "-o", str(prof)] if profile else []
    cmd = [sys.executable, *prefix, "-m", "headgeom", "analyze", str(path), *data_args, "--images", str(images),
           "--out", str(out), "--quiet", *extra]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    load_before, ru0, t0 = load(), resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"headgeom analyze {path.name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    analysis = json.loads((out / "analysis.json").read_text())
    tm = analysis["tangent_metric"]
    row = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "wall_s_per_image": round(wall / images, 3),
           "cpu_s_per_image": round(cpu / images, 3), "load_before": load_before, "load_after": load(),
           "release": analysis["model"]["release"], "backbone": analysis["model"]["backbone"]["name"],
           "input_size": analysis["preprocessing"]["size"], "families": list(analysis["orbits"]["families"]),
           "tangent_images": len(analysis["data"]["tangent_indices"]), "tangent_skipped": tm.get("skipped"),
           "seconds": {k: round(v, 2) for k, v in analysis["seconds"].items()}}
    if profile:
        row["profile_s"] = stage_seconds(prof)
    return row


def ratios(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """DINO ViT-S / each other model, per repeat (same run), wall and CPU, with the median."""
    out = {}
    for other in runs:
        if other == REFERENCE or REFERENCE not in runs:
            continue
        per = {key: [round(a[key] / b[key], 3) for a, b in zip(runs[REFERENCE], runs[other])]
               for key in ("wall_s", "cpu_s")}
        out[f"{REFERENCE}/{other}"] = {"wall": per["wall_s"], "cpu": per["cpu_s"],
                                       "median_wall": statistics.median(per["wall_s"]),
                                       "median_cpu": statistics.median(per["cpu_s"])}
    return out


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=4, help="--images of headgeom analyze (default 4)")
    p.add_argument("--repeats", type=int, default=2, help="runs per model, order alternating (default 2)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--data-dir", default=None, help="folder holding cifar-10-batches-bin/")
    p.add_argument("--cifar10-jpeg", default=None, help=f"cifar10-jpeg.tar.gz or its folder (default ${ENV_JPEG})")
    p.add_argument("--tiny", action="store_true", help="toy widths, shapes data, few steps: a smoke run")
    p.add_argument("--profile", action="store_true", help="run analyze under cProfile: stage seconds")
    p.add_argument("--workdir", default=None, help="checkpoints, data and outputs (default: a temporary folder)")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown or not names or args.images < 2 or args.repeats < 1:
        raise SystemExit(f"--models from {list(MODELS)} (got {unknown or args.models!r}), --images >= 2 "
                         f"(got {args.images}), --repeats >= 1 (got {args.repeats})")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        files = {n: write_checkpoint(n, workdir, args.tiny) for n in names}
        data_args = ["--data", "shapes"] if args.tiny else ["--data", "cifar10", "--data-dir",
                                                            str(cifar10_dir(args, workdir))]
        extra = TINY_ANALYZE if args.tiny else []
        loads, runs = [load()], {n: [] for n in names}
        for r in range(args.repeats):
            for n in run_order(names, r):
                row = analyze_once(files[n], workdir / "out" / f"{n}_{r}", data_args, args.images, extra,
                                   args.profile)
                runs[n].append({"repeat": r, **row})
                print(json.dumps({"model": n, **runs[n][-1]}), flush=True)
            loads.append(load())
    result = {
        "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} torch threads; "
                   f"load average (1/5/15 min) at the start and after each repeat: {loads}",
        "command": " ".join(sys.argv), "images": args.images, "repeats": args.repeats, "tiny": args.tiny,
        "data": data_args[1], "analyze_extra_args": extra, "profiled": args.profile,
        "models": {n: {"file": MODELS[n][0], "expected_release": MODELS[n][1], "runs": runs[n],
                       "median_wall_s_per_image": statistics.median(x["wall_s_per_image"] for x in runs[n]),
                       "median_cpu_s_per_image": statistics.median(x["cpu_s_per_image"] for x in runs[n])}
                   for n in names},
        "ratios": ratios(runs),
    }
    print(json.dumps(result["ratios"], indent=2))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()

"""Benchmark: orbit analysis against the bare forward passes of the same images (issue 5 §1).

    python benchmarks/bench_orbits.py [--images 200] [--steps 12]
        [--families rotation,hue,saturation,blur] [--n-boot 1000] [--data-dir DIR] [--json PATH]

Model: the paper's CIFAR ResNet-18 (512-d) with the paper's SimCLR projector
512→2048→2048 (ReLU, BN, last BN), untrained (timing does not depend on the weights), eval mode,
float32, CIFAR-10 normalisation after the augmentation. Images: the first N CIFAR-10 test
images when --data-dir holds CIFAR-10, else seeded uniform uint8 images (the cost of a forward
pass does not depend on pixel values).

Per family, measured in the same run and interleaved (bare, then analysis) so that load drift
on a shared machine hits both alike:
- bare: backbone forward passes of the N·K orbit images, built and normalised beforehand
  (no_grad, same batch size);
- analysis: ``extract_orbits`` (augmentation on [0, 1] pixels, normalisation, backbone, every
  head layer, plus one clean-image pass per image when the family's identity is not on the
  grid, for the alignment anchor) and ``analyze_orbit_features`` (all metrics, bootstrap CIs
  with B replicates, both controls).
The ratio analysis / bare is the issue's target (≤ 1.3).
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from headgeom.augment.families import orbit
from headgeom.backbones import resnet18
from headgeom.data.registry import DATASET_STATS
from headgeom.heads import head_from
from headgeom.io import atomic_write_json
from headgeom.orbits import analyze_orbit_features, extract_orbits


def load_images(n: int, data_dir: str | None) -> tuple[torch.Tensor, torch.Tensor, str]:
    if data_dir:
        from headgeom.data import load_dataset
        ds = load_dataset("cifar10", split="test", data_dir=data_dir)
        return ds.images[:n], ds.labels[:n], f"CIFAR-10 test[:{n}] from {data_dir}"
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (n, 3, 32, 32), generator=gen, dtype=torch.uint8)
    return images, torch.arange(n) % 10, f"{n} seeded uniform uint8 images, labels i mod 10"


def bare_forward(backbone, images: torch.Tensor, family: str, steps: int, batch_size: int,
                 mean: torch.Tensor, std: torch.Tensor) -> float:
    """Seconds for the backbone alone on the N·K orbit images (built before the clock starts)."""
    x = images.float() / 255.0
    orb = orbit(x, family, steps).reshape(-1, *x.shape[1:])
    orb = (orb - mean) / std
    t = time.perf_counter()
    with torch.no_grad():
        for start in range(0, orb.shape[0], batch_size):
            backbone(orb[start:start + batch_size])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--families", default="rotation,hue,saturation,blur")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=252)  # 21 orbits of 12 steps
    ap.add_argument("--width", type=float, default=1.0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    torch.manual_seed(0)
    backbone = resnet18(width=args.width).eval()
    d = backbone.feature_dim
    head = head_from("paper_projector", in_dim=d, activation="relu", bn=True).eval()
    images, labels, source = load_images(args.images, args.data_dir)
    stats = DATASET_STATS["cifar10"]
    mean_t = torch.tensor(stats.mean).view(1, -1, 1, 1)
    std_t = torch.tensor(stats.std).view(1, -1, 1, 1)
    families = [f for f in args.families.split(",") if f]

    with torch.no_grad():  # warm-up: allocator and kernels, outside every timing
        backbone((torch.rand(8, 3, 32, 32) - mean_t) / std_t)

    rows = []
    for fam in families:
        t_bare = bare_forward(backbone, images, fam, args.steps, args.batch_size, mean_t, std_t)
        t = time.perf_counter()
        of = extract_orbits(backbone, images, fam, args.steps, head, batch_size=args.batch_size,
                            mean=stats.mean, std=stats.std)
        t_extract = time.perf_counter() - t
        t = time.perf_counter()
        res = analyze_orbit_features(of, labels, heads=head, n_boot=args.n_boot, seed=0)
        t_metrics = time.perf_counter() - t
        row = {"family": fam, "bare_s": t_bare, "extract_s": t_extract, "metrics_s": t_metrics,
               "ratio": (t_extract + t_metrics) / t_bare,
               "anchor": res["anchor"],
               "compression_head_out": res["ratios"]["head.4"]["compression"]["value"]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    bare = sum(r["bare_s"] for r in rows)
    analysis = sum(r["extract_s"] + r["metrics_s"] for r in rows)
    out = {"benchmark": "orbits", "images": args.images, "steps": args.steps,
           "families": families, "n_boot": args.n_boot, "batch_size": args.batch_size,
           "backbone": f"resnet18 width {args.width} (CIFAR stem, {d}-d)",
           "head": head.spec.to_string(), "source": source,
           "threads": torch.get_num_threads(), "torch": torch.__version__,
           "machine": platform.processor() or platform.machine(),
           "bare_forward_s": bare, "analysis_s": analysis, "ratio": analysis / bare, "rows": rows}
    print(f"bare forward {bare:.1f} s, analysis {analysis:.1f} s "
          f"(extract {sum(r['extract_s'] for r in rows):.1f} s, metrics+CIs+controls "
          f"{sum(r['metrics_s'] for r in rows):.1f} s): ratio {analysis / bare:.3f}")
    if args.json:
        atomic_write_json(args.json, out)


if __name__ == "__main__":
    main()

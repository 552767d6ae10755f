"""Benchmark: orbit analysis against the bare forward passes of the same images.

    python benchmarks/bench_orbits.py [--images 200] [--steps 12]
        [--families rotation,hue,saturation,blur] [--n-boot 1000] [--data-dir DIR] [--json PATH]

Model: the paper's CIFAR ResNet-18 (512-d) with the paper's SimCLR projector
512→2048→2048 (ReLU, BN, last BN), untrained (timing does not depend on the weights), eval mode,
float32, CIFAR-10 normalisation after the augmentation. Images: the first N CIFAR-10 test
images when --data-dir holds CIFAR-10, else seeded uniform uint8 images (the cost of a forward
pass does not depend on pixel values).

Per family, measured in the same run and interleaved (bare then analysis, then the other way
round for the next family) so that load drift on a shared machine hits both alike; wall and
process CPU seconds are both reported:
- bare: backbone forward passes of the N·K orbit images, built and normalised beforehand
  (no_grad, same batch size);
- analysis: ``extract_orbits`` (augmentation on [0, 1] pixels, normalisation, backbone, every
  head layer, plus one clean-image pass per image when the family's identity is not on the
  grid, for the alignment anchor) and ``analyze_orbit_features`` (all metrics, bootstrap CIs
  with B replicates, both controls).
The target for the ratio analysis / bare is ≤ 1.3.
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


class Clock:
    """Wall and process CPU seconds (CPU time is less sensitive to a loaded, shared machine)."""

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def bare_forward(backbone, images: torch.Tensor, family: str, steps: int, batch_size: int,
                 mean: torch.Tensor, std: torch.Tensor) -> Clock:
    """The backbone alone on the N·K orbit images (built before the clock starts)."""
    x = images.float() / 255.0
    orb = orbit(x, family, steps).reshape(-1, *x.shape[1:])
    orb = (orb - mean) / std
    with Clock() as clock, torch.no_grad():
        for start in range(0, orb.shape[0], batch_size):
            backbone(orb[start:start + batch_size])
    return clock


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
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
    for i, fam in enumerate(families):
        # alternate the order (bare first, then analysis first) so load drift does not favour one
        if i % 2 == 0:
            bare = bare_forward(backbone, images, fam, args.steps, args.batch_size, mean_t, std_t)
        with Clock() as ext:
            of = extract_orbits(backbone, images, fam, args.steps, head,
                                batch_size=args.batch_size, mean=stats.mean, std=stats.std)
        with Clock() as met:
            res = analyze_orbit_features(of, labels, heads=head, n_boot=args.n_boot, seed=0)
        if i % 2 == 1:
            bare = bare_forward(backbone, images, fam, args.steps, args.batch_size, mean_t, std_t)
        row = {"family": fam, "bare_s": bare.wall, "extract_s": ext.wall, "metrics_s": met.wall,
               "ratio": (ext.wall + met.wall) / bare.wall,
               "bare_cpu_s": bare.cpu, "extract_cpu_s": ext.cpu, "metrics_cpu_s": met.cpu,
               "ratio_cpu": (ext.cpu + met.cpu) / bare.cpu, "anchor": res["anchor"],
               "compression_head_out": res["ratios"]["head.4"]["compression"]["value"]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    tot = {k: sum(r[k] for r in rows) for k in ("bare_s", "extract_s", "metrics_s", "bare_cpu_s",
                                                "extract_cpu_s", "metrics_cpu_s")}
    analysis = tot["extract_s"] + tot["metrics_s"]
    analysis_cpu = tot["extract_cpu_s"] + tot["metrics_cpu_s"]
    out = {"benchmark": "orbits", "images": args.images, "steps": args.steps,
           "families": families, "n_boot": args.n_boot, "batch_size": args.batch_size,
           "backbone": f"resnet18 width {args.width} (CIFAR stem, {d}-d)",
           "head": head.spec.to_string(), "source": source,
           "threads": torch.get_num_threads(), "torch": torch.__version__,
           "machine": platform.processor() or platform.machine(), **tot,
           "analysis_s": analysis, "ratio": analysis / tot["bare_s"],
           "analysis_cpu_s": analysis_cpu, "ratio_cpu": analysis_cpu / tot["bare_cpu_s"],
           "rows": rows}
    print(f"bare forward {tot['bare_s']:.1f} s, analysis {analysis:.1f} s (extract "
          f"{tot['extract_s']:.1f} s, metrics+CIs+controls {tot['metrics_s']:.1f} s): wall ratio "
          f"{out['ratio']:.3f}; CPU time {tot['bare_cpu_s']:.1f} s vs {analysis_cpu:.1f} s: "
          f"ratio {out['ratio_cpu']:.3f}")
    if args.json:
        atomic_write_json(args.json, out)


if __name__ == "__main__":
    main()

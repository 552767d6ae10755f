"""Benchmark: exact per-sample H_eff blocks at the paper's SimSiam shapes.

    python benchmarks/bench_blocks.py [--n 256] [--baseline-samples 4] [--json PATH]

Head = predictor ∘ projector of PAPER.md §3 (projector 512→2048→2048, predictor
2048→512→2048, SiLU, no bias, eval mode), loss = negative cosine against fixed targets
(SimSiam with sg(z2)), float64. headgeom's blocks() for all N samples against the naive
baseline measured in the same run: a Python loop of torch.func.hessian over the per-sample
loss, float64, timed on a subset of samples and scaled to N.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import time

import torch
from torch import nn
from torch.func import hessian

from headgeom.geometry import effective_hessian


def paper_head(d: int = 512, hidden: int = 2048) -> nn.Module:
    projector = [nn.Linear(d, hidden, bias=False), nn.SiLU(), nn.Linear(hidden, hidden, bias=False)]
    predictor = [nn.Linear(hidden, 512, bias=False), nn.SiLU(), nn.Linear(512, hidden, bias=False)]
    return nn.Sequential(*projector, *predictor).eval()


def chain_flops(layers, d: int) -> float:
    """FLOPs per sample of the structured path over a layer chain: Jacobian, G and M products."""
    flops, width, first = 0.0, d, True
    for layer in layers:
        if isinstance(layer, nn.Linear):
            if not first:
                flops += 2.0 * d * layer.in_features * layer.out_features
            first, width = False, layer.out_features
        elif not isinstance(layer, nn.Identity):
            flops += 2.0 * width * d * d  # A_lᵀ diag(c) A_l
    return flops + 2.0 * width * d * d  # G = Jᵀ (H J)


def matmul_rate(n: int = 2048, repeats: int = 3) -> float:
    a = torch.randn(n, n, dtype=torch.float64)
    b = torch.randn(n, n, dtype=torch.float64)
    a @ b
    t = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2.0 * n**3 * repeats / (time.perf_counter() - t) / 1e9


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--baseline-samples", type=int, default=4)
    p.add_argument("--chunk-size", type=int, default=16)
    p.add_argument("--json", default=None)
    args = p.parse_args()

    torch.manual_seed(0)
    head = paper_head(args.d).double()
    z = torch.randn(args.n, args.d, dtype=torch.float64)
    target = torch.randn(args.n, 2048, dtype=torch.float64)

    def loss(u):
        return -nn.functional.cosine_similarity(u, target, dim=-1).mean()

    rate = matmul_rate()
    rss0 = peak_rss_gib()
    t = time.perf_counter()
    eh = effective_hessian(head, loss, z, chunk_size=args.chunk_size)
    blocks = eh.blocks()
    ours = time.perf_counter() - t
    rss1 = peak_rss_gib()
    assert eh.structured

    # naive baseline: torch.func.hessian of each sample's loss, one sample at a time
    n_base = args.baseline_samples
    t = time.perf_counter()
    ref = []
    for i in range(n_base):
        ti = target[i]
        f = lambda zi, ti=ti: -nn.functional.cosine_similarity(head(zi[None])[0], ti, dim=0) / args.n  # noqa: E731
        ref.append(hessian(f)(z[i]).detach())
    base_per_sample = (time.perf_counter() - t) / n_base
    ref = torch.stack(ref)
    rel_err = float((blocks[:n_base] - ref).abs().max() / ref.abs().max())

    flops = chain_flops(eh.structured_layers, args.d) * args.n  # work actually done (affine runs folded)
    unfused = chain_flops(list(head), args.d) * args.n
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "N": args.n, "d": args.d, "dtype": "float64",
        "headgeom_blocks_s": round(ours, 2),
        "baseline_s_per_sample": round(base_per_sample, 3),
        "baseline_scaled_s": round(base_per_sample * args.n, 1),
        "baseline_samples_timed": n_base,
        "speedup": round(base_per_sample * args.n / ours, 1),
        "max_rel_error_vs_baseline": rel_err,
        "peak_rss_gib_before": round(rss0, 2),
        "peak_rss_gib_after_blocks": round(rss1, 2),
        "structured_gflop": round(flops / 1e9, 1),
        "structured_gflop_without_folding": round(unfused / 1e9, 1),
        "achieved_gflops": round(flops / ours / 1e9, 1),
        "float64_matmul_gflops": round(rate, 1),
        "fraction_of_matmul_rate": round(flops / ours / 1e9 / rate, 2),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()

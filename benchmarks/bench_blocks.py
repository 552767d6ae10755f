"""Benchmark: exact per-sample H_eff blocks at the paper's SimSiam shapes.

    python benchmarks/bench_blocks.py [--n 256] [--baseline-samples 4] [--scale 1] [--no-jacobian] [--json PATH]

Head = predictor ∘ projector of docs/paper.md §3 (projector 512→2048→2048, predictor
2048→512→2048, SiLU, no bias, eval mode; every width divided by ``--scale``), loss = negative
cosine against fixed targets (SimSiam with sg(z2)), float64. headgeom's blocks() for all N
samples against the naive baseline measured in the same run: a Python loop of
torch.func.hessian over the per-sample loss, float64, timed on a subset of samples and scaled to N.

Four headgeom rows, all exact: the default (``analysis_loss("negative_cosine")``, whose
loss-Hessian blocks are declared as identity + rank 2 and checked by the engine, sandwich
path); the same loss as a plain lambda (nothing declared: its blocks are discovered from a few
batched loss HVPs and verified, headgeom.geometry.engine.loss_discovery); the plain lambda with
discovery off (one loss HVP per sandwich column); and the Jacobian path of the previous release
(``block_strategy="jacobian"``, skipped with ``--no-jacobian``). One-off costs (the import of
torch._dynamo by the first torch.func call, the head's cached analysis copy) are paid before any
timing. The load average of the machine before and after is recorded.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.func import hessian

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.geometry.engine.sandwich import HVP_COST_PER_ELEMENT, block_costs
from headgeom.objectives import analysis_loss

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from gemm_rate import matmul_rate  # noqa: E402


def paper_head(d: int = 512, hidden: int = 2048, bottleneck: int = 512) -> nn.Module:
    projector = [nn.Linear(d, hidden, bias=False), nn.SiLU(), nn.Linear(hidden, hidden, bias=False)]
    predictor = [nn.Linear(hidden, bottleneck, bias=False), nn.SiLU(), nn.Linear(bottleneck, hidden, bias=False)]
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


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--scale", type=int, default=1, help="divide every width by this (a loaded machine)")
    p.add_argument("--no-jacobian", action="store_true", help="skip the previous release's row")
    p.add_argument("--baseline-samples", type=int, default=4)
    p.add_argument("--chunk-size", type=int, default=32)
    p.add_argument("--json", default=None)
    args = p.parse_args()

    torch.manual_seed(0)
    args.d, k, bottleneck = 512 // args.scale, 2048 // args.scale, 512 // args.scale
    head = paper_head(args.d, k, bottleneck).double()
    z = torch.randn(args.n, args.d, dtype=torch.float64)
    target = torch.randn(args.n, k, dtype=torch.float64)
    load_before = os.getloadavg()
    declared = analysis_loss("negative_cosine", target)

    def plain(u):  # the same loss with no declared structure
        return -nn.functional.cosine_similarity(u, target, dim=-1).mean()

    def baseline(indices) -> tuple[float, list[torch.Tensor]]:
        """Seconds and per-sample float64 Hessians by torch.func.hessian, one sample at a time."""
        out = []
        t = time.perf_counter()
        for i in indices:
            ti = target[i]
            f = lambda zi, ti=ti: -nn.functional.cosine_similarity(head(zi[None])[0], ti, dim=0) / args.n  # noqa: E731
            out.append(hessian(f)(z[i]).detach())
        return time.perf_counter() - t, out

    # one-off costs kept out of every row: the first torch.func transform of a process imports
    # torch._dynamo (seconds), and the first engine call on a head builds its cached analysis copy
    hessian(lambda x: x.pow(3).sum())(torch.ones(2, dtype=torch.float64))
    cache = HeadCache()  # the analysis copy and its folded chain, kept across the rows
    effective_hessian(head, analysis_loss("negative_cosine", target[:2]), z[:2], cache=cache)
    # the baseline is timed in two halves, before and after headgeom's rows, so that a change
    # of load on the machine during the run weighs on both sides alike
    n_base = args.baseline_samples
    first = list(range(n_base // 2))
    t_first, ref_first = baseline(first)
    rate = matmul_rate()
    rows = {}
    cases = [("sandwich+declared", declared, "auto", True), ("plain lambda (discovered)", plain, "auto", True),
             ("plain lambda, discovery off (hvp)", plain, "auto", False)]
    if not args.no_jacobian:
        cases.append(("jacobian (previous)", plain, "jacobian", False))
    for label, loss, strategy, discover in cases:
        rss0 = peak_rss_gib()
        t = time.perf_counter()
        eh = effective_hessian(head, loss, z, chunk_size=args.chunk_size, block_strategy=strategy,
                               discover_structure=discover, cache=cache)
        blocks = eh.blocks()
        seconds = time.perf_counter() - t
        assert eh.structured
        rows[label] = {"seconds": seconds, "path": eh.block_path(), "blocks": blocks,
                       "peak_rss_gib": round(max(rss0, peak_rss_gib()), 2)}

    t_second, ref_second = baseline(range(len(first), n_base))
    base_per_sample = (t_first + t_second) / n_base
    ref = torch.stack(ref_first + ref_second)
    base_scaled = base_per_sample * args.n

    layers = eh.structured_layers
    # GEMM FLOPs only: the HVP term of block_costs is a memory-bound weight, not arithmetic
    hvp_m = HVP_COST_PER_ELEMENT * k * bottleneck
    flops = {"sandwich+declared": block_costs(layers, args.d, k, True)["sandwich"],
             "plain lambda (discovered)": block_costs(layers, args.d, k, True)["sandwich"],  # rank 8, not 2
             "plain lambda, discovery off (hvp)": block_costs(layers, args.d, k, False)["sandwich"] - hvp_m,
             "jacobian (previous)": chain_flops(layers, args.d)}
    result = {
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}",
        "load_average_1_5_15_before": [round(x, 2) for x in load_before],
        "load_average_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
        "N": args.n, "d": args.d, "k": k, "bottleneck": bottleneck, "dtype": "float64",
        "baseline_s_per_sample": round(base_per_sample, 3),
        "baseline_scaled_s": round(base_scaled, 1),
        "baseline_samples_timed": n_base,
        "float64_matmul_gflops": round(rate, 1),
        "gflop_per_sample_unfolded_chain": round(chain_flops(list(head), args.d) / 1e9, 2),
        "rows": {},
    }
    for label, row in rows.items():
        rel_err = float((row["blocks"][:n_base] - ref).abs().max() / ref.abs().max())
        gflop = flops[label] * args.n / 1e9
        result["rows"][label] = {
            "path": row["path"], "seconds": round(row["seconds"], 2),
            "speedup_vs_baseline": round(base_scaled / row["seconds"], 1),
            "max_rel_error_vs_baseline": rel_err, "peak_rss_gib": row["peak_rss_gib"],
            "gflop_per_sample": round(flops[label] / 1e9, 2),
            "achieved_gflops": round(gflop / row["seconds"], 1),
            "fraction_of_matmul_rate": round(gflop / row["seconds"] / rate, 2),
        }
    base_rows = result["rows"]
    for label, row in base_rows.items():
        row["seconds_vs_declared"] = round(row["seconds"] / base_rows["sandwich+declared"]["seconds"], 2)
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()

"""Benchmark: one tree's block path against another's, timed in alternating worker processes.

    HEADGEOM_BENCH_THREADS=1 python benchmarks/bench_blocks_ab.py --before <rev> [--before <rev2> ...] \\
        --case simsiam [--scale 1] [--n 32] [--rounds 3] [--reps 2] [--naive-samples 2] [--json PATH]

On a machine shared with other jobs absolute seconds move with the load, so a change to the
engine is measured as a same-run ratio: worker processes alternate (before, after, before, ...)
and each times ``effective_hessian(head, loss, z).blocks()`` (median over ``--reps`` calls after
a warm call) and, on ``--naive-samples`` samples, the naive per-sample loop of torch.func.hessian
(float64) it is compared against. Cases (every width divided by ``--scale``):

- ``simsiam``: the paper's predictor ∘ projector (docs/paper.md §3: 512→2048→2048,
  2048→512→2048, SiLU, no bias), ``analysis_loss("negative_cosine")`` (declared curvature);
- ``simsiam-plain``: the same head, the same loss as a plain lambda (discovered curvature);
- ``dino`` / ``dino-mlp``: the ViT-S/16 DINO head (384→2048→2048→256, L2, weight-normed
  256→65536 at scale 1) or the same MLP ending in one Linear to 2048, ``analysis_loss("dino")``.

Reported per tree: the median and the best (smallest) call seconds per sample; after/before per
round, then the median; naive/after and naive/before (each ratio from one worker's own timings);
the float64 GEMM rate measured in each worker and the fraction of it the call achieves on the GEMM
FLOPs of ``block_costs`` (median and best over the workers); the same timed by CPU time
(``time.process_time``: with ``HEADGEOM_BENCH_THREADS=1`` the figure a machine shared with other
jobs disturbs least, since time spent waiting for a core is not counted); the load average before and after each
worker. With several ``--before`` revisions every tree takes its turn in each round, keyed by its
revision.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from bench_fixed_cost import alternate, cache_kw, write_json  # noqa: E402
from gemm_rate import matmul_rate  # noqa: E402

CASES = ("simsiam", "simsiam-plain", "dino", "dino-mlp")


def problem(case: str, scale: int, n: int):
    """(head, loss, plain per-sample loss, z) of a case, float64."""
    import torch
    from torch import nn

    from headgeom.heads import head_from
    from headgeom.objectives import analysis_loss, dino_pair

    torch.manual_seed(0)
    if case.startswith("simsiam"):
        d, k, b = 512 // scale, 2048 // scale, 512 // scale
        head = nn.Sequential(nn.Linear(d, k, bias=False), nn.SiLU(), nn.Linear(k, k, bias=False),
                             nn.Linear(k, b, bias=False), nn.SiLU(), nn.Linear(b, k, bias=False)).double().eval()
        z = torch.randn(n, d, dtype=torch.float64)
        target = torch.randn(n, k, dtype=torch.float64)
        declared = analysis_loss("negative_cosine", target)

        def per_sample(u, i):
            return -nn.functional.cosine_similarity(u, target[i], dim=0) / n

        loss = declared if case == "simsiam" else (lambda u: -nn.functional.cosine_similarity(u, target, dim=-1).mean())
        return head, loss, per_sample, z
    d, hidden, bottleneck, out = 384 // scale, 2048 // scale, 256 // scale, 65536 // scale
    spec = (f"{d}-{hidden}-{hidden}-{out}:gelu:dino={bottleneck}" if case == "dino"
            else f"{d}-{hidden}-{hidden}-{2048 // scale}:gelu")
    head = head_from(spec, dtype=torch.float64).eval()
    z = torch.randn(n, d, dtype=torch.float64)
    with torch.no_grad():
        teacher = head(z + 0.1 * torch.randn_like(z))

    def per_sample(u, i):
        return dino_pair(u[None], teacher[i:i + 1]) / n

    return head, analysis_loss("dino", teacher), per_sample, z


def worker(case: str, scale: int, n: int, reps: int, naive_samples: int) -> dict:
    """Time the tree headgeom is imported from, in this fresh process."""
    import torch
    from torch.func import hessian

    from headgeom.geometry import effective_hessian
    try:
        from headgeom.geometry.engine.sandwich import block_costs
    except ImportError:  # a --before tree from before geometry/ had its engine, layers and linalg rooms
        from headgeom.geometry.mlp_sandwich import block_costs

    head, loss, per_sample, z = problem(case, scale, n)
    load0 = os.getloadavg()[0]
    hessian(lambda x: x.pow(3).sum())(torch.ones(2, dtype=torch.float64))  # imports torch._dynamo
    kw = cache_kw()
    effective_hessian(head, loss, z, **kw).blocks()  # warm: the cached analysis copy
    times, cpu = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        eh = effective_hessian(head, loss, z, **kw)
        blocks = eh.blocks()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    rate, rate_cpu = matmul_rate(1024), matmul_rate(1024, clock=time.process_time)
    naive_t, err = [], 0.0
    for i in range(min(naive_samples, n)):
        t = time.perf_counter()
        ref = hessian(lambda zi, i=i: per_sample(head(zi[None])[0], i))(z[i]).detach()
        naive_t.append(time.perf_counter() - t)
        err = max(err, float((blocks[i] - ref).abs().max() / ref.abs().max()))
    call = statistics.median(times)
    flops = block_costs(eh.structured_layers, z.shape[1], eh.k, True)["sandwich"] * n if eh.structured else float("nan")
    call_cpu = statistics.median(cpu)
    return {"call_s": call, "per_sample_s": call / n, "naive_per_sample_s": statistics.median(naive_t) if naive_t else None,
            "path": eh.block_path(), "gemm_gflops": rate, "achieved_gflops": flops / call / 1e9,
            "cpu_per_sample_s": call_cpu / n, "gemm_gflops_cpu": rate_cpu, "achieved_gflops_cpu": flops / call_cpu / 1e9,
            "max_rel_error_vs_naive": err, "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", action="append", help="revision timed as 'before' (required; repeat for several)")
    p.add_argument("--case", choices=CASES, default="simsiam")
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--naive-samples", type=int, default=2)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(int(os.environ.get("HEADGEOM_BENCH_THREADS", "2")))
        print(json.dumps(worker(args.case, args.scale, args.n, args.reps, args.naive_samples)))
        return
    if not args.before:
        p.error("--before REV is required: the revision the working tree is timed against")

    before = args.before[0] if len(args.before) == 1 else args.before
    runs = alternate(__file__, before, args.rounds,
                     ["--case", args.case, "--scale", str(args.scale), "--n", str(args.n), "--reps", str(args.reps),
                      "--naive-samples", str(args.naive_samples)])
    result = summarize(runs)
    result.update({"case": args.case, "scale": args.scale, "N": args.n, "before": args.before, "rounds": args.rounds,
                   "reps": args.reps, "threads": os.environ.get("HEADGEOM_BENCH_THREADS", "2")})
    print(json.dumps(result, indent=2))
    if args.json:
        write_json(args.json, result)


def summarize(runs: dict[str, list[dict]]) -> dict:
    """Per tree the median and best figures; this tree's time over each other tree's, per round, then the median."""
    def med(label: str, f) -> float:
        return round(statistics.median(f(r) for r in runs[label]), 4)

    result: dict = {"load_per_worker": {label: [r["load"] for r in rs] for label, rs in runs.items()}}
    for label in runs:
        fractions = [r["achieved_gflops"] / r["gemm_gflops"] for r in runs[label]]
        cpu_fractions = [r["achieved_gflops_cpu"] / r["gemm_gflops_cpu"] for r in runs[label]]
        result[label] = {
            "path": runs[label][-1]["path"],
            "per_sample_s": med(label, lambda r: r["per_sample_s"]),
            "best_per_sample_s": round(min(r["per_sample_s"] for r in runs[label]), 4),
            "naive_over_call": med(label, lambda r: r["naive_per_sample_s"] / r["per_sample_s"]),
            "fraction_of_gemm_rate": round(statistics.median(fractions), 3),
            "best_fraction_of_gemm_rate": round(max(fractions), 3),
            "gemm_gflops": [round(r["gemm_gflops"], 1) for r in runs[label]],
            "cpu_per_sample_s": med(label, lambda r: r["cpu_per_sample_s"]),
            "best_cpu_per_sample_s": round(min(r["cpu_per_sample_s"] for r in runs[label]), 4),
            "fraction_of_gemm_rate_cpu": round(statistics.median(cpu_fractions), 3),
            "best_fraction_of_gemm_rate_cpu": round(max(cpu_fractions), 3),
            "max_rel_error_vs_naive": max(r["max_rel_error_vs_naive"] for r in runs[label]),
        }
    # after/before per round (adjacent workers), then the median: the load moves between rounds
    for label in runs:
        if label != "after":
            key = "after_over_before" if label == "before" else f"after_over_{label}"
            result[key] = round(statistics.median(
                a["per_sample_s"] / b["per_sample_s"] for a, b in zip(runs["after"], runs[label])), 3)
            result[key + "_cpu"] = round(statistics.median(
                a["cpu_per_sample_s"] / b["cpu_per_sample_s"] for a, b in zip(runs["after"], runs[label])), 3)
    return result


if __name__ == "__main__":
    main()

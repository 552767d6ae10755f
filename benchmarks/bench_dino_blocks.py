"""Benchmark: per-sample H_eff blocks of a DINO head against an MLP head and the naive loop.

    python benchmarks/bench_dino_blocks.py [--n 16] [--in-dim 384] [--hidden 2048] \
        [--bottleneck 256] [--out 65536] [--baseline-samples 2] [--json PATH]

DINO head (the ViT-S/16 DINOHead by default): in → hidden → hidden → bottleneck (GELU),
L2-normalised, weight-normed bottleneck → out, built as ``head_from("…:gelu:dino=…")``.
MLP head: the same MLP with the bottleneck, L2 and last layer replaced by one Linear to
``--mlp-out`` (2048), i.e. in → hidden → hidden → 2048. float64, eval mode.

Two losses, each on both heads: the DINO loss against a fixed teacher output
(``analysis_loss("dino", t)``: declared diag(p) − ppᵀ blocks, headgeom.objectives.dino) and the negative
cosine against fixed targets (declared identity + rank 2). Every figure is from one run: the
naive baseline, a Python loop of torch.func.hessian over the per-sample loss of the DINO
head, is timed on ``--baseline-samples`` samples, half before and half after headgeom's
rows, and scaled to N; the ratios are what the run measured. headgeom's rows are the median of
``--repeats`` calls, after one untimed call per head and loss on 2 samples (the per-head set-up, the
analysis copy and its kept weight products, is paid once per head and weights; its cost is
benchmarks/bench_fixed_cost.py's subject, not the per-sample cost's).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import torch
from torch.func import hessian

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.heads import head_from
from headgeom.objectives import analysis_loss, dino_pair


def load() -> str:
    """The 1, 5 and 15 minute load averages (other sessions share the machine)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--in-dim", type=int, default=384)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--bottleneck", type=int, default=256)
    p.add_argument("--out", type=int, default=65536)
    p.add_argument("--mlp-out", type=int, default=2048)
    p.add_argument("--baseline-samples", type=int, default=2)
    p.add_argument("--chunk-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3, help="timed calls per row; the median is reported (default 3)")
    p.add_argument("--json", default=None)
    args = p.parse_args()

    torch.manual_seed(0)
    d, n = args.in_dim, args.n
    dino_head = head_from(f"{d}-{args.hidden}-{args.hidden}-{args.out}:gelu:dino={args.bottleneck}",
                          dtype=torch.float64).eval()
    mlp_head = head_from(f"{d}-{args.hidden}-{args.hidden}-{args.mlp_out}:gelu", dtype=torch.float64).eval()
    z = torch.randn(n, d, dtype=torch.float64)
    with torch.no_grad():  # teacher outputs / targets from another view of the same heads
        z2 = z + 0.1 * torch.randn_like(z)
        fixed = {"dino": dino_head(z2), "mlp": mlp_head(z2)}
    heads = {"dino": dino_head, "mlp": mlp_head}

    def loss_for(loss_name: str, head_name: str):
        return analysis_loss(loss_name, fixed[head_name])

    def baseline(indices) -> tuple[float, list[torch.Tensor]]:
        """Seconds and per-sample Hessians of the DINO head under the DINO loss, one sample at a time."""
        out = []
        t = time.perf_counter()
        for i in indices:
            ti = fixed["dino"][i:i + 1]
            f = lambda zi, ti=ti: dino_pair(dino_head(zi[None]), ti) / n  # noqa: E731
            out.append(hessian(f)(z[i]).detach())
        return time.perf_counter() - t, out

    loads = [load()]
    n_base = args.baseline_samples
    first = list(range(n_base // 2))
    t_first, ref_first = baseline(first)
    rows = {}
    cache = HeadCache()
    for head_name in ("dino", "mlp"):  # the per-head set-up (analysis copy, kept weight products) is paid once
        for loss_name in ("dino", "negative_cosine"):
            effective_hessian(heads[head_name], analysis_loss(loss_name, fixed[head_name][:2]), z[:2],
                              cache=cache).blocks()
    for loss_name in ("dino", "negative_cosine"):
        for head_name in ("dino", "mlp"):
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                eh = effective_hessian(heads[head_name], loss_for(loss_name, head_name), z, chunk_size=args.chunk_size,
                                       cache=cache)
                blocks = eh.blocks()
                times.append(time.perf_counter() - t)
            seconds = statistics.median(times)
            rows[f"{head_name} head, {loss_name} loss"] = {
                "seconds": seconds, "per_sample_s": seconds / n, "path": eh.block_path(), "all_seconds": times,
                "structured": eh.structured, "blocks": blocks if (head_name, loss_name) == ("dino", "dino") else None}
    t_second, ref_second = baseline(range(len(first), n_base))
    loads.append(load())
    base_per_sample = (t_first + t_second) / n_base
    ref = torch.stack(ref_first + ref_second)

    result = {
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
                   f"torch {torch.__version__}",
        "load_average_start_end": loads,
        "N": n, "dtype": "float64",
        "dino_head": dino_head.spec.to_string(), "mlp_head": mlp_head.spec.to_string(),
        "baseline": "torch.func.hessian per sample, DINO head, DINO loss",
        "baseline_s_per_sample": round(base_per_sample, 3), "baseline_samples_timed": n_base,
        "rows": {},
    }
    for label, row in rows.items():
        result["rows"][label] = {"path": row["path"], "structured": row["structured"],
                                 "seconds": round(row["seconds"], 2), "per_sample_s": round(row["per_sample_s"], 4),
                                 "all_seconds": [round(x, 2) for x in row["all_seconds"]]}
        if row["blocks"] is not None:
            err = float((row["blocks"][:n_base] - ref).abs().max() / ref.abs().max())
            result["rows"][label]["max_rel_error_vs_baseline"] = err
    per = {label: row["per_sample_s"] for label, row in rows.items()}
    result["ratios"] = {
        "dino/mlp per-sample cost, dino loss": round(per["dino head, dino loss"] / per["mlp head, dino loss"], 2),
        "dino/mlp per-sample cost, negative_cosine loss":
            round(per["dino head, negative_cosine loss"] / per["mlp head, negative_cosine loss"], 2),
        "naive loop / dino head, dino loss": round(base_per_sample / per["dino head, dino loss"], 1),
        "naive loop / dino head, negative_cosine loss":
            round(base_per_sample / per["dino head, negative_cosine loss"], 1),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()

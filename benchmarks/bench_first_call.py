"""Benchmark: what a fresh head's first engine call costs against a warm call, each process fresh.

    python benchmarks/bench_first_call.py [--n 8] [--scale 1] [--rounds 5] [--reps 3] [--torch-func] [--profile] \
        [--json PATH]

Head = predictor ∘ projector of docs/paper.md §3 (projector 512→2048→2048, predictor
2048→512→2048, SiLU, no bias, eval mode; every width divided by ``--scale``), float64, loss =
negative cosine against fixed targets declared through ``analysis_loss`` (the tracker's case),
N = ``--n``. One call = ``effective_hessian(head, loss, z, cache=cache).blocks()``.

Every round is a fresh worker process, which reports, in this order:

- ``import_s``: ``import torch`` and ``import headgeom.geometry`` (not part of any call);
- ``torch_warmup_s``: torch's own first-use costs, excluded from the calls: one plain autograd
  backward of a tiny unrelated function and one float64 GEMM at the head's widths (BLAS threads);
  with ``--torch-func`` also one ``torch.func`` hessian / grad_and_value / jvp / vjp / vmap (their
  first vjp or grad imports torch._dynamo, seconds: as in a process that used torch.func before);
- ``first_s``: the first engine call of the process, on a head never seen (what a user's first
  call pays: headgeom's own first-use costs, the analysis copy, discovery, folding, checks), and
  ``first_call_imported``: which of torch._dynamo and sympy that call imported (none, since the
  structured path with a declared loss runs on plain autograd);
- ``fresh_s``: a second head of the same shapes (other weights) in the same process, its first call
  (the per-head costs alone: nothing of the engine is first-time any more);
- ``warm_s``: the median of ``--reps`` further calls on that second head with the same
  :class:`~headgeom.geometry.HeadCache` (the analysis copy, its chain and kept weight
  products reused, as the tracker and the monitor reuse them);
- ``per_head_gemms_s``: the two products a new head needs whatever the code, timed alone: the fold
  of the projector's last and the predictor's first Linear (2048 × 2048 by 512 × 2048: 4.3 GFLOP)
  and the tail Gram W_Lᵀ W_L (1.1 GFLOP); ``floor_over_warm`` = (warm + these) / warm, the ratio a
  first call cannot go below (the warm call is about 8 × 2.05 GFLOP at N = 8, BENCHMARKS.md).

The figures are medians over rounds of the per-round ratios first / warm and fresh / warm (the goal:
first / warm ≤ 1.2 at N = 8). ``--before REV`` also times revision REV's ``src/`` (its module-level
cache, where it has no HeadCache) in workers alternating with this tree's. ``--profile`` prints, per
round, the cProfiles of the first and the fresh-head call (top functions by cumulative time). The
load average is read after every worker.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from bench_fixed_cost import REPO, cache_kw, tree_of, write_json  # noqa: E402

WIDTHS = (512, 2048, 2048, 512, 2048)  # d, projector hidden, projector out, predictor bottleneck, output


def worker(n: int, scale: int, reps: int, profile: bool, torch_func: bool) -> dict:
    """One fresh process: imports, torch's warm-up, then the first, fresh and warm calls."""
    t0 = time.perf_counter()
    import torch
    from torch import nn
    from torch.func import grad_and_value, hessian, jvp, vjp, vmap

    from headgeom.geometry import effective_hessian
    from headgeom.objectives import analysis_loss

    out: dict = {"import_s": time.perf_counter() - t0, "threads": torch.get_num_threads()}

    d, h1, h2, b, k = (max(1, w // scale) for w in WIDTHS)
    dt = torch.float64

    def head(seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(d, h1, bias=False), nn.SiLU(), nn.Linear(h1, h2, bias=False),
                             nn.Linear(h2, b, bias=False), nn.SiLU(), nn.Linear(b, k, bias=False)).to(dt).eval()

    t0 = time.perf_counter()  # torch's own first-use costs, on nothing the engine will see
    tiny = torch.randn(3, 4, dtype=dt, requires_grad=True)
    torch.autograd.grad(torch.tanh(tiny).pow(3).sum(), tiny)
    torch.randn(h1, h2, dtype=dt) @ torch.randn(h2, b, dtype=dt)  # BLAS threads
    if torch_func:  # as in a process that has used torch.func before: torch._dynamo imported
        f = lambda x: torch.tanh(x).pow(3).sum()  # noqa: E731
        x = tiny.detach()
        hessian(f)(x[0])
        grad_and_value(f)(x)
        jvp(torch.sin, (x,), (x,))
        vjp(torch.sin, x)[1](x)
        vmap(torch.sin)(x)
    out["torch_warmup_s"] = time.perf_counter() - t0
    watched = ("torch._dynamo", "sympy")
    loaded = {m for m in watched if m in sys.modules}

    g = torch.Generator().manual_seed(1)
    z = torch.randn(n, d, dtype=dt, generator=g)
    loss = analysis_loss("negative_cosine", torch.randn(n, k, dtype=dt, generator=g))
    first_head, second_head = head(0), head(1)

    def call(h, kw: dict) -> float:  # kw: cache_kw(), a HeadCache (none in a --before tree older than it)
        t = time.perf_counter()
        effective_hessian(h, loss, z, **kw).blocks()
        return time.perf_counter() - t

    def profiled(label: str, h, kw: dict) -> float:
        if not profile:
            return call(h, kw)
        prof = cProfile.Profile()
        took = prof.runcall(call, h, kw)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
        print(f"==== {label} call: {took:.3f} s\n{text.getvalue()}", file=sys.stderr)
        return took

    out["first_s"] = profiled("first", first_head, cache_kw())
    out["first_call_imported"] = sorted(m for m in watched if m in sys.modules and m not in loaded)
    kw = cache_kw()
    out["fresh_s"] = profiled("fresh-head", second_head, kw)
    out["warm_s"] = statistics.median(call(second_head, kw) for _ in range(reps))

    def gemms() -> float:  # what a new head needs whatever the code: the fold q1·p2 and the tail Gram W_Lᵀ W_L
        p2, q1, q2 = (second_head[i].weight for i in (2, 3, 5))
        t = time.perf_counter()
        q1 @ p2
        q2.T @ q2
        return time.perf_counter() - t

    out["per_head_gemms_s"] = statistics.median(gemms() for _ in range(3))
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_worker(src: Path, args: argparse.Namespace) -> dict:
    """One fresh worker process importing headgeom from ``src``; its JSON line, with the ratios."""
    cmd = [sys.executable, __file__, "--worker", "--n", str(args.n), "--scale", str(args.scale),
           "--reps", str(args.reps)] + (["--profile"] if args.profile else []) + \
        (["--torch-func"] if args.torch_func else [])
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(src)))
    if args.profile:
        print(done.stderr, file=sys.stderr)
    res = json.loads(done.stdout.strip().splitlines()[-1])
    res["first_over_warm"] = res["first_s"] / res["warm_s"]
    res["fresh_over_warm"] = res["fresh_s"] / res["warm_s"]
    res["floor_over_warm"] = (res["warm_s"] + res["per_head_gemms_s"]) / res["warm_s"]
    return res


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--scale", type=int, default=1, help="divide the paper's widths by this")
    p.add_argument("--rounds", type=int, default=5, help="fresh worker processes (per tree)")
    p.add_argument("--reps", type=int, default=3, help="warm calls per process (median)")
    p.add_argument("--before", default=None,
                   help="also time this git revision's src/ in alternating workers (before, after, ...)")
    p.add_argument("--profile", action="store_true", help="print the cProfiles of the first and fresh-head calls")
    p.add_argument("--torch-func", action="store_true",
                   help="warm torch.func up too before the calls (imports torch._dynamo, as a process that used it)")
    p.add_argument("--json", default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.n, args.scale, args.reps, args.profile, args.torch_func)))
        return

    loads = [load()]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": REPO / "src"}
        if args.before:
            trees = {"before": tree_of(args.before, Path(tmp)), **trees}
        runs: dict[str, list[dict]] = {label: [] for label in trees}
        for r in range(args.rounds):
            for label, src in trees.items():
                res = run_worker(src, args)
                runs[label].append(res)
                loads.append(load())
                print(f"round {r + 1} {label}: import {res['import_s']:.2f} s, torch warm-up "
                      f"{res['torch_warmup_s']:.2f} s | first {res['first_s']:.3f} s, fresh head {res['fresh_s']:.3f} s, "
                      f"warm {res['warm_s']:.3f} s | first/warm {res['first_over_warm']:.2f}, fresh/warm "
                      f"{res['fresh_over_warm']:.2f}, floor {res['floor_over_warm']:.2f} | first call imported "
                      f"{res['first_call_imported'] or 'nothing watched'} | load {loads[-1]}", flush=True)
    d, h1, h2, b, k = (max(1, w // args.scale) for w in WIDTHS)
    result = {
        "head": f"{d}→{h1}→{h2} SiLU, {h2}→{b}→{k} SiLU, no bias, float64, eval; negative cosine (declared)",
        "N": args.n, "torch_func_warmed": args.torch_func, "before": args.before, "cpus": os.cpu_count(),
        "load_average_1_5_15": loads, "runs": runs, "medians": {},
    }
    for label, rs in runs.items():
        med = {key: statistics.median(r[key] for r in rs)
               for key in ("first_over_warm", "fresh_over_warm", "floor_over_warm", "first_s", "fresh_s", "warm_s")}
        result["medians"][label] = med
        print(f"{label}: median first/warm {med['first_over_warm']:.3f} (goal ≤ 1.2), fresh head/warm "
              f"{med['fresh_over_warm']:.3f}, floor (warm + the per-head GEMMs) / warm {med['floor_over_warm']:.3f}; "
              f"first {med['first_s']:.3f} s, warm {med['warm_s']:.3f} s")
    print(f"load average {loads[0]} → {loads[-1]} on {os.cpu_count()} CPUs")
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()

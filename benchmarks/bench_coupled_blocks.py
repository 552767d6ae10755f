"""Benchmark: exact pullback-metric blocks G_i = J_iᵀ [∇²_u L]_ii J_i under a batch-coupled loss
(SimCLR's NT-Xent), as geometry tracking computes them for a SimCLR run.

    python benchmarks/bench_coupled_blocks.py [--loss nt_xent|vicreg|barlow_twins] [--dims 128,512] [--k 128]
        [--n 256] [--b 32] [--repeats 3] [--json PATH]

Head: SimCLR v1's d-d-128 (Linear, ReLU, Linear), float64 (the tracker's analysis dtype);
z (n, d) and the other view's head outputs (n, k) fixed; loss = symmetric NT-Xent over the batch
(or VICReg 25/25/1, or Barlow Twins λ = 0.0051, with ``--loss``), so [∇²L] is not block diagonal. Blocks of the first b samples, the others held at their head
outputs (the tracker's ``block_samples``). headgeom's ``effective_hessian(...)
.gauss_newton_blocks()`` against the baseline written here, timed in the same run: one loss HVP per (sample, column of J_i), i.e.
d HVPs per sample (what the engine did for every shape before). Two headgeom rows: the loss as
a plain function (HVP path: with k < d the k × k loss-Hessian blocks from k HVPs per sample)
and the loss declaring NT-Xent's closed-form diagonal blocks, as SimCLR's geometry problem does
(no loss HVPs; the engine checks the declaration on three rows). All results are compared (max
relative difference) before any time is reported; the figure is the median over repeats.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
from torch import Tensor, nn
from torch.func import grad, jacrev, jvp, vmap

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.io import atomic_write_json
from headgeom.objectives import OBJECTIVES, analysis_loss

LOSSES = sorted(n for n, s in OBJECTIVES.items() if s.batch_coupled and s.diagonal_blocks)  # declared diagonal blocks


def simclr_head(d: int, k: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, k)).double()


def problem(d: int, k: int, n: int, b: int, seed: int = 0, loss_name: str = "nt_xent"):
    """(head, loss of the first b rows' outputs with the rest fixed, z[:b]): the tracker's own
    first-rows loss around ``analysis_loss(loss_name, other)``, so it declares the closed-form
    diagonal blocks as the SimCLR, VICReg and Barlow Twins geometry problems do."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    head = simclr_head(d, k)
    z = torch.randn(n, d, generator=g, dtype=torch.float64).relu()  # post-ReLU backbone features
    with torch.no_grad():
        u = head(z)
        other = head(z + 0.3 * torch.randn(n, d, generator=g, dtype=torch.float64).relu())
    return head, analysis_loss(loss_name, other).first_rows(b, u), z[:b]


def baseline_blocks(head: nn.Module, loss, z: Tensor) -> Tensor:
    """d loss HVPs per sample, one per column of J_i, each on a tangent supported on row i."""
    with torch.no_grad():
        u = head(z)
    n, k = u.shape
    jt = vmap(jacrev(lambda zi: head(zi[None])[0]))(z).transpose(1, 2)  # (n, d, k)
    g_loss = grad(loss)

    def single(i: Tensor, w: Tensor) -> Tensor:
        onehot = (torch.arange(n) == i).to(u.dtype)
        return (jvp(g_loss, (u,), (onehot[:, None] * w[None, :],))[1] * onehot[:, None]).sum(0)

    d = z.shape[1]
    hjt = vmap(single, chunk_size=64)(torch.arange(n).repeat_interleave(d), jt.reshape(n * d, k))
    return jt @ hjt.reshape(n, d, k).transpose(1, 2)


def timed(fn, repeats: int) -> tuple[float, Tensor]:
    """Median seconds over ``repeats`` calls after one untimed warm-up call, and the result."""
    times, out = [], fn().detach()
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn().detach()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--loss", default="nt_xent", choices=LOSSES)
    p.add_argument("--dims", default="128,512", help="backbone feature dims d, comma-separated")
    p.add_argument("--k", type=int, default=128, help="head output dim")
    p.add_argument("--n", type=int, default=256, help="probe batch")
    p.add_argument("--b", type=int, default=32, help="samples whose blocks are computed")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = []
    for d in [int(x) for x in args.dims.split(",")]:
        head, loss, z = problem(d, args.k, args.n, args.b, loss_name=args.loss)
        t_base, g_base = timed(lambda: baseline_blocks(head, loss, z), args.repeats)
        undeclared = lambda u: loss(u)  # noqa: E731  (the same loss without its declaration)
        cache = HeadCache()  # repeated calls on one head reuse its analysis copy, as the tracker's do
        t_hvp, g_hvp = timed(lambda: effective_hessian(head, undeclared, z, cache=cache).gauss_newton_blocks(),
                             args.repeats)
        t_ours, g_ours = timed(lambda: effective_hessian(head, loss, z, cache=cache).gauss_newton_blocks(), args.repeats)
        err = max(float((g - g_base).abs().max() / g_base.abs().max()) for g in (g_hvp, g_ours))
        if err > 1e-9:
            raise SystemExit(f"headgeom's blocks differ from the baseline by {err:.2e} (relative); no timing reported")
        rows.append({"loss": args.loss, "d": d, "k": args.k, "n": args.n, "b": args.b, "baseline_s": t_base, "hvp_path_s": t_hvp,
                     "headgeom_s": t_ours, "speedup_hvp_path": t_base / t_hvp, "speedup": t_base / t_ours,
                     "max_rel_diff": err})
        print(f"{args.loss} d={d} k={args.k} n={args.n} b={args.b}: baseline {t_base:.2f} s, HVP path {t_hvp:.2f} s "
              f"({t_base / t_hvp:.2f}x), declared blocks {t_ours:.3f} s ({t_base / t_ours:.1f}x); "
              f"max rel diff {err:.1e}", flush=True)
    result = {"machine": {"platform": platform.platform(), "torch": torch.__version__,
                          "threads": torch.get_num_threads()}, "rows": rows}
    if args.json:
        atomic_write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()

"""How close to the GEMM rate the engine's blocks can come: its own matrix products, replayed alone.

Usage:
    HEADGEOM_BENCH_THREADS=2 python benchmarks/bench_gemm_ceiling.py [--case simsiam] [--n 128] [--rounds 3] \
        [--scale 1] [--json PATH]

The engine's warm ``effective_hessian(...).blocks()`` call of a ``bench_blocks_ab`` case is run once under a
dispatch mode that records every matrix product it makes (``mm``, ``bmm``, ``addmm``, ``baddbmm``, with
the shapes and strides of operands and results). Then, per round and in turn:

- the engine's warm call, timed;
- each recorded product replayed alone on fresh operands of the same shapes and strides (warm: the
  fastest of two runs of each), summed: the time the call's GEMMs take with nothing else around them;
- the machine's float64 GEMM rate (a warm 1024² product, fastest of three: ``gemm_rate.matmul_rate``).

Reported, each over the counted FLOPs of the cost model (``block_costs``, the numerator of the
engine's fraction of the GEMM rate in bench_blocks_ab): the engine's fraction of the GEMM rate, and the
**ceiling**, the fraction it would reach if everything but its products took no time and each product
ran as it does alone. A goal above the ceiling cannot be met by removing element-wise passes, copies
or page faults: only by faster products at these shapes (or fewer FLOPs, which the cost model would
count too). Medians over rounds, and the recorded products' own FLOPs (which should equal the count).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_blocks_ab import CASES, problem  # noqa: E402
from bench_fixed_cost import cache_kw, write_json  # noqa: E402
from gemm_rate import matmul_rate  # noqa: E402

PRODUCTS = {"mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_"}


def product_flops(name: str, shapes: list[tuple[int, ...]]) -> float:
    """FLOPs of one product from its operands' shapes (the two multiplied operands: the last two of
    addmm/baddbmm's three, the first two otherwise)."""
    a, b = shapes[-2:] if name.startswith(("addmm", "baddbmm")) else shapes[:2]
    batch = a[0] if len(a) == 3 else 1
    return 2.0 * batch * a[-2] * a[-1] * b[-1]


class ProductRecorder(TorchDispatchMode):
    """Records (op, [(shape, stride) of each tensor argument], out's (shape, stride) or None)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in PRODUCTS:
            tensors = [(tuple(a.shape), tuple(a.stride())) for a in args if isinstance(a, torch.Tensor)]
            out = kwargs.get("out")
            spec = None if out is None else (tuple(out.shape), tuple(out.stride()))
            scalars = {k: v for k, v in kwargs.items() if k != "out"}
            self.calls.append((func, tensors, spec, scalars))
        return func(*args, **kwargs)


def fresh(shape: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """A tensor of this shape and stride with random values (a stride-0 operand stays expanded)."""
    t = torch.empty_strided(shape, stride, dtype=torch.float64)
    if t.numel():
        storage = t.as_strided((t.untyped_storage().nbytes() // 8,), (1,))
        storage.normal_()
    return t


def replay(calls: list[tuple], groups: dict | None = None) -> float:
    """Seconds of the recorded products run alone: each on fresh operands, the faster of two runs
    (``groups``, if given, collects [seconds, FLOPs] per operation and operand shapes)."""
    total = 0.0
    for func, tensors, out_spec, scalars in calls:
        args = [fresh(*t) for t in tensors]
        kw = dict(scalars)
        if out_spec is not None:
            kw["out"] = fresh(*out_spec)
        best = float("inf")
        for _ in range(2):
            t = time.perf_counter()
            func(*args, **kw)
            best = min(best, time.perf_counter() - t)
        total += best
        if groups is not None:
            name = func.overloadpacket.__name__
            key = f"{name} " + " x ".join(str(list(shape)) for shape, _ in tensors)
            entry = groups.setdefault(key, [0.0, 0.0])
            entry[0] += best
            entry[1] += product_flops(name, [shape for shape, _ in tensors])
    return total


def run(case: str, n: int, rounds: int, scale: int = 1) -> dict:
    from headgeom.geometry import effective_hessian
    from headgeom.geometry.engine.sandwich import block_costs

    head, loss, _, z = problem(case, scale, n)
    kw = cache_kw()
    eh = effective_hessian(head, loss, z, **kw)
    eh.blocks()  # warm: the analysis copy, its products and buffers
    recorder = ProductRecorder()
    with recorder:
        eh = effective_hessian(head, loss, z, **kw)
        eh.blocks()
    counted = block_costs(eh.structured_layers, z.shape[1], eh.k, True)["sandwich"] * n
    recorded = sum(product_flops(f.overloadpacket.__name__, [s for s, _ in t]) for f, t, _, _ in recorder.calls)
    engine, alone, rate = [], [], []
    load0 = os.getloadavg()[0]
    groups: dict[str, list[float]] = {}
    for i in range(rounds):
        t = time.perf_counter()
        effective_hessian(head, loss, z, **kw).blocks()
        engine.append(time.perf_counter() - t)
        alone.append(replay(recorder.calls, groups if i == rounds - 1 else None))
        rate.append(matmul_rate(1024, best=True) * 1e9)
    call, gemms, r = statistics.median(engine), statistics.median(alone), statistics.median(rate)
    return {"case": case, "n": n, "rounds": rounds, "threads": torch.get_num_threads(),
            "products": len(recorder.calls), "counted_gflop": counted / 1e9, "recorded_gflop": recorded / 1e9,
            "engine_s": engine, "products_alone_s": alone, "gemm_gflops": [x / 1e9 for x in rate],
            "engine_fraction": counted / call / r, "ceiling_fraction": counted / gemms / r,
            "products_share_of_call": gemms / call,
            "by_shape_last_round": {k: {"s": v[0], "gflops": v[1] / v[0] / 1e9, "fraction": v[1] / v[0] / r}
                                    for k, v in sorted(groups.items(), key=lambda kv: -kv[1][0])},
            "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--case", choices=CASES, default="simsiam")
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--scale", type=int, default=1, help="widths divided by this (1: the paper's)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args()
    if min(a.n, a.rounds, a.scale) < 1:
        p.error(f"need --n, --rounds and --scale >= 1; got {a.n}, {a.rounds}, {a.scale}")
    torch.set_num_threads(int(os.environ.get("HEADGEOM_BENCH_THREADS", "2")))
    res = run(a.case, a.n, a.rounds, a.scale)
    print(f"{a.case} N={a.n}, {res['threads']} threads, {res['products']} products, "
          f"{res['counted_gflop']:.1f} GFLOP counted ({res['recorded_gflop']:.1f} recorded), load {res['load']}")
    print(f"engine call {statistics.median(res['engine_s']):.3f} s, its products alone "
          f"{statistics.median(res['products_alone_s']):.3f} s ({res['products_share_of_call']:.2f} of the call), "
          f"GEMM rate {statistics.median(res['gemm_gflops']):.1f} GFLOP/s")
    print(f"fraction of the GEMM rate: engine {res['engine_fraction']:.3f}, ceiling {res['ceiling_fraction']:.3f}")
    for key, v in list(res["by_shape_last_round"].items())[:8]:
        print(f"  {v['s']:7.3f} s at {v['fraction']:.2f} of the rate  {key}")
    if a.json:
        write_json(a.json, res)


if __name__ == "__main__":
    main()

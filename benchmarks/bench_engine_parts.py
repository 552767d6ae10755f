"""Benchmark: what each of the engine's memory and batching choices saves, in one process.

    HEADGEOM_BENCH_THREADS=1 python benchmarks/bench_engine_parts.py [--n 128] [--scale 1] [--rounds 2] [--json PATH]

On the paper's SimSiam predictor ∘ projector (benchmarks/bench_blocks_ab.py's ``simsiam`` case,
widths divided by ``--scale``), float64, the declared negative cosine, N = ``--n``; each figure the
smallest over ``--rounds`` of the CPU time (``time.process_time``: on a shared machine the time this
process computed, not the time it waited for a core) and the wall time:

- ``call``: a warm ``effective_hessian(..., cache=cache).blocks()``, its work buffers kept in the
  analysis copy's Workspace; ``call, fresh buffers``: the same with every work buffer a fresh tensor
  (the Workspace's lease patched to give none), as before the Workspace;
- ``first term, chunks of 32`` / ``first term, all at once``: the first layer's weighted Gram
  A₁ᵀ diag(c_i) A₁ for the N samples in chunks of 32 (as the chunk loop formed it) or in one call;
- ``G + M into a fresh tensor``: the (N, d, d) sum ``blocks()`` formed before the merged output.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import torch

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.geometry.linalg import workspace as workspace_module
from headgeom.geometry.linalg.weighted_gram import weighted_gram

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from bench_blocks_ab import problem  # noqa: E402
from bench_fixed_cost import load, write_json  # noqa: E402


def _timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.process_time() - c, time.perf_counter() - t


@contextlib.contextmanager
def fresh_buffers():
    """Every Workspace lease gives no workspace: each work buffer a fresh tensor."""
    lease = workspace_module.Workspace.lease

    @contextlib.contextmanager
    def none(self):
        yield None

    workspace_module.Workspace.lease = none
    try:
        yield
    finally:
        workspace_module.Workspace.lease = lease


def run(n: int = 128, scale: int = 1, rounds: int = 2) -> dict:
    head, loss, _, z = problem("simsiam", scale, n)
    cache = HeadCache()

    def call() -> None:
        effective_hessian(head, loss, z, cache=cache).blocks()

    def call_fresh() -> None:
        with fresh_buffers():
            call()

    d, w = z.shape[1], 2048 // scale
    gen = torch.Generator().manual_seed(0)
    at = torch.randn(d, w, generator=gen, dtype=torch.float64)
    c = torch.randn(n, w, generator=gen, dtype=torch.float64)
    out = torch.empty(n, d, d, dtype=torch.float64)

    def chunks() -> None:
        for s0 in range(0, n, 32):
            weighted_gram(at, c[s0:s0 + 32], out=out[s0:s0 + 32])

    a, b = torch.randn(n, d, d, dtype=torch.float64), torch.randn(n, d, d, dtype=torch.float64)
    parts = {"call": call, "call, fresh buffers": call_fresh, "first term, chunks of 32": chunks,
             "first term, all at once": lambda: weighted_gram(at, c, out=out),
             "G + M into a fresh tensor": lambda: a + b}
    for fn in parts.values():
        fn()  # warm
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in parts}
    load_start = load()
    for _ in range(rounds):
        for label, fn in parts.items():
            times[label].append(_timed(fn))
    return {"N": n, "scale": scale, "rounds": rounds, "threads": torch.get_num_threads(),
            "load_start": load_start, "load_end": load(),
            "cpu_s": {label: round(min(t[0] for t in ts), 4) for label, ts in times.items()},
            "wall_s": {label: round(min(t[1] for t in ts), 4) for label, ts in times.items()}}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("HEADGEOM_BENCH_THREADS", "2")))
    out = run(args.n, args.scale, args.rounds)
    print(json.dumps(out, indent=2))
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()

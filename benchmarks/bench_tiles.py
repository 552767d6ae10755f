"""Benchmark: row-tile sizes of the symmetric products (headgeom.geometry.linalg.weighted_gram).

    python benchmarks/bench_tiles.py [--threads 2] [--rounds 6] [--json PATH]
    python benchmarks/bench_tiles.py --tiny --rounds 1        # toy shapes, seconds

Two kinds of product, each at the shapes the engine forms them:

- ``weighted_gram(Aᵀ, c)``: Aᵀ diag(c_i) A for a shared A (w, d): the first Linear's M term at the
  paper's SimSiam widths (w = 2048, d = 512; N = 8, 32, 256), the DINO ViT-S/16 head's (w = 2048,
  d = 384; N = 16), and the DINO loss's W_Lᵀ diag(p_i) W_L (w = 65,536, d = 256; N = 8);
- ``symmetric_bmm(X, P)``: X_i P_iᵀ known to be symmetric, against the full ``torch.bmm`` (the
  sandwich P K Pᵀ at d = m = 512, N = 32).

Each tile size is timed in every round, in an order that reverses every round so that load
changes weigh on all; reported per tile: the median seconds and the median of the per-round
ratios to the reference (tile 64 for weighted_gram, the full product for symmetric_bmm), with the
load average before and after. Results are checked against the reference tile's output.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from bench_fixed_cost import load, write_json  # noqa: E402
from headgeom.geometry.linalg.weighted_gram import symmetric_bmm, weighted_gram  # noqa: E402

GRAM_SHAPES = [(2048, 512, 8), (2048, 512, 32), (2048, 512, 256), (2048, 384, 16), (65536, 256, 8)]  # (w, d, N)
GRAM_TILES = (8, 16, 32, 64, 128)
SYM_SHAPES = [(512, 512, 32)]  # (d, m, N)
SYM_TILES = (32, 64, 128, 256)
TINY_GRAM, TINY_SYM = [(64, 16, 3)], [(16, 8, 3)]


def alternating(fns: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds of each callable per round (after one untimed call each), the order reversed every
    other round."""
    names = list(fns)
    for k in names:
        fns[k]()
    out: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            fns[k]()
            out[k].append(time.perf_counter() - t)
    return out


def summary(times: dict[str, list[float]], ref: str) -> dict[str, dict]:
    return {k: {"median_s": statistics.median(v),
                "ratio_to_" + ref: statistics.median(a / b for a, b in zip(v, times[ref])),
                "seconds": [round(x, 4) for x in v]} for k, v in times.items()}


def gram_case(w: int, d: int, n: int, tiles: tuple[int, ...], rounds: int) -> dict:
    g = torch.Generator().manual_seed(0)
    at = torch.randn(d, w, generator=g, dtype=torch.float64)
    c = torch.rand(n, w, generator=g, dtype=torch.float64)
    outs = {t: torch.empty(n, d, d, dtype=torch.float64) for t in tiles}
    ref = 64 if 64 in tiles else tiles[-1]
    times = alternating({f"tile {t}": (lambda t=t: weighted_gram(at, c, out=outs[t], tile=t)) for t in tiles}, rounds)
    err = max(float((outs[t] - outs[ref]).abs().max() / outs[ref].abs().max()) for t in tiles)
    return {"w": w, "d": d, "N": n, "max_rel_difference": err, "tiles": summary(times, f"tile {ref}")}


def sym_case(d: int, m: int, n: int, tiles: tuple[int, ...], rounds: int) -> dict:
    g = torch.Generator().manual_seed(1)
    p = torch.randn(n, d, m, generator=g, dtype=torch.float64)
    k = torch.randn(n, m, m, generator=g, dtype=torch.float64)
    x = p @ (k + k.transpose(1, 2))
    outs = {name: torch.empty(n, d, d, dtype=torch.float64) for name in ["full"] + [f"tile {t}" for t in tiles]}
    fns = {"full": lambda: torch.bmm(x, p.transpose(1, 2), out=outs["full"])}
    fns.update({f"tile {t}": (lambda t=t: symmetric_bmm(x, p, outs[f"tile {t}"], tile=t)) for t in tiles})
    times = alternating(fns, rounds)
    err = max(float((o - outs["full"]).abs().max() / outs["full"].abs().max()) for o in outs.values())
    return {"d": d, "m": m, "N": n, "max_rel_difference": err, "tiles": summary(times, "full")}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=int(os.environ.get("HEADGEOM_BENCH_THREADS", "2")))
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--tiny", action="store_true", help="toy shapes: a smoke run")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    loads = [load()]
    gram_shapes, sym_shapes = (TINY_GRAM, TINY_SYM) if args.tiny else (GRAM_SHAPES, SYM_SHAPES)
    result = {"threads": args.threads, "rounds": args.rounds, "weighted_gram": [], "symmetric_bmm": []}
    for w, d, n in gram_shapes:
        result["weighted_gram"].append(gram_case(w, d, n, GRAM_TILES, args.rounds))
        print(f"weighted_gram w={w} d={d} N={n}: " + ", ".join(
            f"{k} {v['ratio_to_tile 64']:.3f}" for k, v in result["weighted_gram"][-1]["tiles"].items()), flush=True)
    for d, m, n in sym_shapes:
        result["symmetric_bmm"].append(sym_case(d, m, n, SYM_TILES, args.rounds))
        print(f"symmetric_bmm d={d} m={m} N={n}: " + ", ".join(
            f"{k} {v['ratio_to_full']:.3f}" for k, v in result["symmetric_bmm"][-1]["tiles"].items()), flush=True)
    loads.append(load())
    result["load_average_start_end"] = loads
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()

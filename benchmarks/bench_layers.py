"""Benchmark: a head with each layer kind on the structured path against the warm naive loop.

    python benchmarks/bench_layers.py [--widths 64,256,128] [--n 32] [--rounds 3] [--reps 2] \
        [--kinds silu,layernorm,groupnorm,glu,rmsnorm] [--generic] [--json PATH]

Heads (float64, eval; widths d-h-k): Linear(d→h), <kind>, Linear(h→k) for ``silu`` (nn.SiLU),
``layernorm`` (nn.LayerNorm(h)), ``groupnorm`` (nn.GroupNorm(8, h)) and ``rmsnorm`` (nn.RMSNorm(h));
``glu`` is Linear(d→h), nn.GLU, Linear(h/2→k). Loss: the negative cosine to fixed targets,
declared (``analysis_loss``), N = ``--n``.

Per kind and round, in alternating order: the engine's warm call
(``effective_hessian(head, loss, z, cache=cache).blocks()``: one untimed call first, then the median
of ``--reps``) and the warm naive loop (a Python loop of ``torch.func.hessian`` of each sample's own
loss, one untimed sample first); the figure is the median over rounds of naive / engine, by wall and
by CPU time (``time.process_time``: what other jobs on the machine disturb least). With
``--generic`` the same head is also timed as a plain callable (the generic torch.func path a head
without layer rules takes). Reported: the path, ``discovered_by``, the seconds, the ratios, the largest
relative difference of the blocks from the naive loop's, and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.func import hessian

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.objectives import analysis_loss

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from bench_fixed_cost import load, write_json  # noqa: E402

KINDS = ("silu", "layernorm", "groupnorm", "glu", "rmsnorm")


def make_head(kind: str, d: int, h: int, k: int) -> nn.Module:
    """Linear(d→h), the kind's layer, Linear(→k), float64, eval, seeded."""
    torch.manual_seed(0)
    middle = {"silu": lambda: nn.SiLU(), "layernorm": lambda: nn.LayerNorm(h), "glu": lambda: nn.GLU(),
              "groupnorm": lambda: nn.GroupNorm(8, h), "rmsnorm": lambda: nn.RMSNorm(h)}[kind]()
    return nn.Sequential(nn.Linear(d, h), middle, nn.Linear(h // 2 if kind == "glu" else h, k)).double().eval()


def _timed(fn, reps: int) -> tuple[float, float, object]:
    """(median wall seconds, median CPU seconds, the last result) of ``reps`` calls."""
    out, times, cpu = None, [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), statistics.median(cpu), out


def run(widths: tuple[int, int, int] = (64, 256, 128), n: int = 32, rounds: int = 3, reps: int = 2,
        kinds: tuple[str, ...] = KINDS, generic: bool = False) -> dict:
    d, h, k = widths
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    target = torch.randn(n, k, generator=gen, dtype=torch.float64)
    loss = analysis_loss("negative_cosine", target)
    hessian(lambda x: x.pow(3).sum())(torch.ones(2, dtype=torch.float64))  # torch.func's own start-up (torch._dynamo)
    out: dict = {"widths": list(widths), "N": n, "rounds": rounds, "reps": reps, "threads": torch.get_num_threads(),
                 "load_start": load(), "kinds": {}}
    for kind in kinds:
        head = make_head(kind, d, h, k)
        cache = HeadCache()
        rows: dict[str, dict] = {"structured": {"call": lambda: effective_hessian(head, loss, z, cache=cache)}}
        if generic:
            rows["generic"] = {"call": lambda: effective_hessian(lambda x: head(x), loss, z)}

        def naive() -> torch.Tensor:
            return torch.stack([hessian(lambda zi, i=i: -nn.functional.cosine_similarity(
                head(zi[None])[0], target[i], dim=0) / n)(z[i]).detach() for i in range(n)])

        for row in rows.values():
            eh = row["call"]()
            eh.blocks()  # warm
            row.update(path=eh.block_path(), discovered_by=eh.info()["discovered_by"], seconds=[], ratios=[],
                       cpu_ratios=[])
        naive_times = []
        ref = None
        for r in range(rounds):
            order = list(rows) + ["naive"] if r % 2 == 0 else ["naive"] + list(rows)
            per_round = {}
            for label in order:
                if label == "naive":
                    if ref is None:
                        hessian(lambda zi: -nn.functional.cosine_similarity(head(zi[None])[0], target[0], dim=0))(z[0])
                    *per_round[label], ref = _timed(naive, 1)
                else:
                    *per_round[label], blocks = _timed(lambda: rows[label]["call"]().blocks(), reps)
                    rows[label]["blocks"] = blocks
            naive_times.append(per_round["naive"])
            for label, row in rows.items():
                row["seconds"].append(per_round[label][0])
                row["ratios"].append(per_round["naive"][0] / per_round[label][0])
                row["cpu_ratios"].append(per_round["naive"][1] / per_round[label][1])
        result = {"naive_s": statistics.median(t[0] for t in naive_times)}
        for label, row in rows.items():
            err = float((row["blocks"] - ref).abs().max() / ref.abs().max())
            result[label] = {"path": row["path"], "discovered_by": row["discovered_by"],
                             "call_s": statistics.median(row["seconds"]),
                             "naive_over_call": round(statistics.median(row["ratios"]), 2),
                             "naive_over_call_cpu": round(statistics.median(row["cpu_ratios"]), 2),
                             "per_round_ratio": [round(x, 2) for x in row["ratios"]], "max_rel_error_vs_naive": err}
        out["kinds"][kind] = result
    out["load_end"] = load()
    return out


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--widths", default="64,256,128", help="d,h,k")
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--generic", action="store_true", help="also time each head as a plain callable")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("HEADGEOM_BENCH_THREADS", "2")))
    kinds = tuple(args.kinds.split(","))
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        p.error(f"unknown kinds {unknown}; choose from {', '.join(KINDS)}")
    widths = tuple(int(w) for w in args.widths.split(","))
    out = run(widths, args.n, args.rounds, args.reps, kinds, args.generic)
    for kind, res in out["kinds"].items():
        for label in ("structured", "generic"):
            if label in res:
                r = res[label]
                print(f"{kind:10} {label:10} {r['path']:28} {r['call_s']:.4f} s  naive {res['naive_s']:.4f} s  "
                      f"naive/call {r['naive_over_call']:6.2f} (CPU time {r['naive_over_call_cpu']:6.2f})  "
                      f"err {r['max_rel_error_vs_naive']:.1e}")
    print(f"load {out['load_start']} -> {out['load_end']}")
    if args.json:
        write_json(args.json, out)
    else:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

"""Benchmark: what one effective_hessian(...).blocks() call costs at small N (the fixed cost).

    python benchmarks/bench_fixed_cost.py --before 79a1b42 [--scale 4] [--rounds 3] [--reps 5] [--json PATH]

A tracker calls the engine at every logged step on the same head with a few samples, so the
cost paid before the first block (probes, declaration checks, copying and casting the head,
structure discovery) dominates. Head = predictor ∘ projector of docs/paper.md §3 (projector
d→2048→2048, predictor 2048→512→2048, SiLU, no bias, eval mode) with every width divided by
``--scale`` (4 by default: 128→512→512, 512→128→512, for a loaded 2-core machine), held in
float32 as training holds it and analysed in float64; loss = negative cosine against fixed
targets declared through ``analysis_loss`` (the tracker's case), N = 1, 2, 8.

Rows, all timed in worker processes that alternate (before, after, before, after, ...) so that
load changes on the machine weigh on both alike; each figure is the median over rounds of the
median over ``--reps`` calls:
- ``after``: this tree, repeated calls on the same head (the cached analysis copy is reused);
- ``before``: the same script against ``git archive <--before> src`` (no cache);
- ``naive``: a Python loop of torch.func.hessian of each sample's own loss (float64 copy of the
  head made once), timed in the same workers;
- ``first_call_s``: the first call in a fresh process (imports torch._dynamo on the first
  torch.func.grad: a one-off per process, paid by the naive loop too).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
NS = (1, 2, 8)


def paper_head(scale: int):
    from torch import nn

    d, hidden, bottleneck = 512 // scale, 2048 // scale, 512 // scale
    projector = [nn.Linear(d, hidden, bias=False), nn.SiLU(), nn.Linear(hidden, hidden, bias=False)]
    predictor = [nn.Linear(hidden, bottleneck, bias=False), nn.SiLU(), nn.Linear(bottleneck, hidden, bias=False)]
    return nn.Sequential(*projector, *predictor).eval(), d, hidden


def cache_kw() -> dict:
    """``effective_hessian`` keywords for repeated calls on one head: ``cache=HeadCache()``, or nothing
    for a ``--before`` tree older than HeadCache (its module-level cache reused the head by itself)."""
    try:
        from headgeom.geometry import HeadCache
    except ImportError:
        return {}
    return {"cache": HeadCache()}


def worker(scale: int, reps: int) -> dict:
    """Time one tree (whatever headgeom PYTHONPATH points to) in this fresh process."""
    import torch
    from torch import nn
    from torch.func import hessian

    from headgeom.geometry import effective_hessian
    from headgeom.objectives import analysis_loss

    torch.manual_seed(0)
    head, d, k = paper_head(scale)  # float32, as a training run holds it
    head64 = copy.deepcopy(head).double()
    kw = cache_kw()  # the analysis copy reused across the calls, as a tracker reuses it
    out: dict = {"N": {}}
    for n in NS:
        g = torch.Generator().manual_seed(n)
        z = torch.randn(n, d, dtype=torch.float64, generator=g)
        target = torch.randn(n, k, dtype=torch.float64, generator=g)
        loss = analysis_loss("negative_cosine", target)

        def call():
            t0 = time.perf_counter()
            eh = effective_hessian(head, loss, z, **kw)
            t1 = time.perf_counter()
            blocks = eh.blocks()
            return t1 - t0, time.perf_counter() - t1, blocks

        if "first_call_s" not in out:
            c, b, _ = call()
            out["first_call_s"] = c + b
        call()  # warm: the cached copy (after) or nothing (before)
        timed = [call() for _ in range(reps)]
        blocks = timed[-1][2]

        def naive():
            res = []
            for i in range(n):
                f = lambda zi, i=i: -nn.functional.cosine_similarity(head64(zi[None])[0], target[i], dim=0) / n  # noqa: E731
                res.append(hessian(f)(z[i]).detach())
            return torch.stack(res)

        naive()
        naive_times, ref = [], None
        for _ in range(reps):
            t = time.perf_counter()
            ref = naive()
            naive_times.append(time.perf_counter() - t)
        out["N"][str(n)] = {
            "construct_s": statistics.median(t[0] for t in timed),
            "blocks_s": statistics.median(t[1] for t in timed),
            "call_s": statistics.median(t[0] + t[1] for t in timed),
            "naive_s": statistics.median(naive_times),
            "max_rel_error_vs_naive": float((blocks - ref).abs().max() / ref.abs().max()),
        }
    return out


def tree_of(rev: str, into: Path) -> Path:
    """src/ of revision ``rev`` extracted under ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], check=True, capture_output=True).stdout
    archive = into / "src.tar"
    archive.write_bytes(data)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def run_worker(script: str, src: Path, worker_args: list[str]) -> dict:
    """One fresh ``script --worker *worker_args`` process importing headgeom from ``src``; its last JSON line."""
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, script, "--worker", *worker_args], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def alternate(script: str, before: str | list[str], rounds: int, worker_args: list[str],
              between: Callable[[], None] = lambda: None) -> dict[str, list[dict]]:
    """Workers of revision ``before`` and of this tree, alternating (before, after, before, ...) for
    ``rounds`` rounds, so that load changes during the run weigh on both; ``between`` runs after each round.
    With a list of revisions, each is a tree of its own, keyed by the revision, in the order given."""
    revisions = [before] if isinstance(before, str) else list(before)
    labels = ["before"] if isinstance(before, str) else revisions
    runs: dict[str, list[dict]] = {label: [] for label in [*labels, "after"]}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {label: tree_of(rev, Path(tmp) / f"tree{i}") for i, (label, rev) in enumerate(zip(labels, revisions))}
        trees["after"] = REPO / "src"
        for _ in range(rounds):
            for label in runs:
                runs[label].append(run_worker(script, trees[label], worker_args))
            between()
    return runs


def write_json(path: str, result: dict) -> None:
    """``result`` written to ``path`` atomically (a temporary file, then a rename)."""
    tmp_path = Path(path).with_suffix(".tmp")
    tmp_path.write_text(json.dumps(result, indent=2))
    tmp_path.replace(path)


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default="79a1b42", help="revision timed as 'before' (default: before the cache)")
    p.add_argument("--scale", type=int, default=4, help="divide the paper's widths by this")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(int(os.environ.get("HEADGEOM_BENCH_THREADS", "2")))
        print(json.dumps(worker(args.scale, args.reps)))
        return

    loads = [load()]
    runs = alternate(__file__, args.before, args.rounds, ["--scale", str(args.scale), "--reps", str(args.reps)],
                     between=lambda: loads.append(load()))

    def med(label: str, n: int, key: str) -> float:
        return statistics.median(r["N"][str(n)][key] for r in runs[label])

    _, d, k = paper_head(args.scale)
    result = {
        "machine": f"{os.cpu_count()} CPUs, load average (1/5/15 min) during the run: {loads}",
        "head": f"SimSiam predictor∘projector / {args.scale}: {d}→{k}→{k}, {k}→{512 // args.scale}→{k}, SiLU, "
                "float32 head analysed in float64",
        "before": args.before, "rounds": args.rounds, "reps": args.reps,
        "first_call_s": {label: statistics.median(r["first_call_s"] for r in runs[label]) for label in runs},
        "N": {},
    }
    for n in NS:
        row = {label: {key: round(med(label, n, key), 5) for key in ("construct_s", "blocks_s", "call_s", "naive_s")}
               for label in runs}
        row["after_over_before"] = round(row["after"]["call_s"] / row["before"]["call_s"], 3)
        row["naive_over_after"] = round(row["after"]["naive_s"] / row["after"]["call_s"], 2)
        row["naive_over_before"] = round(row["before"]["naive_s"] / row["before"]["call_s"], 2)
        row["max_rel_error_vs_naive"] = max(r["N"][str(n)]["max_rel_error_vs_naive"] for r in runs["after"])
        result["N"][str(n)] = row
    print(json.dumps(result, indent=2))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()

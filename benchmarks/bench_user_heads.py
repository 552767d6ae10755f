"""Benchmark: heads written as users write them (own forward, the official DINO layout) against the
nn.Sequential / MLP heads the engine was tuned on, same run, warm, alternating order.

    python benchmarks/bench_user_heads.py [--scale 1] [--n 64] [--dino-n 16] [--rounds 3] [--pairs LIST] \
        [--generic] [--json PATH]

Pairs (each: one untimed call of both heads first, then ``--rounds`` rounds timing both, the order
alternating between rounds; the figure is the median over rounds of the per-round ratio):

- ``own-forward``: the paper's SimSiam predictor ∘ projector (docs/paper.md §3: 512→2048→2048,
  2048→512→2048, SiLU, no bias) written as a module with its own forward
  ``q2(silu(q1(p2(silu(p1(x))))))`` against the identical ``nn.Sequential`` (the same weights);
  negative cosine to fixed targets, N = ``--n``;
- ``two-layer``: ``fc2(F.silu(fc1(x)))`` at 256→1024→1024 against its nn.Sequential;
- ``dino-layout``: the official DINO head as facebookresearch/dino writes it (an nn.Module with a
  ``self.mlp`` Sequential, ``nn.functional.normalize(x, dim=-1, p=2)`` in forward, a
  ``torch.nn.utils.weight_norm`` last layer; ViT-S/16: 384→2048→2048→256, → 65,536) against an
  MLP head of equal widths (384→2048→2048→2048), DINO loss against a fixed teacher output,
  N = ``--dino-n``; headgeom's own DINO head (``head_from("…:dino=256")``) is timed in the same
  rounds for reference.

``--generic`` adds, per own-forward pair, one round of the same forward passed as a plain callable
(the generic jacobian path such heads took before discovery by tracing).

Every width is divided by ``--scale`` (a loaded machine: 2 or 4). float64, eval mode. Per pair the
run also reports the path each head took (``discovered_by``, ``block_path``) and the largest
difference between the own-forward head's blocks and the Sequential's (the same function).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from headgeom.geometry import HeadCache, effective_hessian
from headgeom.heads import head_from
from headgeom.objectives import analysis_loss

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the official-layout rewrites live with the loader tests
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmark scripts
from bench_fixed_cost import load, write_json  # noqa: E402
from official_models import DINOHead  # noqa: E402 - facebookresearch/dino's head, as that code writes it


class SimSiamOwnForward(nn.Module):
    """Projector and predictor of docs/paper.md §3 with their own forward."""

    def __init__(self, seq: nn.Sequential) -> None:
        super().__init__()
        self.p1, self.p2, self.q1, self.q2 = seq[0], seq[2], seq[3], seq[5]

    def forward(self, x):
        return self.q2(F.silu(self.q1(self.p2(F.silu(self.p1(x))))))


class TwoLayer(nn.Module):
    """fc2(silu(fc1(x)))."""

    def __init__(self, seq: nn.Sequential) -> None:
        super().__init__()
        self.fc1, self.fc2 = seq[0], seq[2]

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(x)))


def _call(head, loss, z, cache: HeadCache):
    t = time.perf_counter()
    eh = effective_hessian(head, loss, z, cache=cache)
    blocks = eh.blocks()
    return time.perf_counter() - t, eh, blocks


def compare(heads: dict[str, nn.Module], losses: dict[str, object], z: torch.Tensor, rounds: int) -> dict:
    """Warm, alternating timings of ``heads`` (the first is the subject, the second its baseline)."""
    names = list(heads)
    out = {"rows": {}, "per_round_ratio": []}
    blocks = {}
    cache = HeadCache()  # each head's analysis copy, chain and kept weight products, reused across rounds
    for name in names:  # warm: the analysis copy, discovery and kept weight products
        _, eh, blocks[name] = _call(heads[name], losses[name], z, cache)
        out["rows"][name] = {"discovered_by": eh.info()["discovered_by"], "block_path": eh.block_path(),
                             "seconds": []}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        took = {}
        for name in order:
            took[name], _, _ = _call(heads[name], losses[name], z, cache)
            out["rows"][name]["seconds"].append(round(took[name], 4))
        out["per_round_ratio"].append(round(took[names[0]] / took[names[1]], 3))
    out["ratio_median"] = statistics.median(out["per_round_ratio"])
    n = z.shape[0]
    for name in names:
        out["rows"][name]["per_sample_s"] = round(statistics.median(out["rows"][name]["seconds"]) / n, 5)
    out["blocks"] = blocks
    return out


PAIRS = ("own-forward", "two-layer", "dino-layout")


def run(scale: int = 1, n: int = 64, dino_n: int = 16, rounds: int = 3, generic: bool = False,
        pairs: tuple[str, ...] = PAIRS) -> dict:
    torch.manual_seed(0)
    dt = torch.float64
    s = lambda w: max(1, w // scale)  # noqa: E731
    result = {"machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
                         f"torch {torch.__version__}", "scale": scale, "load_average_start": load(), "pairs": {}}

    # own forward vs the identical nn.Sequential
    simsiam = nn.Sequential(nn.Linear(s(512), s(2048), bias=False), nn.SiLU(), nn.Linear(s(2048), s(2048), bias=False),
                            nn.Linear(s(2048), s(512), bias=False), nn.SiLU(),
                            nn.Linear(s(512), s(2048), bias=False)).to(dt).eval()
    two = nn.Sequential(nn.Linear(s(256), s(1024)), nn.SiLU(), nn.Linear(s(1024), s(1024))).to(dt).eval()
    for label, seq, own, rows in (("own-forward", simsiam, SimSiamOwnForward(simsiam), n),
                                  ("two-layer", two, TwoLayer(two), n)):
        if label not in pairs:
            continue
        z = torch.randn(rows, seq[0].in_features, dtype=dt)
        with torch.no_grad():
            target = seq(z + 0.1 * torch.randn_like(z))
        loss = analysis_loss("negative_cosine", target)
        res = compare({"own forward": own, "nn.Sequential": seq}, {"own forward": loss, "nn.Sequential": loss},
                      z, rounds)
        b = res.pop("blocks")
        res["max_abs_difference_of_blocks"] = float((b["own forward"] - b["nn.Sequential"]).abs().max())
        res["shapes"] = f"N = {rows}, " + " → ".join(str(m.in_features) for m in seq if isinstance(m, nn.Linear)) + \
            f" → {seq[-1].out_features}"
        if generic:  # the path this head took before tracing: the same forward as a plain callable
            before = compare({"generic path (before)": lambda x, own=own: own(x), "own forward": own},
                             {"generic path (before)": loss, "own forward": loss}, z, 1)
            before.pop("blocks")
            res["generic path (before) / own forward"] = before
        result["pairs"][label] = res

    result["load_average_end"] = load()
    if "dino-layout" not in pairs:
        return result
    # the official DINO layout vs an MLP head of equal widths (and headgeom's own DINO head)
    d, h, b, k = s(384), s(2048), s(256), s(65536)
    official = DINOHead(d, k, hidden_dim=h, bottleneck_dim=b).to(dt).eval()
    spec_dino = head_from(f"{d}-{h}-{h}-{k}:gelu:dino={b}", dtype=dt).eval()
    mlp = head_from(f"{d}-{h}-{h}-{s(2048)}:gelu", dtype=dt).eval()
    z = torch.randn(dino_n, d, dtype=dt)
    z2 = z + 0.1 * torch.randn_like(z)
    with torch.no_grad():
        losses = {"official DINO layout": analysis_loss("dino", official(z2)), "MLP": analysis_loss("dino", mlp(z2)),
                  "headgeom DINO head": analysis_loss("dino", spec_dino(z2))}
    res = compare({"official DINO layout": official, "MLP": mlp}, losses, z, rounds)
    res.pop("blocks")
    res["shapes"] = f"N = {dino_n}, {d} → {h} → {h} → {b} (L2) → {k}; MLP {d} → {h} → {h} → {s(2048)}"
    own = compare({"headgeom DINO head": spec_dino, "official DINO layout": official}, losses, z, rounds)
    own.pop("blocks")
    res["headgeom DINO head / official layout"] = own
    result["pairs"]["dino-layout"] = res
    result["load_average_end"] = load()
    return result


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=1, help="divide every width by this (default 1: the paper's)")
    p.add_argument("--n", type=int, default=64, help="samples of the own-forward pairs")
    p.add_argument("--dino-n", type=int, default=16, help="samples of the DINO pair")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--generic", action="store_true",
                   help="also time the own-forward heads on the generic path they took before tracing (one round)")
    p.add_argument("--pairs", default=",".join(PAIRS), help=f"comma-separated subset of {', '.join(PAIRS)}")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    pairs = tuple(x.strip() for x in args.pairs.split(",") if x.strip())
    if unknown := sorted(set(pairs) - set(PAIRS)):
        p.error(f"--pairs: unknown {unknown}; choose from {', '.join(PAIRS)}")
    result = run(args.scale, args.n, args.dino_n, args.rounds, args.generic, pairs)
    print(json.dumps(result, indent=2))
    if args.json:
        write_json(args.json, result)


if __name__ == "__main__":
    main()

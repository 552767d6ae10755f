"""C11 (depth ablation): do deeper heads compress augmentation orbits more and protect the backbone better?

Training (docs/paper.md §3, "SimCLR for guillotine/orbits", as C12): the paper's one-directional InfoNCE
with cross-view negatives only (``simclr_oneway``, temperature 0.1), Adam lr 1e-3, the ``paper_simclr``
recipe; the head is the paper's ReLU+BN projector with ``depth`` hidden layers,
[Linear(→hidden, no bias) → BN → ReLU] × depth → Linear(hidden→out, no bias) → BN, so depth 1 is the
paper's projector (depth counts hidden layers, as in C3). The paper's text does not say how it counted; the
authors' code (head_depth_ablations.py) trains SiLU+BN heads whose depth counts Linear layers, the listed
difference of the paper protocol (PAPER_PROTOCOL).
One cell per depth × seed; a seed fixes the initialisation and the data order, so depths are paired by seed.

Measured per cell (:mod:`headgeom.orbits.run_measures`): rotation orbits (0-330°, the paper's
protocol) of a fixed set of test images through the backbone and the head; the trace ratio
trace(z)/trace(h(z)) of the within-orbit covariance of L2-normalised features with a bootstrap CI
(dimension-fair; it equals the paper's spread compression, shown beside it), the per-dimension ratio
(docs/paper.md §4 pitfall 4) and the raw-feature trace ratio beside it, the class/orbit ratio
D_inter/D_intra at z and h(z) and its change; the same ratios for a freshly initialised head of the
same depth (control); heads fed raw z and the paper's z/‖z‖ (pitfall 5). Backbone (z) and head-output
class probes: weighted kNN and the linear probe on the test split.

The paper's "deeper heads compress more and protect the backbone better" is two claims, each its own rows,
rule and headline (headgeom.claims.depth_trend), judged by the single-run standard
(headgeom.claims.single_run): each seed is a run (one head per depth, the same orbit images), read by its
within-run interval over test images; a seed supports, refutes or is undecided, and >= ``majority`` of the
seeds decide.

- "Deeper heads compress more", per head input, decided by the learned selectivity x_d = selectivity of the
  depth-d head / the median selectivity of ``control_draws`` random heads of depth d's architecture on the
  same stored z (headgeom.orbits.random_heads; BatchNorm ``control_bn``): a head that learned nothing shows
  what the architecture alone does, and deeper random heads do not select like shallow ones. Selectivity =
  compression / global ratio (headgeom.orbits.selective) compares each orbit with the cloud it lives in,
  each space against itself; the paper's compression (= the trace ratio) stays beside it with its spread; it
  is not the decider because it also counts shrinkage of the whole cloud (a BN head trained on raw z and fed
  z/‖z‖ maps every input near one point) and, on raw z, reads the BN centring of h against the non-centred
  post-ReLU z as expansion (docs/paper.md §4 pitfall 5). Per seed, diff = log x(depth max) − log x(depth
  min) with a BCa interval over the images resampled jointly at every depth; the seed supports when the
  interval lies above 0, diff > log(``compression_margin``), the trained heads' increase exceeds the random
  heads' ``control_percentile`` quantile and (``monotone``) x_d increases with every step; it refutes when the
  interval lies below log(margin). The row of the paper's protocol (z/‖z‖ in) is flagged out of distribution
  with the mean pairwise cosine at h(z).
- "Deeper heads protect the backbone better", per class probe (kNN, linear): per seed, diff = backbone
  accuracy at depth max − at depth min with the interval of a difference of two accuracies on the test
  examples (headgeom.claims.single_run.gap_interval), margin ``accuracy_margin``, the same monotone
  condition; undecided when no depth's backbone accuracy exceeds chance (1 / classes) by ``learned_floor``:
  a backbone that has not learned the classes has nothing to protect.

Every row names its conventions (level, margin, control percentile and BN, monotone, majority, learned
floor) with the verdict over a stated range of each.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: whether compression and
probe accuracy grow with head depth could come out either way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from headgeom.claims.ood import ood_flag
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.launch.resources import Resources
from headgeom.claims.budget import budget_of_cells
from headgeom.claims.depth_trend import (ACCURACY_MARGIN, COMPRESSION_MARGIN, LEARNED_FLOOR, accuracy_judgement,
                                         compression_judgement, increase_measures)
from headgeom.claims.single_run import (CONTROL_BN, CONTROL_BNS, CONTROL_DRAWS, CONTROL_PERCENTILE, LEVELS, MAJORITY,
                                        NOT_SWEPT, STANDARD, gap_interval)
from headgeom.claims.paper_budgets import SIMCLR_PRETRAINING
from headgeom.claims.evidence import TEST
from headgeom.report.paper_protocol import SIMCLR as SIMCLR_PROTOCOL
from headgeom.report.paper_protocol import PaperProtocol
from headgeom.report.plots import c11_depth as plots
from headgeom.report.table import Table
from headgeom.orbits.random_heads import excess_increase
from headgeom.orbits.run_measures import measure_run
from headgeom.claims.training_verdicts import pm
from headgeom.runs.cell import seeded_cells
from headgeom.train import TrainConfig
from headgeom.train.cells import run_training
from headgeom.train.recipes import SIMCLR, on_cifar10, paper_scale, simclr_cell

STATEMENT = "Depth ablation: deeper heads compress more and protect the backbone better"
PAPER_COMPRESSION = {1: 49.1, 2: 57.2, 3: 78.5}  # docs/paper.md#c11, reported; never tuned toward
PAPER_BUDGET = SIMCLR_PRETRAINING
DECIDER = "selectivity"  # the measure the compression claim decides on (module docstring)
DECIDED_BY = ("decided by selectivity = compression / global ratio (orbits against the whole cloud, each space "
              "against itself), not by the paper's compression (the trace ratio, shown beside it with its spread): "
              "compression also counts shrinkage of the whole cloud (a BN head trained on raw z and fed z/|z| maps "
              "every input near one point) and, on raw z, reads BN centring of h against the non-centred post-ReLU z "
              "as expansion")


# the quick preset's training: the paper's SimCLR (T = 0.1, Adam 1e-3, constant schedule) on shapes; a cell adds
# its depth's head and its seed
TRAIN = replace(SIMCLR, batch_size=64, epochs=5, max_steps=100)


@dataclass(frozen=True)
class C11Config:
    """Every setting of C11 (module docstring); ``train``: the training recipe every depth shares (data,
    backbone, temperature, batch, steps, optimiser, device)."""

    preset: str = "quick"
    train: TrainConfig = TRAIN
    seeds: int = 2
    depths: tuple[int, ...] = (1, 2, 3)
    hidden: int = 256
    out_dim: int = 128
    knn_k: int = 200
    eval_train: int | None = 2048
    eval_test: int | None = 1024
    probe_max_iter: int = 1000
    head_inputs: tuple[str, ...] = ("raw", "l2")  # raw first: the judged one
    orbit_classes: int = 5
    orbit_per_class: int = 6
    orbit_steps: int = 12
    orbit_seed: int = 0
    n_boot: int = 1000
    level: float = 0.95  # of every run's interval (headgeom.claims.single_run)
    compression_margin: float = COMPRESSION_MARGIN  # ratio of learned selectivities (depth max / min) that counts
    accuracy_margin: float = ACCURACY_MARGIN  # accuracy difference (fraction) counted as an increase
    learned_floor: float = LEARNED_FLOOR  # backbone accuracy above chance needed before "protection" is judged
    monotone: bool = True  # must every step of depth increase (else only the deepest against the shallowest)
    majority: float = MAJORITY  # share of seeds that must agree
    control_draws: int = CONTROL_DRAWS  # random heads per depth (headgeom.orbits.random_heads)
    control_percentile: float = CONTROL_PERCENTILE  # the trained increase must exceed this quantile of theirs
    control_bn: str = CONTROL_BN  # the controls' BatchNorm statistics judged at ("stored" or "init"; both kept)
    num_threads: int | None = 1


def quick() -> C11Config:
    """shapes (2048 images, 32 px), ResNet-18 width 0.125, heads 64-256×depth-128 ReLU+BN for depth 1, 2, 3,
    batch 64, 100 Adam steps, probes on 2048/1024 images, orbits of 5 classes × 6 test images × 12
    rotations, 2 seeds (6 cells).

    Command: ``headgeom reproduce --only C11 --preset quick``. Runtime: 160 s of CPU for the 6 cells (one
    torch thread; about 3 min wall on the idle 2-core machine), measured as 10 min 14 s wall on the shared
    machine at load 8-12. Measures orbit compression (trace ratio), class/orbit change and backbone kNN /
    linear accuracy per depth. On shapes at this budget the backbone stays near chance (kNN about 0.12-0.14,
    chance 0.1), so the accuracy claims are inconclusive by the chance floor: quick checks the machinery.
    """
    return C11Config()


def small() -> C11Config:
    """CIFAR-10, ResNet-18 width 0.125, heads 64-512×depth-256 ReLU+BN, batch 256, 130 Adam steps (2/3 of an
    epoch), probes on 10,000 / 2,000 images, orbits of 5 classes × 6 test images × 12 rotations, 3 seeds
    (9 cells).

    Command: ``HEADGEOM_DATA=/path/to/cifar headgeom reproduce --only C11 --preset small``. Runtime: 26.8 min
    wall measured end to end (990 s CPU, one torch thread, 2 shared cores at load 4-8; peak RSS 1.1 GB);
    about 17-20 min on the idle machine. Backbone kNN about 0.35 (chance 0.1) at this budget.
    """
    train = on_cifar10(TRAIN, batch_size=256, epochs=1, max_steps=130)
    return C11Config(preset="small", train=train, seeds=3, hidden=512, out_dim=256, eval_train=10_000, eval_test=2_000)


def paper() -> C11Config:
    """The paper's SimCLR run per depth: CIFAR-10, ResNet-18 (d = 512), heads 512-2048×depth-2048 ReLU+BN,
    batch 256, Adam 1e-3, 50 epochs, temperature 0.1; the paper's orbits (5 classes × 3 test images × 12
    rotations); full kNN / linear probes (50,000 / 10,000); 3 seeds (9 runs), on the GPU.

    Command: ``headgeom reproduce --only C11 --preset paper``. Runtime: roughly 1.5-3 GPU-hours on one
    H200 (9 runs of 50 epochs; scaled from C12's estimate, not run). On 2 CPU cores: not feasible.
    """
    train = paper_scale(TRAIN, batch_size=256, epochs=50)
    return C11Config(preset="paper", train=train, seeds=3, hidden=2048, out_dim=2048, eval_train=None, eval_test=None,
                     orbit_per_class=3, num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# one GPU per run; expected 10-20 min per run with its orbits and probes (1.5-3 GPU-hours over 9 runs,
# scaled from C12, not measured)
RESOURCES = {"paper": Resources(gpus=1, cpus=8, mem_gb=32, time_min=120, expected_min=15)}


def cells(config: C11Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per seed × depth, seed-major (every depth of seed 0 first, so pairs finish early)."""
    if len(set(config.depths)) < 2 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                          for d in config.depths):
        raise ValueError(f"C11 depths must be at least two distinct ints >= 1; got {config.depths}")
    if not config.head_inputs or config.head_inputs[0] != "raw":
        raise ValueError(f"C11 head_inputs must start with 'raw' (the judged reading); got {config.head_inputs}")
    return seeded_cells("C11", [{"depth": d} for d in sorted(config.depths)], seeds, default=config.seeds,
                        seed_major=True)


def depth_head(depth: int, hidden: int, out: int) -> str:
    """The paper's ReLU+BN projector with ``depth`` hidden layers as a head string (input width
    filled in by the backbone): [Linear(→hidden, no bias) → BN → ReLU] × depth → Linear(hidden→out,
    no bias) → BN. Depth 1 is the paper's projector (docs/paper.md §3, SimCLR for guillotine/orbits);
    depth counts hidden layers, as in C3."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"head depth must be an int >= 1 (hidden layers before the last Linear), got {depth!r}")
    return "d-" + "-".join([str(hidden)] * depth + [str(out)]) + ":relu:nobias:bn:last=bn"


def train_config(config: C11Config, depth: int, seed: int) -> TrainConfig:
    """The headgeom.train.TrainConfig of one cell: ``config.train`` with the depth's head and the seed."""
    return simclr_cell(config.train, depth_head(depth, config.hidden, config.out_dim), seed)


def cell_train_config(config: C11Config, cell: dict[str, Any]) -> TrainConfig:
    """The headgeom.train.TrainConfig a cell trains (``Experiment.train_config``: the dry run reads it)."""
    return train_config(config, int(cell["depth"]), int(cell["seed"]))


def run_cell(config: C11Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Train one depth × seed, then probe the backbone and measure orbits through the head."""
    depth, seed = int(cell["depth"]), int(cell["seed"])
    done, _, res = run_training(train_config(config, depth, seed), (), after=lambda d: measure_run(d, config, seed))
    if done.get("diverged"):
        raise RuntimeError(f"C11 depth {depth} seed {seed}: training diverged, nothing to measure: "
                           f"{done['diverged']}")
    return {**res, "depth": depth, "seed": seed, "final_loss": done.get("final_loss"),
            "train_budget": done["train_budget"]}


# ---------------------------------------------------------------- summary
def _value(m: dict[str, Any], key: str) -> float:
    """A cell's number under ``key`` (the value of an estimate), NaN when absent."""
    v = m.get(key)
    v = v.get("value") if isinstance(v, dict) else v
    return float(v) if isinstance(v, (int, float)) else math.nan


def _by_depth(results: list[tuple[dict, dict]], key: str) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for cell, m in results:
        out.setdefault(int(cell["depth"]), {})[int(cell["seed"])] = _value(m, key)
    return out


def _base_setting(config: C11Config) -> dict[str, Any]:
    train = config.train
    return {"objective": f"simclr_oneway (InfoNCE, cross-view negatives, T = {train.method_options['temperature']:g})",
            "heads": {d: depth_head(d, config.hidden, config.out_dim) for d in sorted(config.depths)},
            "reading": "n/a (orbit statistics and probe accuracies)", "data": train.data,
            "backbone": f"resnet18 width {train.backbone_options['width']}",
            "steps": train.max_steps or f"{train.epochs} epochs",
            "preset": config.preset}


def _seeds(config: C11Config, results: list[tuple[dict, dict]]) -> dict[int, dict[int, dict]]:
    """seed -> depth -> cell metrics, for the seeds measured at every depth (the runs: depths paired by seed)."""
    by: dict[int, dict[int, dict]] = {}
    for cell, m in results:
        by.setdefault(int(cell["seed"]), {})[int(cell["depth"])] = m
    return {s: ds for s, ds in sorted(by.items()) if set(config.depths) <= set(ds)}


def _beside(results: list[tuple[dict, dict]], key: str, what: str) -> dict[str, Any]:
    """Measured entries of ``key`` per depth (mean ± std over seeds, with each cell's bootstrap CI)."""
    out = {}
    for d in sorted({int(c["depth"]) for c, _ in results}):
        cells_d = [m for c, m in results if int(c["depth"]) == d]
        out[f"{what}[depth {d}]"] = measured([_value(m, key) for m in cells_d],
                                             per_seed_ci=[(m.get(key) or {}).get("ci") for m in cells_d])
    return out


def compression_runs(config: C11Config, results: list[tuple[dict, dict]], v: str) -> list[dict[str, Any]]:
    """Per seed measured at every depth: {control BN: excess_increase(...)} for head input ``v`` (the
    depths' random-head controls share the orbit images and bootstrap rows)."""
    levels = tuple(sorted({*LEVELS, config.level}))
    runs = []
    for ds in _seeds(config, results).values():
        if not all(f"random_heads[{v}]" in m for m in ds.values()):
            raise KeyError(f"C11 cells lack the random-head control random_heads[{v}] (measured by an older "
                           "headgeom, before the single-run standard); rerun C11 into a fresh --out folder")
        first = next(iter(ds.values()))
        strata = torch.tensor(first["orbit_labels"])
        runs.append({bn: excess_increase({d: m[f"random_heads[{v}]"] for d, m in ds.items()}, first["orbit_n_boot"],
                                         strata, level=config.level, levels=levels, bn=bn)
                     for bn in CONTROL_BNS})
    return runs


def _compression_claim(config: C11Config, results: list[tuple[dict, dict]], v: str, orbit: str) -> Row:
    """"Deeper heads compress more" for head input ``v``, decided on learned selectivity (module docstring)."""
    lo_d, hi_d = min(config.depths), max(config.depths)
    runs = compression_runs(config, results, v)
    headline = f"learned_selectivity depth {hi_d} / depth {lo_d}"
    j = compression_judgement(runs, headline, level=config.level, margin=config.compression_margin,
                              percentile=config.control_percentile, control_bn=config.control_bn,
                              monotone=config.monotone, majority=config.majority)
    meas = increase_measures(runs, config.control_bn, lo_d, hi_d, config.level) if runs else {
        headline: measured(float("nan"), n=0, what="no seed measured at every depth")}
    meas.update(_beside(results, f"{DECIDER}[{v}]", DECIDER))
    meas.update(_beside(results, f"trace_ratio[{v}]", "compression"))
    criterion = (f"{DECIDED_BY}. Per seed (a run: one head per depth, the same orbit images), learned selectivity "
                 f"x_d = selectivity / the median selectivity of {config.control_draws} random heads of depth d's "
                 f"architecture on the same stored z (BatchNorm {config.control_bn!r}, headgeom.orbits.random_heads); "
                 f"diff = log x({hi_d}) - log x({lo_d}) with a {config.level:.0%} BCa interval over the images "
                 f"resampled jointly at every depth; a seed supports if the interval lies above 0, diff > "
                 f"log({config.compression_margin:g}), the trained heads' increase exceeds the random heads' "
                 f"{config.control_percentile:.0%} quantile" + (" and x_d increases with every step of depth"
                                                                if config.monotone else "")
                 + f"; refutes if the interval lies below log({config.compression_margin:g}); supported / not "
                 f"supported if >= {config.majority:.0%} of the seeds support / refute, else inconclusive. {NOT_SWEPT}. "
                 f"{STANDARD}")
    ood = ood_flag(measured([_value(m, "mean_pairwise_cosine_h[l2]") for _, m in results
                             if "mean_pairwise_cosine_h[l2]" in m])) if v == "l2" else None  # heads trained on raw z
    setting = {**_base_setting(config), "part": "deeper heads compress more", "head_input": v,
               "metric": "learned selectivity = selectivity (compression / global ratio of L2-normalised features, z "
                         "over h(z)) / random heads' median; beside it the selectivity and the paper's compression "
                         "(trace ratio)", "orbits": orbit}
    verdict = j["verdict"]
    return Row(id="C11", statement="Depth ablation: deeper heads compress augmentation orbits more", setting=setting,
               measured=meas, budget=budget_of_cells([m for _, m in results], PAPER_BUDGET), verdict=verdict.outcome,
               reason=verdict.reason, evidence=TEST, criterion=criterion, headline=headline,
               headline_text=COMPRESSION_TEXT.format(hi=hi_d, lo=lo_d), conventions=j["conventions"],
               robustness=j["robustness"], out_of_distribution=ood)


COMPRESSION_TEXT = ("how many times more the depth-{hi} head's selectivity (orbits shrunk relative to the whole cloud) "
                    "exceeds that of random heads of its own architecture than the depth-{lo} head's does: the part of "
                    "the increase with depth that training, not the architecture, produced; the trained selectivity "
                    "and the paper's compression per depth beside it")
ACCURACY_TEXT = ("backbone {probe} class accuracy with the depth-{hi} head minus with the depth-{lo} head (does a deeper "
                 "head leave a better backbone?)")


def _accuracy_claim(config: C11Config, results: list[tuple[dict, dict]], probe: str) -> Row:
    """"Deeper heads protect the backbone better" for the backbone's ``probe`` accuracy (module docstring)."""
    lo_d, hi_d = min(config.depths), max(config.depths)
    seeds = _seeds(config, results)
    runs = [{"acc": {d: _value(m, f"{probe}[z]") for d, m in ds.items()}, "n": ds[hi_d].get("n_test")}
            for ds in seeds.values()]
    chance = 1.0 / max(int(m.get("num_classes") or 1) for _, m in results) if results else 1.0
    headline = f"{probe}_accuracy_z depth {hi_d} - depth {lo_d}"
    j = accuracy_judgement(runs, headline, chance, level=config.level, margin=config.accuracy_margin,
                           learned_floor=config.learned_floor, monotone=config.monotone, majority=config.majority)
    cis = [gap_interval(r["acc"][hi_d], r["acc"][lo_d], r["n"], config.level) for r in runs]
    meas = {headline: measured([r["acc"][hi_d] - r["acc"][lo_d] for r in runs] or float("nan"),
                               per_seed_ci=[list(c) if c else None for c in cis], level=config.level,
                               **({} if runs else {"n": 0}))}
    meas.update({f"{probe}_accuracy_z[depth {d}]": measured([_value(m, f"{probe}[z]") for c, m in results
                                                             if int(c["depth"]) == d]) for d in sorted(config.depths)})
    meas["chance"] = chance
    protocol = (f"weighted cosine kNN, k = {config.knn_k}, T = 0.1" if probe == "knn"
                else "linear probe on standardised features (L-BFGS, wd 1e-4)")
    criterion = (f"per seed, diff = backbone {probe} accuracy at depth {hi_d} - at depth {lo_d} on the n test "
                 f"examples, with the {config.level:.0%} interval of headgeom.claims.single_run.gap_interval; a seed "
                 f"supports if the interval lies above 0 and diff > {config.accuracy_margin:g}"
                 + (" and the accuracy increases with every step of depth" if config.monotone else "")
                 + f", refutes if the interval lies below {config.accuracy_margin:g}; undecided whatever the numbers when "
                 f"no depth's accuracy exceeds chance ({chance:.3g}) + {config.learned_floor:g} (a backbone that "
                 f"learned nothing has nothing to protect); supported / not supported if >= {config.majority:.0%} of "
                 f"the seeds support / refute, else inconclusive. {STANDARD}")
    setting = {**_base_setting(config), "part": "deeper heads protect the backbone better", "probe": probe,
               "metric": f"backbone (z) class accuracy, test split, {protocol}"}
    verdict = j["verdict"]
    return Row(id="C11", statement="Depth ablation: deeper heads protect the backbone better", setting=setting,
               measured=meas, budget=budget_of_cells([m for _, m in results], PAPER_BUDGET), verdict=verdict.outcome,
               reason=verdict.reason, evidence=TEST, criterion=criterion, headline=headline,
               headline_text=ACCURACY_TEXT.format(probe="kNN" if probe == "knn" else probe, hi=hi_d, lo=lo_d),
               conventions=j["conventions"], robustness=j["robustness"])


def _claims(config: C11Config, results: list[tuple[dict, dict]]) -> list[Row]:
    orbit = (f"rotation 0-330° in {config.orbit_steps} steps, {config.orbit_classes} classes × "
             f"{config.orbit_per_class} test images")
    return ([_compression_claim(config, results, v, orbit) for v in config.head_inputs]
            + [_accuracy_claim(config, results, probe) for probe in ("knn", "linear")])


def _col(results: list[tuple[dict, dict]], key: str, fmt: str = ".3g") -> str:
    return pm([_value(m, key) for _, m in results], fmt)


def _depth_table(config: C11Config, results: list[tuple[dict, dict]]) -> Table:
    l2 = "l2" in config.head_inputs
    head = ["depth", "selectivity (raw z in)", "trace ratio (raw z in)", "fresh head (raw z in)", "trained / fresh"]
    head += ["selectivity (l2 z in, paper)", "trace ratio (l2 z in, paper)",
             "mean pairwise cosine h (l2 z in: out of distribution)"] if l2 else []
    head += ["class/orbit z", "class/orbit h(z)", "class/orbit change", "kNN z", "linear z", "kNN h(z)", "linear h(z)",
             "paper compression"]
    table = Table(head, title="C11: per depth (mean ± std (n seeds))")
    for d in sorted(config.depths):
        rs = [(c, m) for c, m in results if int(c["depth"]) == d]
        vs_fresh = [_value(m, "trace_ratio[raw]") / _value(m, "fresh_trace_ratio[raw]") for _, m in rs]
        row = [str(d), _col(rs, "selectivity[raw]"), _col(rs, "trace_ratio[raw]"), _col(rs, "fresh_trace_ratio[raw]"),
               pm(vs_fresh)]
        row += [_col(rs, "selectivity[l2]"), _col(rs, "trace_ratio[l2]"),
                _col(rs, "mean_pairwise_cosine_h[l2]")] if l2 else []
        row += [_col(rs, "class_orbit_ratio[z]"), _col(rs, "class_orbit_ratio[raw]"),
                _col(rs, "class_orbit_change[raw]"), _col(rs, "knn[z]", ".3f"), _col(rs, "linear[z]", ".3f"),
                _col(rs, "knn[h]", ".3f"), _col(rs, "linear[h]", ".3f"),
                f"{PAPER_COMPRESSION[d]:g}" if d in PAPER_COMPRESSION else "-"]
        table.add(*row)
    return table


def _ci(e: Any) -> str:
    if not isinstance(e, dict) or e.get("value") is None:
        return "-"
    lo, hi = e.get("ci") or (None, None)
    band = f" [{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None else ""
    return f"{e['value']:.3g}{band}"


def _controls_table(config: C11Config, results: list[tuple[dict, dict]]) -> Table:
    head = ["depth"] + [f"{what} ({v} z in)" for v in config.head_inputs
                        for what in ("trained", "fresh head", "random directions")]
    table = Table(head, title="C11: trace ratio z / h(z) of the trained head and its controls (mean ± std (n seeds))")
    for d in sorted(config.depths):
        rs = [(c, m) for c, m in results if int(c["depth"]) == d]
        row = [str(d)] + [_col(rs, f"{prefix}trace_ratio[{v}]") for v in config.head_inputs
                          for prefix in ("", "fresh_", "random_dir_")]
        table.add(*row)
    return table


def _random_heads_table(config: C11Config, results: list[tuple[dict, dict]]) -> Table:
    """Per depth and head input: trained selectivity, the random heads' median, the learned selectivity."""
    table = Table(("depth", "head input", "control BN", "trained selectivity", "random heads' median selectivity",
                   "learned selectivity (trained / median)"),
                  title=f"C11: random-head control per depth ({config.control_draws} heads; mean ± std (n seeds))")
    for d in sorted(config.depths):
        rs = [m for c, m in results if int(c["depth"]) == d]
        for v in config.head_inputs:
            ctrl = [m[f"random_heads[{v}]"] for m in rs if f"random_heads[{v}]" in m]
            for bn in CONTROL_BNS:
                table.add(str(d), v, bn, pm([c["trained_selectivity"] for c in ctrl]),
                          pm([c[bn]["median_selectivity"] for c in ctrl]),
                          pm([c["trained_selectivity"] / c[bn]["median_selectivity"] for c in ctrl]))
    return table


def _cell_table(results: list[tuple[dict, dict]]) -> Table:
    head = ["depth", "seed", "selectivity [CI]", "global ratio [CI]", "trace ratio [CI]", "spread compression",
            "centred compression [CI]", "per-dim ratio", "raw-feature trace ratio", "class/orbit change [CI]",
            "fresh head trace ratio [CI]", "final loss"]
    table = Table(head, title="C11: per cell (raw z into the head; bootstrap CIs over images)")
    for c, m in sorted(results, key=lambda r: (int(r[0]["depth"]), int(r[0]["seed"]))):
        row = [str(c["depth"]), str(c["seed"])] + [_ci(m.get(k)) for k in (
            "selectivity[raw]", "global_ratio[raw]", "trace_ratio[raw]", "compression[raw]", "compression_centred[raw]",
            "per_dim_ratio[raw]", "trace_ratio_raw[raw]", "class_orbit_change[raw]", "fresh_trace_ratio[raw]")]
        row += [f"{m['final_loss']:.4g}" if isinstance(m.get("final_loss"), (int, float)) else "-"]
        table.add(*row)
    return table


def summarize(config: C11Config, results: list[tuple[dict, dict]]) -> Summary:
    """Claims (compression per head input, backbone kNN and linear), the per-depth and per-cell tables,
    the figure (compression, backbone accuracy and class/orbit change against depth, seeds as dots)."""
    n = {d: sum(int(c["depth"]) == d for c, _ in results) for d in sorted(config.depths)}
    notes = [f"cells measured per depth: {n}. Depth counts hidden layers (depth 1 = the paper's projector).",
             "compression verdicts: " + DECIDED_BY + " (docs/paper.md §4 pitfall 5).",
             "trace ratio = trace of the within-orbit covariance of L2-normalised z over that of h(z); it equals the "
             "paper's spread compression (the factor K/(K-1) cancels); per-dim and raw-feature ratios are in the cell "
             "table (pitfall 4). CIs in the cell table: BCa bootstrap over orbit images, stratified by class.",
             "fresh head: the same architecture freshly initialised (eval-mode BN at its initial statistics) on the "
             "same z orbits; compression it shows comes from the architecture, not from training. Random "
             "directions: each z orbit replaced by isotropic displacements of the same size; a head that compresses "
             "augmentation orbits selectively compresses these much less (similar values: global, not selective).",
             f"the paper reported compression {PAPER_COMPRESSION} (depth 1/2/3) for its own runs; shown, never "
             "tuned toward."]
    if config.train.data == "shapes":
        notes.append("shapes is a synthetic offline stand-in for CIFAR-10; its verdicts check the machinery, the small "
                     "and paper presets (CIFAR-10) are the ones to read for the claim.")
    notes.append(f"random-head control: {config.control_draws} heads of each depth's architecture at PyTorch's default "
                 "initialisation on the same stored z; BatchNorm statistics estimated on the stored orbit points "
                 "('stored', judged) or at their initial values ('init', swept); headgeom.orbits.random_heads.")
    if "l2" in config.head_inputs:
        notes.append("out of distribution: the l2 rows (the paper's h(z/|z|)) read heads trained on raw z on inputs "
                     "at another scale (BN running statistics from raw z); mean pairwise cosine at h(z) per depth, "
                     "z/|z| in vs raw z in: " + "; ".join(
                         f"depth {d}: {_col([r for r in results if int(r[0]['depth']) == d], 'mean_pairwise_cosine_h[l2]')}"
                         f" vs {_col([r for r in results if int(r[0]['depth']) == d], 'mean_pairwise_cosine_h[raw]')}"
                         for d in sorted(config.depths)) + ".")
    claims = _claims(config, results)
    panels = plots.panels("l2" in config.head_inputs)
    by_key = {key: _by_depth(results, key) for _, keys, _ in panels for key, _ in keys}
    classes = {m["num_classes"] for _, m in results if m.get("num_classes")}
    return Summary(claims=claims,
                   tables=[_depth_table(config, results), _controls_table(config, results),
                           _random_heads_table(config, results), _cell_table(results)],
                   figures=[("depth", lambda: plots.depth(panels, by_key, config.depths, classes,
                                                          f"{config.preset}, {config.train.data}"))], notes=notes)


# depth 1/2/3 heads (our count: hidden layers)
# the authors' depth heads, as their head_depth_ablations.py builds them (docs/paper.md §3.8): SiLU + BN, depth =
# Linear layers (depth 1: one Linear and BN)
PAPER_PROTOCOL = PaperProtocol(
    {**SIMCLR_PROTOCOL, "head": ("d-2048:silu:nobias:bn:last=bn", "d-2048-2048:silu:nobias:bn:last=bn",
                                 "d-2048-2048-2048:silu:nobias:bn:last=bn"),
     "runs": 3, "orbit_classes": 5, "orbit_per_class": 3, "orbit_steps": 12},
    differences={"head": "headgeom's C11 trains the paper's ReLU+BN projector with depth hidden layers (depth 1 is the "
                         "C9/C12 projector), chosen before the authors' code was read; their head_depth_ablations.py "
                         "trains SiLU+BN heads whose depth counts Linear layers (depth 1: one Linear and BN, a linear "
                         "map in eval mode). The released depth ablation is judged against random heads of its own "
                         "architecture (RELEASED); headgeom's heads are unchanged so that its C11 rows stay "
                         "comparable across presets"})

EXPERIMENT = register(Experiment(
    id="C11",
    title="Depth ablation: orbit compression and backbone probes for heads of depth 1, 2, 3",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    resources=RESOURCES,
    train_config=cell_train_config,
    protocol=PAPER_PROTOCOL,
))

"""C11 (depth ablation): do deeper heads compress augmentation orbits more and protect the backbone better?

Training (docs/paper.md §3, "SimCLR for guillotine/orbits", as C12): the paper's one-directional InfoNCE
with cross-view negatives only (``simclr_oneway``, temperature 0.1), Adam lr 1e-3, the ``paper_simclr``
recipe; the head is the paper's ReLU+BN projector with ``depth`` hidden layers,
[Linear(→hidden, no bias) → BN → ReLU] × depth → Linear(hidden→out, no bias) → BN, so depth 1 is the
paper's projector (depth counts hidden layers, as in C3; the paper does not say how it counted).
One cell per depth × seed; a seed fixes the initialisation and the data order, so depths are paired by seed.

Measured per cell (:mod:`headgeom.orbits.run_measures`): rotation orbits (0-330°, the paper's
protocol) of a fixed set of test images through the backbone and the head; the trace ratio
trace(z)/trace(h(z)) of the within-orbit covariance of L2-normalised features with a bootstrap CI
(dimension-fair; it equals the paper's spread compression, shown beside it), the per-dimension ratio
(docs/paper.md §4 pitfall 4) and the raw-feature trace ratio beside it, the class/orbit ratio
D_inter/D_intra at z and h(z) and its change; the same ratios for a freshly initialised head of the
same depth (control); heads fed raw z and the paper's z/‖z‖ (pitfall 5). Backbone (z) and head-output
class probes: weighted kNN and the linear probe on the test split.

The compression claim ("deeper heads compress more") is decided by selectivity = compression / global
ratio (headgeom.orbits.selective): how much more the head shrinks orbits than the whole cloud they live
in, each space against itself. The paper's compression (= the trace ratio) stays beside it in the row
and tables with its spread; it is not the decider because it also counts shrinkage of the whole cloud
(a BN head trained on raw z and fed z/‖z‖ maps every input near one point) and, on raw z, reads the BN
centring of h against the non-centred post-ReLU z as expansion (docs/paper.md §4 pitfall 5). The row of
the paper's protocol (z/‖z‖ in) is flagged out of distribution with the mean pairwise cosine at h(z).

Claims, each "the quantity increases with depth" with one rule (:func:`headgeom.claims.depth_trend.increase_test`): per seed, the
difference g(depth max) − g(depth min) (g = log for the compression, identity for accuracies), a
Student-t CI over seeds at ``level``; supported if the CI's lower end is > 0, the mean difference
exceeds the margin and the depth means increase monotonically; not supported if the CI's upper end is
below the margin (an increase of at least the margin is excluded); inconclusive otherwise (the seed
spread covers the difference), or with fewer than two paired seeds. The accuracy claims are also
inconclusive when no depth's mean backbone accuracy exceeds chance (1 / classes) by ``learned_floor``:
a backbone that has not learned the classes has nothing to protect.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: whether compression and
probe accuracy grow with head depth could come out either way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from headgeom.claims.ood import ood_flag
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.launch.resources import Resources
from headgeom.claims.budget import budget_of_cells
from headgeom.claims.depth_trend import (ACCURACY_MARGIN, COMPRESSION_MARGIN, LEARNED_FLOOR, RULE, increase_test,
                                         learned_floor_check)
from headgeom.claims.paper_budgets import SIMCLR_PRETRAINING
from headgeom.claims.evidence import TEST
from headgeom.report.paper_protocol import SIMCLR as SIMCLR_PROTOCOL
from headgeom.report.paper_protocol import PaperProtocol
from headgeom.report.plots import c11_depth as plots
from headgeom.report.table import Table
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
    level: float = 0.95  # of the seed-level t interval
    compression_margin: float = COMPRESSION_MARGIN  # ratio of compressions (depth max / min) counted as an increase
    accuracy_margin: float = ACCURACY_MARGIN  # accuracy difference (fraction) counted as an increase
    learned_floor: float = LEARNED_FLOOR  # backbone accuracy above chance needed before "protection" is judged
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
    done, _, res = run_training(train_config(config, depth, seed), (), after=lambda d: measure_run(d, config))
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


def _claim(config: C11Config, results: list[tuple[dict, dict]], key: str, *, log: bool, margin: float,
           what: str, setting: dict[str, Any]) -> Row:
    by = _by_depth(results, key)
    for d in config.depths:
        by.setdefault(d, {})
    t = increase_test(by, log=log, margin=math.log(margin) if log else margin, level=config.level)
    extra = ""
    if not log:
        chance = 1.0 / max(int(m.get("num_classes") or 1) for _, m in results) if results else 1.0
        extra = learned_floor_check(t, by, chance, config.learned_floor)
    meas = {f"{what}[depth {d}]": measured(list(by[d].values())) for d in sorted(by)}
    lo_d, hi_d = min(config.depths), max(config.depths)
    if log and t.get("diffs"):  # the decided ratio in the units of the measure: value(depth max) / value(depth min)
        meas[f"{what} depth {hi_d} / depth {lo_d}"] = measured([math.exp(x) for x in t["diffs"]])
    meas["paired_difference"] = {"value": t.get("mean_diff"), "n": t["n"], "ci": t.get("ci"), "level": config.level,
                                 "scale": "log" if log else "fraction", "per_seed": t.get("diffs")}
    meas["spearman_depth_vs_value"] = {"value": t.get("spearman"), "n": t["n"] * len(t["depths"]),
                                       "what": "pooled over every (depth, seed) point"}
    meas["fraction_of_seeds_monotone"] = {"value": t.get("seeds_monotone"), "n": t["n"]}
    criterion = RULE.format(g="log" if log else "", dmax=max(config.depths), dmin=min(config.depths),
                            level=config.level, margin=(f"log({margin:g})" if log else f"{margin:g}"))
    criterion += f". Observed: {t['reason']}{extra}"
    train = config.train
    base = {"objective": f"simclr_oneway (InfoNCE, cross-view negatives, T = {train.method_options['temperature']:g})",
            "heads": {d: depth_head(d, config.hidden, config.out_dim) for d in sorted(config.depths)},
            "reading": "n/a (orbit statistics and probe accuracies)", "data": train.data,
            "backbone": f"resnet18 width {train.backbone_options['width']}",
            "steps": train.max_steps or f"{train.epochs} epochs",
            "preset": config.preset}
    return Row(id="C11", statement=STATEMENT, setting={**base, **setting}, measured=meas,
               budget=budget_of_cells([m for _, m in results], PAPER_BUDGET),
               verdict=t["verdict"], evidence=TEST, criterion=criterion,
               headline=f"{what} depth {hi_d} / depth {lo_d}" if log and t.get("diffs") else f"{what}[depth {hi_d}]")


def _beside(results: list[tuple[dict, dict]], key: str, what: str) -> dict[str, Any]:
    """Measured entries of ``key`` per depth (mean ± std over seeds, with each cell's bootstrap CI)."""
    out = {}
    for d in sorted({int(c["depth"]) for c, _ in results}):
        cells_d = [m for c, m in results if int(c["depth"]) == d]
        out[f"{what}[depth {d}]"] = measured([_value(m, key) for m in cells_d],
                                             per_seed_ci=[(m.get(key) or {}).get("ci") for m in cells_d])
    return out


def _compression_claim(config: C11Config, results: list[tuple[dict, dict]], v: str, orbit: str) -> Row:
    """"Deeper heads compress more" for head input ``v``, decided on selectivity (module docstring)."""
    claim = _claim(config, results, f"{DECIDER}[{v}]", log=True, margin=config.compression_margin, what=DECIDER,
                   setting={"part": "deeper heads compress more", "head_input": v,
                            "metric": "selectivity = compression / global ratio of L2-normalised features, z over "
                                      "h(z); beside it the paper's compression (trace ratio)", "orbits": orbit})
    ood = ood_flag(measured([_value(m, "mean_pairwise_cosine_h[l2]") for _, m in results
                             if "mean_pairwise_cosine_h[l2]" in m])) if v == "l2" else None  # heads trained on raw z
    return claim.replace(criterion=DECIDED_BY + ". " + claim.criterion, out_of_distribution=ood,
                         measured={**claim.measured, **_beside(results, f"trace_ratio[{v}]", "compression")})


def _claims(config: C11Config, results: list[tuple[dict, dict]]) -> list[Row]:
    orbit = (f"rotation 0-330° in {config.orbit_steps} steps, {config.orbit_classes} classes × "
             f"{config.orbit_per_class} test images")
    claims = [_compression_claim(config, results, v, orbit) for v in config.head_inputs]
    for probe in ("knn", "linear"):
        protocol = (f"weighted cosine kNN, k = {config.knn_k}, T = 0.1" if probe == "knn"
                    else "linear probe on standardised features (L-BFGS, wd 1e-4)")
        claims.append(_claim(config, results, f"{probe}[z]", log=False, margin=config.accuracy_margin,
                             what=f"{probe}_accuracy_z",
                             setting={"part": "deeper heads protect the backbone better", "probe": probe,
                                      "metric": f"backbone (z) class accuracy, test split, {protocol}"}))
    return claims


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
    n_seeds = len({int(c["seed"]) for c, _ in results})
    if n_seeds < 3:
        notes.append(f"with {n_seeds} seed(s) the t-interval is wide (t = 12.7 at n = 2) or undefined (n = 1); expect "
                     "inconclusive verdicts unless the effect is large and consistent.")
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
                   tables=[_depth_table(config, results), _controls_table(config, results), _cell_table(results)],
                   figures=[("depth", lambda: plots.depth(panels, by_key, config.depths, classes,
                                                          f"{config.preset}, {config.train.data}"))], notes=notes)


# depth 1/2/3 heads (our count: hidden layers)
PAPER_PROTOCOL = PaperProtocol(
    {**SIMCLR_PROTOCOL, "head": ("d-2048-2048:relu:nobias:bn:last=bn", "d-2048-2048-2048:relu:nobias:bn:last=bn",
                                 "d-2048-2048-2048-2048:relu:nobias:bn:last=bn"),
     "runs": 3, "orbit_classes": 5, "orbit_per_class": 3, "orbit_steps": 12})

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

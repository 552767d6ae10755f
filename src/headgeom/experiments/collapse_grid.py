"""The 14-run collapse grid of docs/paper.md §3.3: C5's empirical side (does a collapsed head escape?).

SimSiam loss −½[cos(p1, sg(z2)) + cos(p2, sg(z1))], bias-free projector d→hidden→out and predictor
out→pred_hidden→out with the run's activation and BN (hidden BN in both, output BN on the projector), SGD
momentum 0.9, no weight decay, crop (0.2, 1) + flip, no normalisation. Runs: linear (lr 0.05); silu ("swish")
and relu × {BN, no BN} × lr {0.05, 0.5, 0.005}; gelu (no BN, 0.05) = 14 runs × seeds.

How each run starts collapsed: the paper's pseudo-collapse (projector Linear weights ×0.1) where it collapses
the spread, i.e. the smooth heads without BN (SiLU, GELU); where it cannot (bias-free ReLU and linear heads are
positively homogeneous, BN heads scale invariant: :func:`headgeom.theory.pseudo_collapse.inert_on_spread`), the
induced collapse instead (``collapse_depth``, ``TrainConfig.collapse``, :mod:`headgeom.train.collapse`): a fixed
offset after the projector that puts the spread at step 0 at ``collapse_depth / sqrt(k)`` (or leaves a head
already below it where it is). ``collapse_depth=None`` gives every run the paper's ×0.1.

Tracked every ``track_every`` steps on the fixed probe batch (headgeom.tracking): spread (mean per-dimension std
of the L2-normalised projector outputs), covariance condition number of the representations (not of H_eff,
docs/paper.md §4 pitfall 7), head/backbone relative update ratio, and λ_min and ‖M‖/‖H‖ of H_eff (ambient
reading): exact per-sample blocks for heads without BN; BN heads in train mode couple samples, and the tracker
then reports its estimate on the whole coupled operator (``heff_source`` says which, ``M_ratio_norm`` which
norm). Per run: the spread series, k, the spread of the same head at normal init on the same probe batch
(context: what the collapse did), and the escape outcome of
:data:`headgeom.claims.training_verdicts.ESCAPE_DEFINITION`: one level for every head, ``collapse_fraction /
sqrt(k)``, read as the level reached and as growth by ``growth`` from the start; only runs collapsed at the
start enter the escape rows.

Each ×0.1 run without BN also measures whether its pseudo-collapse is visible to the geometry
(:mod:`headgeom.theory.pseudo_collapse`: the per-sample H_eff blocks at init with and without the ×α).

C5 (ReLU gap) predicts: without BN and at a small step size (the closest to gradient flow) a ReLU head (M = 0)
stays collapsed while a smooth head escapes; ReLU escapes only through BN or a large step size. The C5 rows judge
exactly these two statements (:mod:`headgeom.claims.collapse_escape`).

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: both rows judge the escape of trained
runs, which could come out either way; each names its conventions (collapse fraction, growth, majority) and
carries its verdict over a range of each.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from headgeom.claims.row import Row
from headgeom.report.paper_protocol import SIMSIAM as SIMSIAM_PROTOCOL
from headgeom.report.paper_protocol import PaperProtocol, paper_heads, paper_predictors
from headgeom.report.table import Table
from headgeom.experiments.registry import Experiment, Summary, register
from headgeom.launch.resources import Resources
from headgeom.claims.budget import budget_of_cells
from headgeom.claims.collapsed_states import collapsed_state_claim
from headgeom.claims.curvature_verdict import INERT_REL_TOL
from headgeom.claims.paper_budgets import COLLAPSE_GRID
from headgeom.claims.evidence import TEST
from headgeom.report.plots import collapse_grid as plots
from headgeom.claims.collapse_escape import COLLAPSE_FRACTION, GROWTH, MAJORITY, c5_parts, judge_escape, run_name
from headgeom.claims.training_verdicts import DEAD_DEFINITION, ESCAPE_DEFINITION, collapse_outcome, pm
from headgeom.eval.rankme import uniform_spread
from headgeom.runs.cell import check_known, seeded_cells
from headgeom.theory.pseudo_collapse import gap_at_init, inert_on_spread
from headgeom.train import TrainConfig, build_method_from_config
from headgeom.train.cells import run_training
from headgeom.train.recipes import SIMSIAM, on_cifar10, paper_head, paper_scale, simsiam_cell

STATEMENT = ("ReLU gap: ReLU heads have M = 0, so they escape collapse only through finite step size and "
             "BatchNorm, not under gradient flow (empirical side: the 14-run collapse grid)")
LRS = (0.05, 0.5, 0.005)
PAPER_BUDGET = COLLAPSE_GRID


def grid_runs(lrs: tuple[float, ...] = LRS) -> tuple[tuple[str, bool, float], ...]:
    """(activation, bn, lr) of the paper's 14 runs (lrs[0] is the linear and gelu rate)."""
    return ((("linear", False, lrs[0]),)
            + tuple((a, bn, lr) for a in ("silu", "relu") for bn in (True, False) for lr in lrs)
            + (("gelu", False, lrs[0]),))


# the quick preset's training: the paper's SimSiam, pseudo-collapsed ×0.1 (the runs where ×0.1 cannot collapse the
# spread take the induced collapse instead); a cell adds its head (activation, BN), its collapse, its lr (the run's,
# which replaces train.lr) and its seed
TRAIN = replace(SIMSIAM, pseudo_collapse=0.1, epochs=2, max_steps=60, batch_size=32, track_every=15, probe_size=32)
# the head activations a grid run may name
ACTIVATIONS = ("linear", "relu", "silu", "gelu", "softplus", "tanh")


@dataclass(frozen=True)
class GridConfig:
    """Every setting of the collapse grid (module docstring); ``train``: the training recipe every run
    shares (data, backbone, batch, steps, pseudo-collapse, tracking period, device; ``train.lr`` is
    replaced by each run's lr, the third entry of ``runs``)."""

    preset: str = "quick"
    train: TrainConfig = TRAIN
    runs: tuple[tuple[str, bool, float], ...] = grid_runs()
    seeds: int = 1
    hidden: int = 128
    out_dim: int = 128
    pred_hidden: int = 64
    block_samples: int | None = 4
    rel_floor: float = 1e-10
    collapse_depth: float | None = 0.02  # induced collapse where x0.1 is inert: spread at step 0 = this / sqrt(k)
    collapse_fraction: float = COLLAPSE_FRACTION  # collapse level = this / sqrt(k), k = out_dim
    growth: float = GROWTH  # escape as growth: final / initial spread >= this
    majority: float = MAJORITY
    negative_points: float = 0.5  # C4 at collapsed states: a seed is past its threshold at >= this fraction of them
    num_threads: int | None = 1  # torch threads inside a cell (None: as set; the paper preset)


def quick() -> GridConfig:
    """shapes (1024 images, 32 px), ResNet-18 width 0.125, heads 64-128-128 / 128-64-128, batch 32,
    60 SGD steps (cosine schedule over 2 epochs), tracking every 15 steps, 14 runs × 1 seed.

    Command: ``headgeom reproduce --only GRID --preset quick``. Runtime: 96 s measured (one torch thread,
    2 CPU cores shared with other jobs, load 4-6). 60 steps is far too short to judge escape: the quick
    preset checks the plumbing and the early geometry, its verdicts say little.
    """
    return GridConfig()


def small() -> GridConfig:
    """CIFAR-10, ResNet-18 width 0.125, heads 64-256-256 / 256-128-256, batch 128, one epoch (390 steps,
    cosine), tracking every 39 steps, 14 runs × 1 seed (raise with ``--seeds``).

    Command: ``HEADGEOM_DATA=/path/to/cifar headgeom reproduce --only GRID --preset small``. Runtime:
    about 45 min on 2 shared CPU cores with one torch thread (estimated from a measured small C8 cell: 150 steps of batch 128 with 11 tracking points took 71 s; not run end
    to end).
    """
    train = on_cifar10(TRAIN, batch_size=128, epochs=1, max_steps=None, track_every=39, probe_size=64)
    return GridConfig(preset="small", train=train, hidden=256, out_dim=256, pred_hidden=128, block_samples=4)


def paper() -> GridConfig:
    """The paper's grid: CIFAR-10, ResNet-18 (d = 512), projector 512-2048-2048, predictor
    2048-512-2048, batch 512, 50 epochs (97 steps each, tracked per epoch), seeds 0, 1, 2, on the GPU.

    Command: ``headgeom reproduce --only GRID --preset paper``. Runtime: roughly 3-5 GPU-hours on one
    H200 (42 runs of 50 epochs; a rough estimate from the training stack's 5 s/epoch goal, not run). On 2 CPU cores: not feasible.
    """
    train = paper_scale(TRAIN, batch_size=512, epochs=50, track_every=97, probe_size=256)
    return GridConfig(preset="paper", train=train, seeds=3, hidden=2048, out_dim=2048, pred_hidden=512, block_samples=8,
                      num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# one GPU per run; expected 4-7 min per run (3-5 GPU-hours over 42 runs, from the 5 s/epoch goal,
# not measured)
RESOURCES = {"paper": Resources(gpus=1, cpus=8, mem_gb=32, time_min=60, expected_min=6)}


def cells(config: GridConfig, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per (activation, bn, lr) × seed."""
    bad = [r for r in config.runs if len(r) != 3]
    if bad:
        raise ValueError(f"grid runs must be (activation, bn, lr) triples; got {bad}")
    check_known("grid runs' activations", [a for a, _, _ in config.runs], ACTIVATIONS)
    return seeded_cells("the collapse grid", [{"activation": a, "bn": bool(bn), "lr": float(lr)}
                                              for a, bn, lr in config.runs], seeds, default=config.seeds)


def induced(config: GridConfig, act: str, bn: bool) -> bool:
    """Whether the run starts from the induced collapse (its ×0.1 would be inert on the spread) rather than ×0.1."""
    return config.collapse_depth is not None and inert_on_spread(act, bn)


def collapse_of(config: GridConfig, act: str, bn: bool) -> str:
    """How the run starts collapsed, in words (the table's column and the rows' setting)."""
    if induced(config, act, bn):
        return f"offset to {config.collapse_depth:g}/sqrt(k)"
    alpha = config.train.pseudo_collapse
    return f"x{alpha:g} weights" if alpha is not None else "none (normal init)"


def train_config(config: GridConfig, act: str, bn: bool, lr: float, seed: int) -> TrainConfig:
    """``config.train`` with the run's head (activation, BN), collapse, lr and the seed."""
    train = replace(config.train, lr=lr)
    if induced(config, act, bn):
        train = replace(train, pseudo_collapse=None, collapse=config.collapse_depth)
    return simsiam_cell(train, act, seed, hidden=config.hidden, out_dim=config.out_dim,
                        pred_hidden=config.pred_hidden, bn=bn)


def cell_train_config(config: GridConfig, cell: dict[str, Any]) -> TrainConfig:
    """The headgeom.train.TrainConfig a cell trains (``Experiment.train_config``: the dry run reads it)."""
    return train_config(config, cell["activation"], bool(cell["bn"]), float(cell["lr"]), int(cell["seed"]))


def run_cell(config: GridConfig, cell: dict[str, Any]) -> dict[str, Any]:
    """Train one grid run; trajectories, escape and dead-head flags."""
    act, bn, lr, seed = cell["activation"], bool(cell["bn"]), float(cell["lr"]), int(cell["seed"])
    done, traj, _ = run_training(train_config(config, act, bn, lr, seed), ("ambient",),
                                 rel_floor=config.rel_floor, block_samples=config.block_samples)
    out: dict[str, Any] = {"steps": traj.steps, "final_loss": done.get("final_loss"),
                           "train_budget": done["train_budget"],
                           "loss": traj.logged("loss")}
    for key in ("spread_projector", "spread_z", "cov_condition_z", "cov_condition_projector", "rankme_projector",
                "view_gap_deg"):
        out[key] = traj.statistic(key)
    out["update_ratio"] = traj.update("update_ratio")
    out["lambda_min"], out["heff_source"] = traj.heff("ambient", "lambda_min")
    out["lambda_max"], _ = traj.heff("ambient", "lambda_max")
    out["floor"], _ = traj.heff("ambient", "floor")  # the engine's zero band, drawn in the λ figure
    out["operand_scale"], _ = traj.heff("ambient", "operand_scale")  # what the floor is relative to
    out["M_ratio"], out["M_ratio_norm"] = traj.m_ratio("ambient")
    out["lambda_min_G"], _ = traj.heff("ambient", "lambda_min_G")
    out["threshold_ratio"], _ = traj.heff("ambient", "threshold_ratio")
    tc = train_config(config, act, bn, lr, seed)
    out["collapse"] = collapse_of(config, act, bn)
    collapse_outcome(out, config, done, config.out_dim, out["lambda_min"], out["lambda_max"],
                     traj.logged("spread_reference")[0])
    if not bn and tc.pseudo_collapse is not None:
        gaps = gap_at_init(lambda: build_method_from_config(tc), tc.pseudo_collapse, config.block_samples or 8, seed,
                           ("ambient",))
        out["pseudo_collapse_gap"] = gaps
        out["inert_pseudo_collapse"] = bool(max(gaps.values()) <= INERT_REL_TOL)
    return out


# ---------------------------------------------------------------- summary
def _groups(results: list[tuple[dict, dict]]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for cell, m in results:
        groups.setdefault(run_name(cell["activation"], bool(cell["bn"]), float(cell["lr"])), []).append(m)
    return groups


def _claim(config: GridConfig, groups: dict, part: str, positive: list[str], negative: list[str]) -> Row:
    j = judge_escape(groups, positive, negative, collapse_fraction=config.collapse_fraction, growth=config.growth,
                     majority=config.majority)
    setting = {"objective": "simsiam (negative cosine, stop-gradient)", "part": part,
               "head": paper_head("{act}", config.hidden, config.out_dim) + " [:bn:last=bn]",
               "reading": "n/a (spread of normalised projector outputs)", "data": config.train.data,
               "init": {g: collapse_of(config, *_act_bn(g)) for g in positive + negative},
               "steps": config.train.max_steps or f"{config.train.epochs} epochs", "batch": config.train.batch_size}
    return Row(id="C5", statement=STATEMENT, setting=setting, measured=j.measured, verdict=j.verdict.outcome,
               headline=j.verdict.headline, headline_text=j.headline_text,
               budget=budget_of_cells([m for ms in groups.values() for m in ms], PAPER_BUDGET),
               evidence=TEST, criterion=j.criterion, reason=j.verdict.reason, conventions=j.conventions,
               robustness=j.robustness)


def _act_bn(name: str) -> tuple[str, bool]:
    """(activation, bn) of a run name "relu/bn/lr=0.05" (:func:`run_name`)."""
    act, bn, _ = name.split("/")
    return act, bn == "bn"


def _table(config: GridConfig, groups: dict[str, list[dict]]) -> Table:
    table = Table(("run", "collapse", "spread init ×√k", "init / normal init", "spread final ×√k", "final/init",
                   "collapsed at start", "reached level", f"grew ≥ {config.growth:g}×", "dead", "min λ_min (ambient)",
                   "max ‖M‖/‖H‖", "cov cond z (final)", "update ratio (final)", "loss"),
                  title=(f"Collapse grid per run (mean ± std (n seeds)); level = {config.collapse_fraction:g}/√k, "
                         f"k = {config.out_dim}"))
    root_k = 1.0 / uniform_spread(config.out_dim)
    for a, bn, lr in config.runs:
        name = run_name(a, bn, lr)
        ms = groups.get(name)
        if not ms:
            continue

        def last(m, key):
            vals = [v for v in m.get(key) or [] if v is not None]
            return vals[-1] if vals else None

        def count(key):
            return f"{sum(bool(m.get(key)) for m in ms)}/{len(ms)}"
        n_div = sum(bool(m.get("diverged")) for m in ms)
        table.add(
            name, collapse_of(config, a, bn), pm([m["spread_initial"] * root_k for m in ms]),
            pm([m["spread_initial"] / m["spread_reference"] for m in ms if m.get("spread_reference")]),
            pm([m["spread_final"] * root_k for m in ms if m["spread_final"] is not None]),
            pm([m["spread_ratio"] for m in ms]), count("collapsed_initially"),
            count("escaped") + (f" ({n_div} diverged)" if n_div else ""), count("grew"), count("dead_head"),
            pm([min((v for v in m["lambda_min"] if v is not None), default=None) for m in ms]),
            pm([max((v for v in m["M_ratio"] if v is not None), default=None) for m in ms]),
            pm([last(m, "cov_condition_z") for m in ms]), pm([last(m, "update_ratio") for m in ms]),
            pm([m["final_loss"] for m in ms], ".4f"))
    return table


def summarize(config: GridConfig, results: list[tuple[dict, dict]]) -> Summary:
    """Two C5 claims (gradient-flow proxy; ReLU's BN / large-step routes), the grid table, spread figure."""
    groups = _groups(results)
    claims = [_claim(config, groups, part, positive, negative)
              for part, positive, negative in c5_parts(config.runs)]
    # C4 at the collapsed states the grid's runs reach (ambient reading, the one the grid tracks)
    views = {g: [{**m, **{f"{k}[ambient]": m.get(k) for k in ("lambda_min", "floor", "lambda_min_G", "threshold_ratio")}}
                 for m in ms] for g, ms in groups.items()}
    smooth = {g: g.split("/")[0] not in ("relu", "linear") for g in groups}
    claims.append(collapsed_state_claim(config, views, "ambient", {
        "objective": "simsiam (negative cosine, stop-gradient)", "data": config.train.data,
        "head": paper_head("{act}", config.hidden, config.out_dim) + " [:bn:last=bn]",
        "steps": config.train.max_steps or f"{config.train.epochs} epochs"}, smooth, paper=COLLAPSE_GRID))
    figures = [("spread", lambda: plots.spread(groups, config.rel_floor))]
    notes = [f"{ESCAPE_DEFINITION}.", f"{DEAD_DEFINITION}.",
             "the ×0.1 init leaves the spread of L2-normalised outputs unchanged for positively homogeneous heads "
             "(bias-free linear and ReLU) and for BN heads (scale invariance): for them pseudo-collapse is a small "
             "output norm, not a small spread, so those runs start from the induced collapse instead (a fixed offset "
             f"after the projector, spread at step 0 = {config.collapse_depth}/sqrt(k) or the head's own where lower; "
             "docs/experiments.md, GRID); the 'init / normal init' column is each run's spread at step 0 over the same "
             "head's at normal init.",
             *_inert_notes(groups),
             "train-mode BatchNorm divides by batch statistics, a curved function of z: with BN, M != 0 even for "
             "ReLU heads (see the max |M|/|H| column), so the BN route of C5 is itself a curvature route."]
    return Summary(claims=claims, tables=[_table(config, groups)],
                   figures=figures, notes=notes)


def _inert_notes(groups: dict[str, list[dict]]) -> list[str]:
    notes = []
    for name, ms in groups.items():
        gaps = [m["pseudo_collapse_gap"]["ambient"] for m in ms if m.get("pseudo_collapse_gap")]
        if gaps:
            inert = sum(bool(m.get("inert_pseudo_collapse")) for m in ms)
            notes.append(f"{name}: relative change of the per-sample H_eff blocks at init from the x0.1 pseudo-collapse "
                         f"<= {max(gaps):.2e} over {len(gaps)} seeds; {inert}/{len(ms)} seeds geometrically inert "
                         f"(within {INERT_REL_TOL:g}).")
    return notes


PAPER_PROTOCOL = PaperProtocol(
    {**SIMSIAM_PROTOCOL,  # linear (0.05); swish, relu × {BN, no BN} × {0.05, 0.5, 0.005}; gelu (no BN, 0.05)
     "head": paper_heads(("linear", "silu", "relu", "gelu")) + paper_heads(("silu", "relu"), bn=True),
     "predictor": paper_predictors(("linear", "silu", "relu", "gelu")) + paper_predictors(("silu", "relu"), bn=True),
     "pseudo_collapse": 0.1, "epochs": 50, "batch_size": 512, "lr": (0.005, 0.05, 0.5), "runs": 14,
     "seeds": 3, "track_every": 97},  # tracked per epoch: 50,000 // 512 steps
    differences={"pseudo_collapse": "x0.1 only where it collapses the spread (SiLU, GELU without BN); the ReLU, linear "
                                    "and BN runs, where it cannot (homogeneity, scale invariance), start from the "
                                    "induced collapse (a fixed offset after the projector, spread at step 0 = "
                                    "collapse_depth/sqrt(k)) so that every run of the contrast starts collapsed"})

EXPERIMENT = register(Experiment(
    id="GRID",
    title="Collapse grid (docs/paper.md §3): escape from pseudo-collapse, C5's empirical side",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    resources=RESOURCES,
    train_config=cell_train_config,
    protocol=PAPER_PROTOCOL,
    cell_keys={"train.lr": "each run trains at its own lr, the third entry of its (activation, bn, lr) triple: "
                           "set runs instead, e.g. --set 'runs=[[\"relu\", false, 0.1]]'",
               "train.collapse": "each run where x0.1 is inert takes the induced collapse at collapse_depth: set "
                                 "collapse_depth instead (null: x0.1 for every run)"},
))

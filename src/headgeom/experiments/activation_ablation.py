"""Activation ablation: relu, gelu, silu, softplus, tanh and linear heads at an equal training budget.

Every run trains the same SimSiam model (same seed, data order, augmentations, optimiser and
number of steps; docs/paper.md §3 SimSiam settings: bias-free projector d→hidden→out and predictor
out→pred_hidden→out with the run's activation, no BN, SGD momentum 0.9, no weight decay, crop
(0.2, 1) + flip, no normalisation) from the default init (``pseudo_collapse`` None) or from the
pseudo-collapsed init when the config sets it; only the head activation changes.

Measured per run: the λ_min trajectory of the per-sample H_eff blocks (ambient and tangential
readings, relative floor, as in C8, with a curvature row per reading) and ‖M‖/‖H‖ (the Frobenius ratio, which
C8's ReLU/linear identity checks); the spread of the L2-normalised projector outputs (initial,
final); the weighted kNN accuracy (cosine, T = 0.1) of the frozen backbone output z and of every
head layer on the dataset's test split (headgeom.eval.evaluate_run on the cell's training run).

The claim (id C8, extended to six activations): smooth activations (gelu, silu, softplus, tanh)
show negative curvature during training, relu and linear do not — judged with C8's rule
(:mod:`headgeom.claims.curvature_verdict`): under the tangential reading the smooth half is a ``test`` (with its
conventions swept) and the relu/linear half an ``identity`` (M = 0, checked on the recorded ‖M‖_F/‖H‖_F); the
ambient contrast is a ``diagnostic`` (its outcome is fixed by the reading). ``train.collapse`` (the induced
collapse, :mod:`headgeom.train.collapse`) or ``train.pseudo_collapse`` start every run collapsed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from headgeom.report.paper_protocol import SIMSIAM as SIMSIAM_PROTOCOL
from headgeom.report.paper_protocol import PaperProtocol, paper_heads, paper_predictors
from headgeom.report.table import Table
from headgeom.experiments.registry import Experiment, Summary, register
from headgeom.launch.resources import Resources
from headgeom.claims.budget import PaperBudget
from headgeom.claims.curvature_verdict import curvature_claims
from headgeom.report.plots import activation_ablation as plots
from headgeom.claims.training_verdicts import (COLLAPSE_FRACTION, DEAD_DEFINITION, GROWTH, collapse_outcome,
                                               negative_fraction, pm)
from headgeom.runs.cell import check_known, seeded_cells
from headgeom.train import TrainConfig
from headgeom.train.cells import run_training
from headgeom.train.recipes import SIMSIAM, on_cifar10, paper_head, paper_scale, simsiam_cell

ACTIVATIONS = ("relu", "gelu", "silu", "softplus", "tanh", "linear")
STATEMENT = ("Activation ablation of Fig. 3 / Thm 4.1: at an equal budget, smooth heads (gelu, silu, softplus, tanh) "
             "show negative curvature of H_eff during training; relu and linear heads do not")
# the collapse grid's SimSiam run (its paper preset uses it)
PAPER_BUDGET = PaperBudget(epochs=50, batch=512, source="docs/paper.md §3, collapse grid: 50 epochs, batch 512")
# the quick preset's training: the paper's SimSiam from the default init (pseudo_collapse None; set
# train.pseudo_collapse to start every run pseudo-collapsed); a cell adds its activation's head and its seed
TRAIN = replace(SIMSIAM, epochs=4, max_steps=100, batch_size=32, track_every=10, probe_size=32)


@dataclass(frozen=True)
class AblationConfig:
    """Every setting of the activation ablation (module docstring); ``train``: the training recipe every
    run shares (equal budget: data, backbone, batch, steps, optimiser, init, tracking period, device)."""

    preset: str = "quick"
    train: TrainConfig = TRAIN
    activations: tuple[str, ...] = ACTIVATIONS
    readings: tuple[str, ...] = ("ambient", "tangential")
    seeds: int = 1
    hidden: int = 128
    out_dim: int = 128
    pred_hidden: int = 64
    block_samples: int | None = 8
    rel_floor: float = 1e-10
    negative_points: float = 0.5
    collapse_fraction: float = COLLAPSE_FRACTION  # collapse level = this / sqrt(k), k = out_dim (the table's flags)
    growth: float = GROWTH  # escape as growth: final / initial spread >= this (the table's flags)
    majority: float = 0.8
    knn_k: int = 200
    knn_temperature: float = 0.1
    eval_train: int | None = 1024
    eval_test: int | None = 512
    num_threads: int | None = 1  # torch threads inside a cell (None: as set; the paper preset)


def quick() -> AblationConfig:
    """shapes (1024 images, 32 px), ResNet-18 width 0.125, heads 64-128-128 / 128-64-128, batch 32,
    100 SGD steps (cosine schedule over 4 epochs), tracking every 10 steps, kNN (k = 200) on 1024/512 images, 6 runs × 1 seed.

    Command: ``headgeom reproduce --only ABLATION --preset quick``. Runtime: 74 s measured (one torch thread,
    2 CPU cores shared with other jobs, load 4-6). Measures λ_min trajectories (ambient, MSE),
    ‖M‖/‖H‖, spread, kNN accuracy of z and every head layer.
    """
    return AblationConfig()


def small() -> AblationConfig:
    """CIFAR-10, ResNet-18 width 0.125, heads 64-512-512 / 512-256-512, batch 128, one epoch (390 steps,
    cosine), tracking every 39 steps, kNN on 10,000 train / 2,000 test images, 6 runs × 2 seeds.

    Command: ``HEADGEOM_DATA=/path/to/cifar headgeom reproduce --only ABLATION --preset small``.
    Runtime: about 45 min on 2 shared CPU cores with one torch thread (estimated from a measured small C8 cell: 150 steps of batch 128 with 11 tracking points took 71 s; not
    run end to end).
    """
    train = on_cifar10(TRAIN, batch_size=128, epochs=1, max_steps=None, track_every=39, probe_size=64)
    return AblationConfig(preset="small", train=train, seeds=2, hidden=512, out_dim=512, pred_hidden=256,
                          block_samples=16, eval_train=10_000, eval_test=2_000)


def paper() -> AblationConfig:
    """The paper's SimSiam settings (docs/paper.md §3): CIFAR-10, ResNet-18, projector 512-2048-2048,
    predictor 2048-512-2048, no BN, batch 512, lr 0.05, 50 epochs, tracked per epoch, full kNN
    (50,000 / 10,000), 6 activations × 3 seeds, on the GPU.

    Command: ``headgeom reproduce --only ABLATION --preset paper``. Runtime: roughly 1.5-3 GPU-hours on
    one H200 (18 runs of 50 epochs plus kNN; a rough estimate from the training stack's 5 s/epoch goal, not run). On 2 CPU cores: not feasible.
    """
    train = paper_scale(TRAIN, batch_size=512, epochs=50, track_every=97, probe_size=256)
    return AblationConfig(preset="paper", train=train, seeds=3, hidden=2048, out_dim=2048, pred_hidden=512,
                          block_samples=32, eval_train=None, eval_test=None, num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# one GPU per run; expected 5-10 min per run (1.5-3 GPU-hours over 18 runs, from the 5 s/epoch goal,
# not measured)
RESOURCES = {"paper": Resources(gpus=1, cpus=8, mem_gb=32, time_min=90, expected_min=8)}


def cells(config: AblationConfig, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per activation × seed."""
    check_known("ablation activations", config.activations, ACTIVATIONS)
    return seeded_cells("the activation ablation", [{"activation": a} for a in config.activations], seeds,
                        default=config.seeds)


def train_config(config: AblationConfig, act: str, seed: int) -> TrainConfig:
    """``config.train`` with the activation's projector and predictor and the seed."""
    return simsiam_cell(config.train, act, seed, hidden=config.hidden, out_dim=config.out_dim,
                        pred_hidden=config.pred_hidden)


def cell_train_config(config: AblationConfig, cell: dict[str, Any]) -> TrainConfig:
    """The headgeom.train.TrainConfig a cell trains (``Experiment.train_config``: the dry run reads it)."""
    return train_config(config, cell["activation"], int(cell["seed"]))


def knn_of_run(config: AblationConfig):
    """``after(run_dir)`` for run_training: kNN accuracy at every feature point of the trained run."""
    from headgeom.eval import EvalConfig, evaluate_run

    ecfg = EvalConfig(k=(config.knn_k,), temperature=config.knn_temperature, linear=False, rotation=False,
                      stats=False, max_train=config.eval_train, max_test=config.eval_test)

    def after(run_dir) -> dict[str, Any]:
        res = evaluate_run(run_dir, config=ecfg, device=config.train.device)["trained"]
        k = str(config.knn_k)
        return {"knn": {p: r["knn_top1"][k] for p, r in res["points"].items()},
                "eval_n_train": res["n_train"], "eval_n_test": res["n_test"], "num_classes": res["num_classes"]}
    return after


def run_cell(config: AblationConfig, cell: dict[str, Any]) -> dict[str, Any]:
    """Train one activation; λ_min trajectories, spread, kNN per feature point."""
    act, seed = cell["activation"], int(cell["seed"])
    if act not in ACTIVATIONS:
        raise ValueError(f"ablation cell {cell}: activation must be one of {ACTIVATIONS}")
    done, traj, ev = run_training(train_config(config, act, seed), config.readings, rel_floor=config.rel_floor,
                                  block_samples=config.block_samples, after=knn_of_run(config))
    out: dict[str, Any] = {"activation": act, "steps": traj.steps,
                           "final_loss": done.get("final_loss"), "train_budget": done["train_budget"],
                           "spread_projector": traj.statistic("spread_projector"),
                           "spread_z": traj.statistic("spread_z")}
    first = None
    for r in config.readings:
        lmin, out[f"heff_source[{r}]"] = traj.heff(r, "lambda_min")
        lmax, _ = traj.heff(r, "lambda_max")
        floor, _ = traj.heff(r, "floor")
        out[f"lambda_min[{r}]"], out[f"lambda_max[{r}]"] = lmin, lmax
        out[f"floor[{r}]"] = floor  # the engine's zero band, drawn in the λ figure
        out[f"M_ratio[{r}]"], out[f"M_ratio_norm[{r}]"] = traj.m_ratio(r)
        out[f"M_ratio_fro[{r}]"], _ = traj.heff(r, "M_ratio_fro")  # what the ReLU/linear identity checks
        out[f"frac_points_negative[{r}]"] = negative_fraction(lmin, floor)
        defined = [v for v in lmin if v is not None]
        out[f"lambda_min_min[{r}]"] = min(defined) if defined else None
        first = first or (lmin, lmax)
    collapse_outcome(out, config, done, config.out_dim, *(first or ([], [])), traj.logged("spread_reference")[0])
    knn = ev.get("knn", {})  # empty when the run diverged
    points = list(knn)
    out.update(knn=knn, knn_z=knn.get("z"), knn_head=knn[points[-1]] if points else None,
               head_output_point=points[-1] if points else None,
               eval_n_train=ev.get("eval_n_train"), eval_n_test=ev.get("eval_n_test"),
               num_classes=ev.get("num_classes"))
    return out


# ---------------------------------------------------------------- summary
def _table(config: AblationConfig, groups: dict[str, list[dict]]) -> Table:
    cols = [f"frac λ_min<-floor [{r}]" for r in config.readings] + [f"min λ_min [{r}]" for r in config.readings]
    table = Table(["activation", *cols, "max ‖M‖/‖H‖", "spread init", "spread final", "kNN z", "kNN h(z)", "loss"],
                  title="Activation ablation (mean ± std (n seeds))")
    for a in config.activations:
        ms = groups.get(a)
        if not ms:
            continue
        r0 = config.readings[0]
        table.add(a, *[pm([m[f"frac_points_negative[{r}]"] for m in ms], ".2f") for r in config.readings],
                  *[pm([m[f"lambda_min_min[{r}]"] for m in ms]) for r in config.readings],
                  pm([max((v for v in m[f"M_ratio[{r0}]"] if v is not None), default=None) for m in ms]),
                  pm([m["spread_initial"] for m in ms]), pm([m["spread_final"] for m in ms]),
                  pm([m["knn_z"] for m in ms], ".3f"), pm([m["knn_head"] for m in ms], ".3f"),
                  pm([m["final_loss"] for m in ms], ".4f"))
    return table


def summarize(config: AblationConfig, results: list[tuple[dict, dict]]) -> Summary:
    """C8's curvature claim over the six activations (a row per reading, as in C8; the others
    reported beside it), the table, λ_min / spread / kNN figures."""
    train = config.train
    groups: dict[str, list[dict]] = {}
    for cell, m in results:
        groups.setdefault(cell["activation"], []).append(m)
    setting = {"objective": "simsiam (negative cosine, stop-gradient)", "part": "activation ablation",
               "head": paper_head("{act}", config.hidden, config.out_dim), "data": train.data,
               "init": ("default" if train.pseudo_collapse is None else f"pseudo-collapsed x{train.pseudo_collapse:g}")
               + ("" if train.collapse is None else f", induced collapse to {train.collapse:g}/sqrt(k)"),
               "steps": train.max_steps or f"{train.epochs} epochs", "reduction": "batch mean (blocks carry 1/N)"}
    claims = [row for r in config.readings for row in curvature_claims(
        config, groups, r, setting, {a: a for a in groups}, statement=STATEMENT, paper=PAPER_BUDGET)]
    figures = [("lambda_min", lambda: plots.lambda_min(groups, config.readings, config.rel_floor)),
               ("spread", lambda: plots.spread(groups)),
               ("knn", lambda: plots.knn(groups, config.activations, config.knn_k))]
    notes = [f"{DEAD_DEFINITION}.", f"equal budget: {train.max_steps or train.epochs} "
             f"{'steps' if train.max_steps else 'epochs'} at lr {train.lr:g}, batch {train.batch_size}, same seeds.",
             f"kNN: weighted, cosine, k = {config.knn_k}, T = {config.knn_temperature:g}, on the {train.data} test "
             "split; h(z) is the last head point (projector output)."]
    return Summary(claims=claims, tables=[_table(config, groups)],
                   figures=figures, notes=notes)


# not a paper experiment: the grid's SimSiam at lr 0.05 with the paper's activations, no BN
PAPER_PROTOCOL = PaperProtocol(
    {**SIMSIAM_PROTOCOL, "head": paper_heads(("linear", "relu", "silu", "gelu")),
     "predictor": paper_predictors(("linear", "relu", "silu", "gelu")), "pseudo_collapse": 0.1,
     "epochs": 50, "batch_size": 512, "lr": 0.05, "track_every": 97},
    differences={
        "head": "adds softplus and tanh heads: the ablation's question is smooth against non-smooth activations "
                "beyond the paper's three",
        "predictor": "follows the head's activation (see head)",
        "pseudo_collapse": "starts from the default init, as Fig. 3's normal run, so that every activation is "
                           "compared from the same uncollapsed start",
    })

EXPERIMENT = register(Experiment(
    id="ABLATION",
    title="Activation ablation at equal budget (λ_min trajectory, spread, kNN)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    resources=RESOURCES,
    train_config=cell_train_config,
    protocol=PAPER_PROTOCOL,
))

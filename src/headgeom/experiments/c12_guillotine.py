"""C12 (guillotine): does the backbone output z beat the head on downstream probes?

Training (docs/paper.md §3, "SimCLR for guillotine/orbits"): the paper's one-directional InfoNCE with
cross-view negatives only (``simclr_oneway``, temperature 0.1), Adam lr 1e-3, crop (0.08, 1), flip,
rotation 45°, colour jitter (0.4, 0.4, 0.4, 0.1) p = 0.8 (the ``paper_simclr`` recipe), ReLU+BN head
Linear(d→hidden, no bias) → BN → ReLU → Linear(hidden→out, no bias) → BN.

Probes (headgeom.eval.evaluate_run on the cell's training run) at z and at the output of every head
layer (the guillotine sweep; points z, head.0 … head.L−1): weighted kNN (cosine, k, T = 0.1) and the
linear probe for the classes, and the paper's 4-way rotation probe (linear; docs/paper.md §4 pitfall 9:
the paper's probes predicted rotations, class probes are reported too). With ``head_inputs``
containing "l2", the head points are also read with the paper's L2-normalised input (pitfall 5,
points ``l2z/head.i``; reported, not judged). Accuracies are fractions on the dataset's test split.

MLP probe (``mlp``, on by default): the class MLP probe of headgeom.eval.mlp_probe (one hidden ReLU layer
of ``mlp_hidden`` units, AdamW for ``mlp_epochs`` epochs, seeded) at every point beside the linear probe,
with the statistics the judged probes get (per seed: accuracy per point, gap acc(z) − acc(h(z)) with its
interval, gap to the best head layer; over seeds: their mean ± std and the seeds' outcomes).
It is context, not evidence: it gets no claim row and no verdict, because the claim is about the paper's
probes (linear read-outs, docs/paper.md §3) and the MLP probe is here so the report stands beside the
peers' figures, which put a nonlinear probe beside the linear one. What it adds: whether the information
the head loses for a linear read-out is still there for a nonlinear one.

Settings: one (dataset, backbone) by default (``data``, ResNet-18); ``settings`` lists several, e.g.
the paper's three rotation-probe runs, CIFAR-10/ResNet-18, CIFAR-10/ViT-Tiny and CIFAR-100/ResNet-18
(one cell per setting × seed; each setting judged on its own).

Claim per setting and probe type, under the single-run standard (headgeom.claims.single_run; the rule:
headgeom.claims.probe_gap): per seed, gap = acc(z) − acc(h(z)) (h(z) = the head output, the last point) with
the interval of a difference of two accuracies on the probe's n test examples at the largest standard
error any pairing of the two probes' outcomes allows (per-example outcomes are not kept); a seed supports
when the interval lies above 0 and gap > ``margin``, refutes when the interval lies below ``margin``, else is
undecided; undecided whatever the numbers when acc(z) does not exceed chance + the learned floor (a backbone
that learned nothing, the premise C11's accuracy claim has too). Supported / not supported when >=
``majority`` of the seeds support / refute; else inconclusive. The CI level, the margin, the learned floor
and the majority are the row's conventions, each swept. Whether z beats every head layer is reported beside
it.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: whether z beats the head
output on each probe could come out either way.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from headgeom.eval import EvalConfig, LinearProbeConfig, MLPProbeConfig, evaluate_run
from headgeom.claims.row import Row
from headgeom.report.paper_protocol import RESNET18, SIMCLR as SIMCLR_PROTOCOL, VIT_TINY, PaperProtocol
from headgeom.report.table import Table
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.launch.resources import Resources
from headgeom.claims.budget import budget_of_cells
from headgeom.claims.paper_budgets import SIMCLR_PRETRAINING
from headgeom.claims.depth_trend import LEARNED_FLOOR
from headgeom.claims.probe_gap import MARGIN, gap_judgement
from headgeom.claims.single_run import LEVEL, STANDARD, gap_interval
from headgeom.claims.estimates import format_estimate
from headgeom.claims.evidence import TEST
from headgeom.report.plots import c12_guillotine as plots
from headgeom.claims.training_verdicts import pm
from headgeom.runs.cell import seeded_cells
from headgeom.train import TrainConfig
from headgeom.train.cells import run_training
from headgeom.train.recipes import SIMCLR, on_cifar10, paper_head, paper_scale, simclr_cell

STATEMENT = "Guillotine: the backbone beats the head on downstream probes"
PROBES = ("knn", "linear", "rotation")  # judged: one claim row each
CONTEXT_PROBES = ("mlp",)  # reported beside them with the same statistics, no verdict (module docstring)
PAPER_BUDGET = SIMCLR_PRETRAINING

# the quick preset's training: the paper's SimCLR (T = 0.1, Adam 1e-3, constant schedule) on shapes; a cell adds
# its dataset and backbone (from settings), the ReLU+BN head and its seed
TRAIN = replace(SIMCLR, batch_size=64, epochs=5, max_steps=150)


@dataclass(frozen=True)
class C12Config:
    """Every setting of C12 (module docstring); ``train``: the training recipe every setting shares (data,
    ResNet-18 width, image size, temperature, batch, steps, optimiser, device)."""

    preset: str = "quick"
    train: TrainConfig = TRAIN
    seeds: int = 2
    hidden: int = 256
    out_dim: int = 128
    knn_k: int = 200
    head_inputs: tuple[str, ...] = ("raw", "l2")
    eval_train: int | None = 2048
    eval_test: int | None = 1024
    rotation_train: int | None = 512
    rotation_test: int | None = 256
    probe_max_iter: int = 1000  # L-BFGS iterations of each linear probe (headgeom.eval default)
    mlp: bool = True  # the class MLP probe beside the linear one (context, module docstring)
    mlp_hidden: int = 128  # its hidden units (headgeom.eval default 512)
    mlp_epochs: int = 20  # its AdamW epochs (headgeom.eval default 50)
    margin: float = MARGIN  # accuracy difference (fraction) below which z and h(z) count as tied (swept; the CI level
    # and the learned floor are the single-run standard's, headgeom.claims.single_run, swept too)
    majority: float = 0.8
    num_threads: int | None = 1  # torch threads inside a cell (None: as set; the paper preset)
    # (dataset, backbone) pairs, one cell each per seed; None: the one setting (train.data, "resnet18")
    settings: tuple[tuple[str, str], ...] | None = None
    vit_options: tuple[tuple[str, Any], ...] = ()  # vit_tiny builder options (default: the paper's ViT-Tiny)


def quick() -> C12Config:
    """shapes (2048 images, 32 px), ResNet-18 width 0.125, head 64-256-128 ReLU+BN, batch 64, 150 Adam
    steps (about 5 epochs), probes on 2048/1024 images (rotation 512/256 × 4), MLP probe 128 hidden units
    × 20 epochs, 2 seeds.

    Command: ``headgeom reproduce --only C12 --preset quick``. Runtime: 115 s measured without the MLP
    probe (one torch thread, 2 CPU cores shared with other jobs, load 4-6); the MLP probe adds 22 fits of
    2-3 s each at load 12 (measured on random features of the same shapes), so about 40-60 s more there.
    Measures kNN, linear, MLP and rotation probe accuracy at z and every head layer (raw and L2-normalised
    head input).
    """
    return C12Config()


def small() -> C12Config:
    """CIFAR-10, ResNet-18 width 0.125, head 64-512-256 ReLU+BN, batch 256, 5 epochs (975 Adam steps),
    probes on 10,000 / 2,000 images (rotation 2,000 / 1,000 × 4), MLP probe 256 hidden units × 30 epochs,
    2 seeds.

    Command: ``HEADGEOM_DATA=/path/to/cifar headgeom reproduce --only C12 --preset small``. Runtime:
    about 40 min on 2 shared CPU cores with one torch thread (estimated from a measured small C8 cell: 150 steps of batch 128 with 11 tracking points took 71 s; not run end
    to end; the MLP probe's 22 fits add a few minutes).
    """
    train = on_cifar10(TRAIN, batch_size=256, epochs=5, max_steps=None)
    return C12Config(preset="small", train=train, hidden=512, out_dim=256, eval_train=10_000, eval_test=2_000,
                     rotation_train=2_000, rotation_test=1_000, mlp_hidden=256, mlp_epochs=30)


def paper() -> C12Config:
    """The paper's three SimCLR runs of the rotation probe: CIFAR-10/ResNet-18 (d = 512), CIFAR-10/ViT-Tiny
    (192 wide, 3 layers) and CIFAR-100/ResNet-18; head d-2048-2048 ReLU+BN, batch 256, Adam 1e-3, 50 epochs,
    temperature 0.1; full kNN/linear/MLP probes (50,000 / 10,000; MLP 512 hidden units × 50 epochs, the
    headgeom.eval default), rotation probe on 10,000 train × 4 and the full test split × 4; 3 seeds
    (9 cells), on the GPU.

    Command: ``headgeom reproduce --only C12 --preset paper``. Runtime: roughly 1.5-3 GPU-hours on one
    H200 (9 runs of 50 epochs plus probes; a rough estimate from the training stack's 5 s/epoch goal, not
    run). On 2 CPU cores: not feasible.
    """
    train = paper_scale(TRAIN, batch_size=256, epochs=50)
    return C12Config(preset="paper", train=train, seeds=3, hidden=2048, out_dim=2048, eval_train=None, eval_test=None,
                     rotation_train=10_000, rotation_test=None, num_threads=None,
                     mlp_hidden=512, mlp_epochs=50,
                     settings=(("cifar10", "resnet18"), ("cifar10", "vit_tiny"), ("cifar100", "resnet18")))


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# one GPU per run; expected 10-20 min per run with its probes (1.5-3 GPU-hours over 9 runs, from the
# 5 s/epoch goal, not measured)
RESOURCES = {"paper": Resources(gpus=1, cpus=8, mem_gb=32, time_min=120, expected_min=15)}


BACKBONES = ("resnet18", "vit_tiny")


def cells(config: C12Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per seed, or per (dataset, backbone) setting × seed when ``settings`` is given."""
    if config.settings is None:
        return seeded_cells("C12", [{}], seeds, default=config.seeds)
    bad = [b for _, b in config.settings if b not in BACKBONES]
    if bad or not config.settings:
        raise ValueError(f"C12 settings must be (dataset, backbone) pairs with a backbone among {BACKBONES}; "
                         f"got {config.settings}")
    return seeded_cells("C12", [{"data": d, "backbone": b} for d, b in config.settings], seeds, default=config.seeds)


def setting_of(config: C12Config, cell: dict[str, Any]) -> tuple[str, str]:
    """(dataset, backbone) of a cell (a cell without them has the config's one setting)."""
    return cell.get("data", config.train.data), cell.get("backbone", "resnet18")


def train_config(config: C12Config, seed: int, data: str | None = None, backbone: str = "resnet18") -> TrainConfig:
    """``config.train`` with the cell's dataset and backbone (ViT-Tiny: ``vit_options``), the ReLU+BN head, the seed."""
    options = config.train.backbone_options if backbone == "resnet18" else dict(config.vit_options)
    return simclr_cell(config.train, paper_head("relu", config.hidden, config.out_dim, bn=True), seed,
                       backbone=backbone, backbone_options=options, data=data)


def cell_train_config(config: C12Config, cell: dict[str, Any]) -> TrainConfig:
    """The headgeom.train.TrainConfig a cell trains (``Experiment.train_config``: the dry run reads it)."""
    return train_config(config, int(cell["seed"]), *setting_of(config, cell))


def _probe(config: C12Config):
    ecfg = EvalConfig(k=(config.knn_k,), head_inputs=config.head_inputs, max_train=config.eval_train,
                      probe=LinearProbeConfig(max_iter=config.probe_max_iter), mlp=config.mlp,
                      mlp_probe=MLPProbeConfig(hidden=config.mlp_hidden, epochs=config.mlp_epochs),
                      max_test=config.eval_test, rotation_train=config.rotation_train,
                      rotation_test=config.rotation_test, stats=False)

    def after(run_dir) -> dict[str, Any]:
        return evaluate_run(run_dir, config=ecfg, device=config.train.device)["trained"]
    return after


def run_cell(config: C12Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Train one seed and probe every feature point; accuracies per probe and point."""
    done, _, res = run_training(cell_train_config(config, cell), (), after=_probe(config))
    if done.get("diverged"):
        raise RuntimeError(f"C12 {cell}: training diverged, nothing to probe: {done['diverged']}")
    k = str(config.knn_k)
    pts = res["points"]
    acc = {"knn": {p: r["knn_top1"][k] for p, r in pts.items()},
           "linear": {p: r["linear"]["test_top1"] for p, r in pts.items()},
           "rotation": {p: r["rotation_linear"]["test_top1"] for p, r in pts.items()}}
    if config.mlp:
        acc["mlp"] = {p: r["mlp"]["test_top1"] for p, r in pts.items()}
    raw = [p for p in pts if not p.startswith("l2z/")]
    head_points = [p for p in raw if p != "z"]
    out: dict[str, Any] = {"final_loss": done.get("final_loss"), "train_budget": done["train_budget"],
                           "points": list(pts), "head_points": head_points,
                           "head_output_point": head_points[-1], "accuracy": acc,
                           "linear_converged": {p: bool(r["linear"].get("converged", True)) for p, r in pts.items()},
                           "n_train": res["n_train"], "n_test": res["n_test"], "num_classes": res["num_classes"],
                           "rotation_n_train": res["protocol"]["rotation_n_train"],
                           "rotation_n_test": res["protocol"]["rotation_n_test"]}
    for probe in acc:
        a = acc[probe]
        out[f"gap[{probe}]"] = a["z"] - a[head_points[-1]]  # z minus the head output
        out[f"gap_best_layer[{probe}]"] = a["z"] - max(a[p] for p in head_points)
    return out


# ---------------------------------------------------------------- summary
def n_eval(m: dict[str, Any], probe: str) -> int:
    """The test examples a cell's ``probe`` was scored on (the rotation probe: 4 rotations of each image)."""
    return 4 * int(m["rotation_n_test"]) if probe == "rotation" else int(m["n_test"])


def chance(m: dict[str, Any], probe: str) -> float:
    """Chance accuracy of ``probe``: 1/4 for the 4-way rotation probe, 1 / classes for the class probes."""
    return 0.25 if probe == "rotation" else 1.0 / int(m["num_classes"])


def probe_runs(results: list[tuple[dict, dict]], probe: str) -> list[dict[str, Any]]:
    """Per seed (a run): {"z": acc(z), "h": acc(h(z)) at the head output, "n": test examples}."""
    return [{"z": m["accuracy"][probe]["z"], "h": m["accuracy"][probe][m["head_output_point"]], "n": n_eval(m, probe)}
            for _, m in results]


def gap_statistics(config: C12Config, results: list[tuple[dict, dict]], probe: str) -> tuple[dict, dict[str, Any]]:
    """The statistics of one probe over the seeds (a claim's ``measured``) and its judgement under the
    single-run standard (headgeom.claims.probe_gap.gap_judgement: verdict, conventions, robustness)."""
    runs = probe_runs(results, probe)
    j = gap_judgement(runs, chance(results[0][1], probe), level=LEVEL, margin=config.margin,
                      learned_floor=LEARNED_FLOOR, majority=config.majority)
    best = [m["accuracy"][probe]["z"] - max(m["accuracy"][probe][p] for p in m["head_points"]) for _, m in results]
    head_out = results[0][1]["head_output_point"]
    cis = [gap_interval(r["z"], r["h"], r["n"], LEVEL) for r in runs]
    best_ci = [gap_interval(r["z"], r["z"] - g, r["n"], LEVEL) for r, g in zip(runs, best)]
    meas = {"acc_z": measured([r["z"] for r in runs]),
            f"acc_head_output[{head_out}]": measured([r["h"] for r in runs]),
            "gap_z_minus_head_output": measured([r["z"] - r["h"] for r in runs], per_seed_ci=[list(c) for c in cis],
                                                level=LEVEL, test_examples=[r["n"] for r in runs]),
            "gap_z_minus_best_head_layer": measured(best, per_seed_ci=[list(c) for c in best_ci], level=LEVEL),
            "frac_seeds_z_beats_every_head_layer": measured([float(c[0] > 0) for c in best_ci],
                                                            what="seeds whose gap to the best head layer has its "
                                                                 "interval above 0"),
            "chance": chance(results[0][1], probe)}
    return meas, j


HEADLINE_TEXT = ("{probe} accuracy on the backbone output minus on the head output (does cutting the head off "
                 "leave a better representation?), per seed with its interval over the test examples")


def _claim(config: C12Config, results: list[tuple[dict, dict]], probe: str,
           setting: tuple[str, str] | None = None) -> Row:
    meas, j = gap_statistics(config, results, probe)
    verdict = j["verdict"]
    data, backbone = setting or (config.train.data, "resnet18")
    head_out = results[0][1]["head_output_point"]
    criterion = (f"per seed, gap = acc(z) - acc(h(z)) on the probe's n test examples (h(z) = {head_out}, raw z into "
                 f"the head), with the {LEVEL:.0%} interval of headgeom.claims.single_run.gap_interval (the largest "
                 f"standard error any pairing of the two probes' outcomes allows); a seed supports if the interval "
                 f"lies above 0 and gap > {config.margin:g}, refutes if the interval lies below {config.margin:g} (a "
                 f"gap of at least the margin is excluded), else undecided; undecided whatever the numbers when acc(z) "
                 f"does not exceed chance ({meas['chance']:.3g}) + {LEARNED_FLOOR:g} (a backbone that learned "
                 f"nothing); supported / not supported if >= {config.majority:.0%} of the {len(results)} seeds support "
                 f"/ refute, else inconclusive. {STANDARD}")
    train = config.train
    setting = {"objective": f"simclr_oneway (InfoNCE, cross-view negatives, T = {train.method_options['temperature']:g})",
               "head": paper_head("relu", config.hidden, config.out_dim, bn=True), "probe": probe,
               "reading": "n/a (probe accuracy)", "data": data,
               "backbone": f"resnet18 width {train.backbone_options['width']}" if backbone == "resnet18" else backbone,
               "steps": train.max_steps or f"{train.epochs} epochs",
               "protocol": {"knn": f"weighted cosine kNN, k = {config.knn_k}, T = 0.1",
                            "linear": "linear probe on standardised features (L-BFGS, wd 1e-4)",
                            "rotation": "4-way rotation prediction, linear probe (the paper's guillotine probe)"}[probe]}
    return Row(id="C12", statement=STATEMENT, setting=setting, measured=meas, verdict=verdict.outcome,
               reason=verdict.reason, budget=budget_of_cells([m for _, m in results], PAPER_BUDGET),
               evidence=TEST, criterion=criterion, headline="gap_z_minus_head_output",
               headline_text=HEADLINE_TEXT.format(probe={"knn": "kNN class", "linear": "linear class",
                                                         "rotation": "rotation"}[probe]),
               conventions=j["conventions"], robustness=j["robustness"])


HEADERS = {"knn": "kNN", "linear": "linear", "mlp": "MLP (context)", "rotation": "rotation"}


def probes_of(results: list[tuple[dict, dict]]) -> list[str]:
    """The judged probes and the context probes every cell measured (cells run without the MLP probe
    have no ``accuracy["mlp"]``), the MLP probe beside the linear one."""
    ctx = [p for p in CONTEXT_PROBES if all(p in m["accuracy"] for _, m in results)]
    return ["knn", "linear", *ctx, "rotation"]


def _table(results: list[tuple[dict, dict]], title: str) -> Table:
    points = results[0][1]["points"]
    probes = probes_of(results)
    table = Table(["point", *(HEADERS[p] for p in probes)], title=title)
    for p in points:
        table.add(p, *(pm([m["accuracy"][probe].get(p) for _, m in results], ".3f") for probe in probes))
    return table


def _context_table(config: C12Config, groups: dict[tuple[str, str], list[tuple[dict, dict]]]) -> Table:
    """Per setting, the MLP probe's statistics beside the linear probe's (those of a claim's ``measured``)."""
    table = Table(("setting", "probe", "acc(z)", "acc(h(z))", "gap z − h(z)", "gap z − best head layer",
                   "seeds supporting / refuting (single-run standard)"),
                  title="C12: MLP probe beside the linear probe (context, no verdict; mean ± std over seeds, "
                        "accuracies as fractions)")
    for (data, backbone), rs in groups.items():
        for probe in ("linear", *CONTEXT_PROBES):
            meas, j = gap_statistics(config, rs, probe)
            head = next(v for k, v in meas.items() if k.startswith("acc_head_output"))
            stats = [meas["acc_z"], head, meas["gap_z_minus_head_output"], meas["gap_z_minus_best_head_layer"]]
            table.add(f"{data}, {backbone}", HEADERS[probe], *(format_estimate(c, ".3f", ".3f") for c in stats),
                      j["verdict"].reason.split(";")[0] + f" (n = {len(rs)})")
    return table


def summarize(config: C12Config, results: list[tuple[dict, dict]]) -> Summary:
    """Per (dataset, backbone) setting: one claim per probe type, the accuracy table per point, the
    per-layer figure."""
    groups: dict[tuple[str, str], list[tuple[dict, dict]]] = {}
    for cell, m in results:
        groups.setdefault(setting_of(config, cell), []).append((cell, m))
    claims = [_claim(config, rs, probe, setting) for setting, rs in groups.items() for probe in PROBES]
    several = len(groups) > 1

    def label(setting: tuple[str, str]) -> str:
        return f" ({setting[0]}, {setting[1]})" if several else ""
    notes = ["points: z = backbone output; head.i = output of module i of the head's layer list (Linear, BN, "
             "ReLU, Linear, BN); l2z/head.i = the same with z/|z| fed to the head (docs/paper.md §4 pitfall 5), reported "
             "but not judged.",
             "the linear probes' convergence is recorded per point (linear_converged) in each cell's metrics."]
    if config.train.data == "shapes":
        notes.append("shapes draws every image's shape angle and shading direction uniformly, so its image distribution "
                     "is invariant under the 4 rotations: the rotation probe has nothing to find there (chance 0.25) "
                     "and its verdict says nothing; the small and paper presets (CIFAR-10) are the ones for it.")
    tables = [_table(rs, f"C12{label(st)}: test accuracy per feature point (mean ± std (n seeds))")
              for st, rs in groups.items()]
    if all(set(CONTEXT_PROBES) <= set(probes_of(rs)) for rs in groups.values()):
        notes.append("the MLP probe (one hidden ReLU layer, AdamW; headgeom.eval.mlp_probe) is context, not "
                     "evidence: it has no claim row; its statistics are those of the judged probes.")
        tables.append(_context_table(config, groups))
    figures = [("probes" + (f"_{st[0]}_{st[1]}" if several else ""),
                lambda rs=rs: plots.probes([m for _, m in rs], {p: HEADERS[p] if p in CONTEXT_PROBES else p
                                                                for p in probes_of(rs)}))
               for st, rs in groups.items()]
    return Summary(claims=claims, tables=tables, figures=figures, notes=notes)


# rotation probe backbone vs head: C10/R18, ViT, C100
PAPER_PROTOCOL = PaperProtocol({**SIMCLR_PROTOCOL, "dataset": ("cifar10", "cifar100"), "backbone": (RESNET18, VIT_TINY),
                                "runs": 3})

EXPERIMENT = register(Experiment(
    id="C12",
    title="Guillotine: probes on z and every head layer (class kNN, linear, rotation)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    resources=RESOURCES,
    train_config=cell_train_config,
    protocol=PAPER_PROTOCOL,
))

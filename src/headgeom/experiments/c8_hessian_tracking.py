"""C8 (Fig. 3): λ_min of H_eff tracked over SimSiam training for smooth, ReLU and linear heads.

Runs (docs/paper.md §3 "Hessian tracking", plus a linear head): ``normal-silu`` (default init),
``collapsed-silu``, ``collapsed-relu`` and ``collapsed-linear`` (pseudo-collapse: projector
Linear weights ×0.1 at init). SimSiam loss −½[cos(p1, sg(u2)) + cos(p2, sg(u1))], bias-free
projector d→hidden→out and predictor out→pred_hidden→out with the run's activation, no BN,
SGD with momentum, no weight decay, crop (0.2, 1) + flip (the paper's SimSiam recipe, no
normalisation).

Measured every ``track_every`` steps on the run's fixed probe batch (headgeom.tracking): the exact
per-sample H_eff = G + M blocks (float64 eigh) of the view-1 loss w.r.t. z1 for the first
``block_samples`` probe samples, batch-mean reduction, under each reading of ``readings``
(headgeom.geometry.engine.readings): "ambient", the paper's full Hessian of the batch loss, and
"tangential", its Riemannian Hessian on the sphere. Each reading has its own curvature row, with equal
prominence (:mod:`headgeom.claims.curvature_verdict`): under the ambient reading the cosine's own
curvature is indefinite whenever u is not parallel to its target (scale 1/‖u‖²), so a linear head can
show negative eigenvalues through G alone and the contrast can fail for that reason; under the
tangential reading a bias-free ReLU/linear head has M ≡ 0 and G ⪰ 0 wherever cos θ > 0, so that half is
an identity and only the smooth half is a test.
λ < −floor counts as negative, floor = rel_floor · max(max|λ|, S) at that point, S the scale of the terms
G is summed from (max_i ‖A_i‖₂‖J_i‖₂², :mod:`headgeom.geometry.engine.operand_scale`; docs/paper.md §4 pitfall
2): a collapsed head's Jacobian is almost radial, so the tangential projection cancels terms far
larger than the blocks it leaves, and the round-off of that cancellation (order eps · S) would pass a
floor relative to the blocks alone; with S it counts as zero. Also ‖M‖_F/‖H_eff‖_F, the spread of the
L2-normalised projector outputs, covariance condition number (of the representation, pitfall 7),
RankMe, the head/backbone update ratio and the head's and backbone's parameter-gradient norms
(headgeom.train.grad_norms: the gradient applied at each tracking step, the paper's gradient-norm figure).
A ReLU head whose H_eff is exactly 0 with a frozen
spread is reported as dead (pitfall 8), not as "no negative curvature".

Pseudo-collapse is measured, not assumed (:mod:`headgeom.theory.pseudo_collapse`): for each
pseudo-collapsed run, the relative gap between the per-sample H_eff blocks at init with and without
the ×α, on ``block_samples`` Gaussian z. For the bias-free ReLU and linear heads the cosine loss
cannot see the scaling (positive homogeneity), so the gap is round-off: such a run is *geometrically
inert*, a normal ReLU/linear head at init, and it is left out of the escape row (it was never
collapsed in geometry) and flagged in the table; its curvature still counts as a ReLU/linear run.

The paper's λ_min estimator beside the exact one (``power_iterations``, default 20): the authors'
float32 shifted power iteration (:mod:`headgeom.geometry.linalg.shifted_power`) on the same block-diagonal
H_eff at every tracking point. A point disagrees when the signs differ (one below −floor, the other
not) or |estimate − exact| > power_rel_tol · max|λ|; the count of such points is reported per run and
reading (not judged).

Collapse escape is calibrated (:data:`headgeom.claims.training_verdicts.ESCAPE_DEFINITION`): the collapse
level is ``collapse_fraction`` × the spread of the same head and backbone at normal init on the same probe
batch, measured at step 0; only seeds collapsed at step 0 enter the escape row, the same rule for every run.
C4 is judged at the collapsed states these runs reach (:mod:`headgeom.claims.collapsed_states`): at the
tracking points under the collapse level, is a smooth head past its own threshold?

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: the smooth half of each curvature
row, the ambient contrast, escape and the collapsed-state rows could come out either way; ``identity``: the
ReLU/linear half under the tangential reading (M ≡ 0, checked).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.launch.resources import Resources
from headgeom.claims.budget import budget_of_cells
from headgeom.claims.estimated_curvature import NEGATIVE_POINTS
from headgeom.claims.paper_budgets import HESSIAN_TRACKING
from headgeom.claims.collapse_escape import escape_row
from headgeom.claims.collapsed_states import collapsed_state_claim
from headgeom.claims.curvature_verdict import AMBIENT_WHY, INERT_REL_TOL, NON_SMOOTH, curvature_claims
from headgeom.claims.evidence import TEST
from headgeom.report.paper_protocol import RESNET18, PaperProtocol, paper_heads
from headgeom.report.plots import c8_hessian_tracking as plots
from headgeom.report.table import Table
from headgeom.claims.training_verdicts import DEAD_DEFINITION, ESCAPE_DEFINITION, collapse_outcome, negative_fraction, pm
from headgeom.runs.cell import check_known, seeded_cells
from headgeom.theory.pseudo_collapse import gap_at_init
from headgeom.train import TrainConfig, build_method_from_config
from headgeom.train.cells import run_training
from headgeom.train.recipes import SIMSIAM, on_cifar10, paper_head, paper_predictor, paper_scale, simsiam_cell

STATEMENT = ("Fig. 3: during training smooth heads show negative curvature and escape pseudo-collapse; "
             "ReLU and linear heads do not")
# run name -> (activation, pseudo-collapse alpha or None)
RUNS: dict[str, tuple[str, float | None]] = {
    "normal-silu": ("silu", None), "collapsed-silu": ("silu", 0.1),
    "collapsed-relu": ("relu", 0.1), "collapsed-linear": ("linear", 0.1),
}
READINGS = ("ambient", "tangential")
PAPER_BUDGET = HESSIAN_TRACKING
# the quick preset's training: the paper's SimSiam at a constant lr 0.05 (every run's recipe; a cell adds
# its head, pseudo-collapse and seed)
TRAIN = replace(SIMSIAM, schedule="constant", epochs=4, max_steps=100, batch_size=32, track_every=10, probe_size=32)


@dataclass(frozen=True)
class C8Config:
    """Every setting of C8 (module docstring); ``train``: the training recipe every run shares (data,
    backbone, batch, steps, optimiser, tracking period, device; a cell adds its head, pseudo-collapse, seed)."""

    preset: str = "quick"
    train: TrainConfig = TRAIN
    runs: tuple[str, ...] = tuple(RUNS)
    readings: tuple[str, ...] = READINGS
    seeds: int = 2
    hidden: int = 128  # projector hidden width (paper 2048)
    out_dim: int = 128  # projector output width (paper 2048)
    pred_hidden: int = 64  # predictor hidden width (paper 512)
    block_samples: int | None = 8
    rel_floor: float = 1e-10
    negative_points: float = NEGATIVE_POINTS  # a run "shows negative curvature" when >= this fraction of points has λ_min < -floor
    collapse_fraction: float = 0.5  # collapse level = this x the spread of the same head at normal init
    majority: float = 0.8
    power_iterations: int | None = 20  # the paper's λ_min estimator beside the exact one (None: not run)
    power_rel_tol: float = 1e-3  # |estimate − exact| > this · max|λ| counts as a disagreement
    num_threads: int | None = 1  # torch threads inside a cell (None: as set; the paper preset)


def quick() -> C8Config:
    """shapes (1024 images, 32 px), ResNet-18 width 0.125, heads 64-128-128 / 128-32-128, batch 32,
    100 SGD steps at constant lr 0.05, tracking every 10 steps (11 points), 4 runs × 2 seeds.

    Command: ``headgeom reproduce --only C8 --preset quick``. Runtime: 86 s measured (one torch thread,
    2 CPU cores shared with other jobs, load 4-6). Measures λ_min/λ_max/n_negative of the
    per-sample H_eff blocks (8 probe samples, ambient and tangential readings), ‖M‖/‖H‖, spread, escape,
    the paper's power-iteration λ_min beside the exact one, and whether each pseudo-collapse is inert.
    """
    return C8Config()


def small() -> C8Config:
    """CIFAR-10 (full train split), ResNet-18 width 0.125, heads 64-512-512 / 512-256-512, batch 128,
    one epoch (390 steps, constant lr 0.05), tracking every 39 steps (11 points), 4 runs × 3 seeds.

    Command: ``HEADGEOM_DATA=/path/to/cifar headgeom reproduce --only C8 --preset small``.
    Runtime: 27.5 min measured end to end (one torch thread, 2 CPU cores shared with other jobs, load
    4-6). Measures the same quantities as quick.
    """
    train = on_cifar10(TRAIN, batch_size=128, epochs=1, max_steps=None, track_every=39, probe_size=64)
    return C8Config(preset="small", train=train, seeds=3, hidden=512, out_dim=512, pred_hidden=256, block_samples=16)


def paper() -> C8Config:
    """The paper's tracking runs: CIFAR-10, ResNet-18 (width 1, d = 512), projector 512-2048-2048,
    predictor 2048-512-2048, no BN, batch 256, SGD lr 0.05 (momentum 0.9, no weight decay), 100 epochs,
    tracked once per epoch (195 steps), 4 runs × 3 seeds, on the GPU.

    Command: ``headgeom reproduce --only C8 --preset paper``. Runtime: roughly 2-4 GPU-hours on one
    H200 (12 runs of 100 epochs plus per-epoch tracking; a rough estimate from the training stack's
    5 s/epoch goal, not run). On 2 CPU cores: not feasible.
    """
    train = paper_scale(TRAIN, batch_size=256, epochs=100, track_every=195, probe_size=256)
    return C8Config(preset="paper", train=train, seeds=3, hidden=2048, out_dim=2048, pred_hidden=512, block_samples=32,
                    num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# one GPU per run; expected 10-20 min per run (the paper preset's 2-4 GPU-hours over 12 runs, from the
# training stack's 5 s/epoch goal, not measured); the 2 h limit leaves room, and a run that reaches it
# is requeued and resumes from its checkpoint
RESOURCES = {"paper": Resources(gpus=1, cpus=8, mem_gb=32, time_min=120, expected_min=15)}


def cells(config: C8Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per run × seed."""
    check_known("C8 config runs", config.runs, RUNS)
    return seeded_cells("C8", [{"run": r} for r in config.runs], seeds, default=config.seeds)


def train_config(config: C8Config, run: str, seed: int) -> TrainConfig:
    """The headgeom.train.TrainConfig of one cell: ``config.train`` with the run's head and pseudo-collapse."""
    act, alpha = RUNS[run]
    return simsiam_cell(replace(config.train, pseudo_collapse=alpha), act, seed, hidden=config.hidden,
                        out_dim=config.out_dim, pred_hidden=config.pred_hidden)


def cell_train_config(config: C8Config, cell: dict[str, Any]) -> TrainConfig:
    """The headgeom.train.TrainConfig a cell trains (``Experiment.train_config``: the dry run reads it)."""
    return train_config(config, cell["run"], int(cell["seed"]))


def run_cell(config: C8Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Train one run and return its trajectories and per-run summaries (keys below)."""
    run, seed = cell["run"], int(cell["seed"])
    if run not in RUNS:
        raise ValueError(f"C8 cell {cell}: run must be one of {tuple(RUNS)}")
    done, traj, _ = run_training(train_config(config, run, seed), config.readings,
                                 rel_floor=config.rel_floor, block_samples=config.block_samples,
                                 power_iterations=config.power_iterations)
    out: dict[str, Any] = {"activation": RUNS[run][0], "pseudo_collapse": RUNS[run][1],
                           "steps": traj.steps, "final_loss": done.get("final_loss"),
                           "train_budget": done["train_budget"],
                           "loss": traj.logged("loss")}
    for key in ("spread_projector", "spread_z", "cov_condition_z", "rankme_z"):
        out[key] = traj.statistic(key)
    out["update_ratio"] = traj.update("update_ratio")
    for key in ("grad_norm_head", "grad_norm_backbone"):
        out[key] = traj.logged(key)
    lmin0 = lmax0 = None
    for reading in config.readings:
        lmin, source = traj.heff(reading, "lambda_min")
        lmax, _ = traj.heff(reading, "lambda_max")
        floor, _ = traj.heff(reading, "floor")
        out[f"lambda_min[{reading}]"], out[f"lambda_max[{reading}]"] = lmin, lmax
        out[f"floor[{reading}]"] = floor  # the engine's zero band, drawn in the λ figure
        out[f"operand_scale[{reading}]"], _ = traj.heff(reading, "operand_scale")
        out[f"heff_source[{reading}]"] = source
        out[f"n_negative[{reading}]"], _ = traj.heff(reading, "n_negative")
        out[f"M_ratio_fro[{reading}]"], _ = traj.heff(reading, "M_ratio_fro")
        out[f"lambda_min_G[{reading}]"], _ = traj.heff(reading, "lambda_min_G")
        out[f"threshold_ratio[{reading}]"], _ = traj.heff(reading, "threshold_ratio")
        out[f"frac_points_negative[{reading}]"] = negative_fraction(lmin, floor)
        defined = [v for v in lmin if v is not None]
        out[f"lambda_min_min[{reading}]"] = min(defined) if defined else None
        lmin0, lmax0 = (lmin, lmax) if lmin0 is None else (lmin0, lmax0)
        if config.power_iterations is not None:
            est, _ = traj.heff(reading, "power_lambda_min")
            out[f"power_lambda_min[{reading}]"] = est
            out[f"power_disagreement[{reading}]"] = estimator_disagreement(lmin, lmax, floor, est,
                                                                          config.power_rel_tol)
    collapse_outcome(out, config, done, lmin0 or [], lmax0 or [], traj.logged("spread_reference")[0])
    alpha = RUNS[run][1]
    if alpha is not None:
        gaps = _pseudo_collapse_gap(config, run, seed)
        out["pseudo_collapse_gap"] = gaps
        out["inert_pseudo_collapse"] = bool(max(gaps.values()) <= INERT_REL_TOL)
    return out


def _pseudo_collapse_gap(config: C8Config, run: str, seed: int) -> dict[str, float]:
    """The run's method at init against the same init without the ×α, per reading, on
    ``block_samples`` Gaussian z (headgeom.theory.pseudo_collapse.gap_at_init)."""
    tc = train_config(config, run, seed)
    return gap_at_init(lambda: build_method_from_config(tc), tc.pseudo_collapse, config.block_samples or 8, seed,
                       config.readings)


def estimator_disagreement(lambda_min: list[float | None], lambda_max: list[float | None],
                           floor: list[float | None], estimate: list[float | None], rel_tol: float) -> dict[str, int]:
    """Tracking points where the paper's estimate and the exact λ_min disagree: ``sign`` (one is below
    −floor and the other not), ``value`` (|estimate − exact| > rel_tol · max(|λ_min|, |λ_max|)),
    ``either``, out of ``points`` where all four are defined."""
    counts = {"sign": 0, "value": 0, "either": 0, "points": 0}
    for lo, hi, f, est in zip(lambda_min, lambda_max, floor, estimate):
        if None in (lo, hi, f, est):
            continue
        sign = (lo < -f) != (est < -f)
        value = abs(est - lo) > rel_tol * max(abs(lo), abs(hi))
        counts["points"] += 1
        counts["sign"] += sign
        counts["value"] += value
        counts["either"] += sign or value
    return counts


# ---------------------------------------------------------------- summary (apart from computing)
def _groups(results: list[tuple[dict, dict]]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for cell, m in results:
        groups.setdefault(cell["run"], []).append(m)
    return groups


def escape_claim(config: Any, groups: dict[str, list[dict]], setting: dict[str, Any],
                 activation_of: dict[str, str], collapsed: dict[str, bool]) -> Row:
    """C8's escape half: pseudo-collapsed smooth runs escape, pseudo-collapsed ReLU/linear runs do not. One
    inclusion rule for every run (:func:`headgeom.claims.training_verdicts.usable_escape`): only seeds collapsed
    at step 0 against the calibrated level count; the others (a geometrically inert pseudo-collapse among them)
    are left out and counted."""
    escaped = [r for r in groups if collapsed[r]]
    verdict, meas, rule = escape_row(groups, [r for r in escaped if activation_of[r] not in NON_SMOOTH],
                                     [r for r in escaped if activation_of[r] in NON_SMOOTH],
                                     collapse_fraction=config.collapse_fraction, majority=config.majority)
    for run in groups:  # the runs not pseudo-collapsed (normal-silu) are reported beside, not judged
        if run not in escaped:
            meas[f"spread_ratio[{run}]"] = measured([m["spread_ratio"] for m in groups[run]
                                                     if m.get("spread_ratio") is not None] or float("nan"))
    criterion = f"judged on the pseudo-collapsed runs only; expected: smooth; not expected: ReLU/linear; {rule}"
    # headline: a smooth collapsed run's escape fraction; without one (the smooth side has no group), a ReLU/linear
    # collapsed run's; without any collapsed run, the first run's spread ratio (nothing was judged)
    head = next((f"escaped[{r}]" for r in escaped if activation_of[r] not in NON_SMOOTH),
                f"escaped[{escaped[0]}]" if escaped else next(iter(meas)))
    return Row(id="C8", statement=STATEMENT, setting={**setting, "reading": "n/a (spread)", "part": "escape"},
               budget=budget_of_cells([m for ms in groups.values() for m in ms], PAPER_BUDGET),
               measured=meas, verdict=verdict, evidence=TEST, criterion=criterion, headline=head)


def _disagreements(ms: list[dict], reading: str) -> str:
    """'either/points (sign s)' of the paper's estimator against the exact λ_min, summed over seeds."""
    counts = [m.get(f"power_disagreement[{reading}]") for m in ms]
    counts = [c for c in counts if c]
    if not counts:
        return "-"
    tot = {k: sum(c[k] for c in counts) for k in ("either", "points", "sign")}
    return f"{tot['either']}/{tot['points']} (sign {tot['sign']})"


def _inert(ms: list[dict]) -> str:
    if not any("inert_pseudo_collapse" in m for m in ms):
        return "-"
    gaps = [max(m["pseudo_collapse_gap"].values()) for m in ms if m.get("pseudo_collapse_gap")]
    return f"{sum(bool(m.get('inert_pseudo_collapse')) for m in ms)}/{len(ms)} (gap ≤ {max(gaps):.1e})"


def _table(config: C8Config, groups: dict[str, list[dict]]) -> Table:
    cols = [f"frac λ_min<-floor [{r}]" for r in config.readings] + [f"min λ_min [{r}]" for r in config.readings]
    if config.power_iterations is not None:
        cols += [f"power-iteration disagrees [{r}]" for r in config.readings]
    table = Table(["run", *cols, "max ‖M‖/‖H‖", "spread init", "spread final", "escaped", "dead", "inert pseudo-collapse",
                   "loss"], title="C8: tracked H_eff and spread per run (mean ± std (n seeds))")
    for run in config.runs:
        ms = groups.get(run)
        if not ms:
            continue
        r0 = config.readings[0]
        mr = [max((v for v in m[f"M_ratio_fro[{r0}]"] if v is not None), default=None) for m in ms]
        row = ([pm([m[f"frac_points_negative[{r}]"] for m in ms], ".2f") for r in config.readings]
               + [pm([m[f"lambda_min_min[{r}]"] for m in ms]) for r in config.readings]
               + ([_disagreements(ms, r) for r in config.readings] if config.power_iterations is not None else [])
               + [pm(mr), pm([m["spread_initial"] for m in ms]), pm([m["spread_final"] for m in ms]),
                  f"{sum(bool(m['escaped']) for m in ms)}/{len(ms)}",
                  f"{sum(bool(m['dead_head']) for m in ms)}/{len(ms)}", _inert(ms),
                  pm([m["final_loss"] for m in ms], ".4f")])
        table.add(run, *row)
    return table


def summarize(config: C8Config, results: list[tuple[dict, dict]]) -> Summary:
    """A curvature claim per reading, the escape claim, a table and the λ_min / spread figures."""
    groups = _groups(results)
    activation_of = {r: RUNS[r][0] for r in groups}
    collapsed = {r: RUNS[r][1] is not None for r in groups}
    setting = {"objective": "simsiam (negative cosine, stop-gradient)",
               "head": paper_head("{act}", config.hidden, config.out_dim),
               "predictor": paper_predictor("{act}", config.pred_hidden, config.out_dim), "data": config.train.data,
               "backbone": f"resnet18 width {config.train.backbone_options['width']}",
               "steps": config.train.max_steps or f"{config.train.epochs} epochs",
               "reduction": "batch mean (blocks carry 1/N)", "block_samples": config.block_samples}
    claims = [row for r in config.readings for row in curvature_claims(
        config, groups, r, setting, activation_of, statement=STATEMENT, paper=PAPER_BUDGET)]
    claims.append(escape_claim(config, groups, setting, activation_of, collapsed))
    smooth = {r: activation_of[r] not in NON_SMOOTH for r in groups}
    claims += [collapsed_state_claim(config, groups, r, setting, smooth, paper=PAPER_BUDGET) for r in config.readings]
    figures = [("lambda_min", lambda: plots.lambda_min(groups, config.readings, config.rel_floor)),
               ("spread", lambda: plots.spread(groups)),
               ("grad_norm", lambda: plots.grad_norm(groups))]
    notes = [f"{DEAD_DEFINITION}.", f"{ESCAPE_DEFINITION}.",
             "The curvature row is judged under each reading, with equal prominence, and the two can differ: ambient "
             f"(the exact Hessian of the batch loss, the paper's HVP operator, here exact per-sample blocks): {AMBIENT_WHY}. "
             "tangential (the Riemannian Hessian of the cosine loss on the sphere, unchanged by the head output's "
             "scale): a bias-free ReLU or linear head has h(z) = Jz, so z is an exact null vector of PJ, M = 0 and G is "
             "PSD wherever cos theta > 0, so its half of the row is an identity and only the smooth half is a test."]
    notes += _inert_notes(groups)
    notes += [n for r in config.readings for n in _tiny_negative_notes(groups, r)]
    if config.power_iterations is not None:
        notes.append(f"power-iteration disagrees: tracking points (summed over seeds) where the paper's estimator "
                     f"(float32 shifted power iteration, {config.power_iterations} steps per run, on the same blocks) "
                     f"and the exact lambda_min differ in sign (one below -floor, the other not) or by more than "
                     f"{config.power_rel_tol:g} * max|lambda|; reported, not judged.")
    return Summary(claims=claims, tables=[_table(config, groups)], figures=figures, notes=notes)


TINY_NEGATIVE = 1e-6  # |λ_min| / λ_max below which a run's negative points are named in a note


def _tiny_negative_notes(groups: dict[str, list[dict]], reading: str) -> list[str]:
    """One line per run whose negative points under ``reading`` are all tiny against λ_max.

    The floor is relative to the operands of G as well as to the result (rel_floor · max(max|λ|, S),
    :mod:`headgeom.geometry.engine.operand_scale`), so the round-off a collapsed head leaves when the
    tangential projection cancels its almost radial Jacobian counts as zero. A negative point that
    still passes is below −rel_floor · S, far above that round-off, and is counted; when all of a
    run's negative points are below TINY_NEGATIVE · λ_max the run is named, so that a verdict resting
    on them is read with their size in view. Results recorded before the operand floor (no
    ``operand_scale`` series) are named as such: their floor was relative to the result alone."""
    notes = []
    for run, ms in groups.items():
        ratios, old = [], 0
        for m in ms:
            lo, hi, fl = (m.get(f"{k}[{reading}]") or [] for k in ("lambda_min", "lambda_max", "floor"))
            ratios += [abs(a) / b for a, b, f in zip(lo, hi, fl)
                       if None not in (a, b, f) and a < -f and b > 0]
            old += not any(v is not None for v in (m.get(f"operand_scale[{reading}]") or []))
        if not ratios or max(ratios) > TINY_NEGATIVE:
            continue
        head = (f"{run} under the {reading} reading: every negative point has |lambda_min| <= {max(ratios):.1e} * "
                f"lambda_max ({len(ratios)} points over {len(ms)} seeds)")
        if old:
            notes.append(head + f"; {old} of the seeds were recorded before the operand-relative floor (their floor "
                         "is relative to the result alone, which counts the round-off of cancelled radial terms): "
                         "recompute them (a fresh --out) before reading the verdict.")
        else:
            notes.append(head + "; each is below -rel_floor * S, the floor relative to G's operands, so it is counted "
                         "as negative, but it is small against the block's own scale.")
    return notes


def _inert_notes(groups: dict[str, list[dict]]) -> list[str]:
    """One line per pseudo-collapsed run: the measured gap of H_eff at init with and without the ×α."""
    notes = []
    for run, ms in groups.items():
        gaps = [m["pseudo_collapse_gap"] for m in ms if m.get("pseudo_collapse_gap")]
        if not gaps:
            continue
        worst = {r: max(g[r] for g in gaps) for r in gaps[0]}
        inert = sum(bool(m.get("inert_pseudo_collapse")) for m in ms)
        text = ", ".join(f"{r} {v:.2e}" for r, v in worst.items())
        verdict = ("geometrically inert: the cosine loss cannot see the scaling, so this run is a normal "
                   f"{RUNS[run][0]} head at init and is left out of the escape row") if inert == len(ms) else (
            "the scaling changes H_eff" if inert == 0 else "inert in some seeds only")
        notes.append(f"pseudo-collapse of {run} (x{RUNS[run][1]:g} on the projector's Linear weights): max relative "
                     f"change of the per-sample H_eff blocks at init over {len(gaps)} seeds: {text}; {inert}/{len(ms)} "
                     f"seeds within {INERT_REL_TOL:g}: {verdict}.")
    return notes


PAPER_PROTOCOL = PaperProtocol(
    {"dataset": "cifar10", "backbone": RESNET18, "method": "simsiam", "optimizer": "sgd",
     "head": paper_heads(("silu", "relu")),  # normal+Swish, collapsed+Swish, collapsed+ReLU; no BN
     "pseudo_collapse": (None, 0.1), "epochs": 100, "batch_size": 256, "lr": 0.05, "runs": 3,
     "track_every": 195,  # per epoch: 50,000 // 256 steps
     "curvature": "λ_min of the HVP operator of the batch loss w.r.t. z1 (power iteration), 5 batches per epoch"},
    described={"curvature": "exact eigenvalues (float64 eigh) of the per-sample H_eff blocks of 32 probe samples, "
                            "once per epoch, ambient and tangential readings"},
    differences={
        "head": "adds a collapsed linear run: the claim (Fig. 3) is that ReLU and linear heads show no negative "
                "curvature, and the paper tracked no linear head",
        "runs": "the added collapsed-linear run (see head)",
        "curvature": "power iteration on the shifted operator is wrong when the largest-magnitude eigenvalue is "
                     "negative, and float32 HVPs under-resolve eigenvalues near 1e-6 (docs/paper.md §4 pitfalls 1-2); "
                     "exact float64 blocks with a relative floor replace it",
    })

EXPERIMENT = register(Experiment(
    id="C8",
    title="Hessian tracking during SimSiam training (Fig. 3)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    resources=RESOURCES,
    train_config=cell_train_config,
    protocol=PAPER_PROTOCOL,
))

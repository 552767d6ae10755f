"""C3, Thm 3.2 and depth: fit smooth MLP heads to make H_eff isotropic along a curve; ε vs depth, width.

Setting (docs/paper.md §2 C3; the maths in :mod:`headgeom.theory.curve_isotropy`). Per seed: a random closed
Fourier curve γ in R^d (``n_modes`` modes, ``radius``), T points z_j = γ(j/T), a fixed target
c ~ N(0, I_k), the loss ``loss`` (default ``cosine``: −cos(u, c), exact Hessian, curved and indefinite
metric; ``mse``: ½‖u − c‖², the flat control). Heads: depth 0 = the linear baseline Linear(d→k)
(one cell per seed, no width), depth D ≥ 1 = D hidden layers of ``width`` with ``activation``,
PyTorch's default init from the seed, biases unless ``bias=False``. The same seed gives the same curve
and target for every head, so depths are compared on one problem (paired).

Fit: minimise mean_j ‖H_j − I‖_F² / d (unit-scale isotropy; per-point blocks, the loss is summed over
points, no 1/N) by Adam then L-BFGS, differentiating the closed-form H_eff of the MLP. Reported per cell
(at the best parameters): ε = eps_kappa = max_j (κ(H_j) − 1) ("inf" when some H_j is not positive
definite; n_indefinite counts those points), eps_iso = max_j ‖H_j − I‖₂, rel_fro = max_j min_c ‖H_j − cI‖_F
/ ‖H_j‖_F, the same at init, the fit's convergence (objective initial/final, Adam steps, L-BFGS
iterations, evaluations, gradient norm, stop reason), ‖M‖_F/‖H‖_F, and engine_gap: the largest
difference between the fit's H_eff and headgeom's engine (effective_hessian(...).decomposed_blocks() on a
ProjectionHead holding the fitted weights, loss from headgeom.objectives), relative to max|H|.

Runtime of ``headgeom reproduce --only C3 --preset quick --out /tmp/c3out`` (measured 2026-12-03): 42 s and
59 s wall in two runs, 16 s CPU time, on 2 CPU cores shared with ~7 other jobs (load average 8-12); at idle
expect roughly the CPU time plus start-up (~20 s). The small preset took 8 min wall (466 s of cells).

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: whether fitted heads of
growing depth reach ε-isotropy along the curve, and whether ε falls with depth, depends on the fit
and the curve: it could come out either way. Its conventions (the convergence rule's plateau_tol, the
threshold on ε, the majority) are re-judged over ``<name>_sweep`` from the stored ε, convergence flags and
each fit's tail improvement (:func:`judge`, :func:`robustness`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from headgeom.claims.depth_isotropy import depth_isotropy_verdict
from headgeom.claims.robustness import Robustness, robustness_text, sweep, with_own
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.runs.cell import log_metrics
from headgeom.geometry import effective_hessian
from headgeom.launch.resources import Resources
from headgeom.objectives.cosine import negative_cosine
from headgeom.objectives.mse import mse_to_target
from headgeom.claims.estimates import format_estimate
from headgeom.claims.evidence import TEST
from headgeom.report.paper_protocol import PaperProtocol
from headgeom.report.plots import c3_depth as plots
from headgeom.report.table import Table
from headgeom.runs.cell import seeded_cells
from headgeom.theory.curve_isotropy import (LOSSES, fit_isotropy, fixed_target, fourier_curve, head_from_params,
                                            head_spec, init_params, isotropy, mlp_geometry, tail_improvement)

STATEMENT = ("Thm 3.2 + depth: deep enough smooth MLP heads make H_eff ε-isotropic along a trajectory; "
             "depth sets the capacity")
METRIC_KEYS = (
    "loss", "depth", "width", "activation", "bias", "d", "k", "T", "n_params", "curve_diameter",
    "eps_kappa", "eps_iso", "rel_fro", "n_indefinite", "lambda_min", "lambda_max", "scale_min", "scale_max",
    "init_eps_kappa", "init_eps_iso", "init_rel_fro",
    "objective_initial", "objective_final", "adam_steps", "lbfgs_iterations", "func_evals", "grad_norm",
    "converged", "stop_reason", "tail_improvement", "M_ratio_fro", "engine_gap",
)


@dataclass(frozen=True)
class C3Config:
    """Every setting of C3 (see the module docstring)."""

    preset: str = "quick"
    d: int = 3  # representation dim
    k: int = 6  # head output dim (cosine: the loss Hessian has k − 1 positive eigenvalues where cos > 0)
    n_points: int = 12  # T points on the curve
    n_modes: int = 3  # Fourier modes of γ
    radius: float = 0.5  # curve amplitude (diameter ≲ 2 keeps unit isotropy feasible for the bounded cosine loss)
    loss: str = "cosine"
    activation: str = "silu"
    bias: bool = True
    depths: tuple[int, ...] = (1, 2, 3)
    widths: tuple[int, ...] = (8, 32)
    linear_baseline: bool = True
    seeds: int = 2
    adam_steps: int = 100
    adam_lr: float = 1e-2
    lbfgs_iters: int = 100
    plateau_tol: float = 1e-3  # converged if the best objective moved < this (relative) over the last 10% evals
    eps_threshold: float = 0.1  # ε = max_j κ − 1 the deepest heads must reach (criterion)
    majority: float = 0.8  # fraction of seeds / depth pairs (criterion)
    # the ranges the verdict is re-judged over (the row's robustness; each setting's own value is added)
    plateau_tol_sweep: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1)
    eps_threshold_sweep: tuple[float, ...] = (0.03, 0.1, 0.3)
    majority_sweep: tuple[float, ...] = (0.5, 0.6, 0.8, 1.0)
    num_threads: int | None = 1  # torch threads inside a cell (tiny problems); None: as set


def quick() -> C3Config:
    """d=3, k=6, T=12, cosine loss, SiLU depths 1-3 × widths 8, 32 × 2 seeds + linear baseline (14 cells).

    Command: ``headgeom reproduce --only C3 --preset quick``. Runtime: measured 42-59 s wall for the whole
    command (16 s CPU time) on 2 CPU cores shared with other jobs (load average 8-12); 100 Adam + ≤100
    L-BFGS steps per cell; no GPU used. Measures ε = max_j κ(H_eff(γ(t_j))) − 1 after fitting, per depth
    and width. The fits stop on their budget, so the verdict is inconclusive by the stated rule.
    """
    return C3Config(preset="quick")


def small() -> C3Config:
    """d=4, k=8, T=24, widths 8, 32, 128, 3 seeds, 300 Adam + ≤500 L-BFGS steps (30 cells).

    Command: ``headgeom reproduce --only C3 --preset small``. Runtime: measured 8 min wall (466 s of cell
    time, 131 s CPU) on 2 CPU cores shared with other jobs (load average ~10); no GPU used. Measures the
    same quantities with longer fits and a wider width sweep. In that run (3 seeds) ε fell with depth at
    every width (depth 1/2/3 at width 128: 0.022/0.0098/0.0026) but no MLP fit met the convergence rule
    within 500 L-BFGS iterations, so the verdict is inconclusive.
    """
    return C3Config(preset="small", d=4, k=8, n_points=24, widths=(8, 32, 128), seeds=3, adam_steps=300,
                    lbfgs_iters=500)


def paper() -> C3Config:
    """d=8, k=16, T=64, widths 16, 64, 256, 5 seeds, 500 Adam + ≤2000 L-BFGS steps (50 cells).

    Command: ``headgeom reproduce --only C3 --preset paper``. Runtime: about 1-3 hours on 2 CPU cores
    (estimated, not measured: width-256 depth-3 second-derivative propagation dominates). The paper
    gives no numbers for this experiment; this is the largest setting we run.
    """
    return C3Config(preset="paper", d=8, k=16, n_points=64, widths=(16, 64, 256), seeds=5, adam_steps=500,
                    lbfgs_iters=2000, num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; 1-3 hours for 50 cells on 2 cores (estimated, not measured), so 2-4 min per cell
RESOURCES = {"paper": Resources(cpus=4, mem_gb=8, time_min=120, expected_min=4)}


def _validate(config: C3Config) -> None:
    if config.loss not in LOSSES:
        raise ValueError(f"C3 config loss {config.loss!r} is unknown; choose one of {LOSSES}")
    if not config.depths or any(dp < 1 for dp in config.depths) or any(w < 1 for w in config.widths):
        raise ValueError(f"C3 depths must be >= 1 (depth 0 is the linear baseline) and widths >= 1; "
                         f"got depths={config.depths}, widths={config.widths}")
    if not config.widths:
        raise ValueError("C3 needs at least one width")


def cells(config: C3Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per depth × width × seed, plus the linear baseline (depth 0, width 0) per seed."""
    _validate(config)
    baseline = [{"depth": 0, "width": 0}] if config.linear_baseline else []
    return seeded_cells("C3", baseline + [{"depth": dp, "width": w} for dp in config.depths for w in config.widths],
                        seeds, default=config.seeds)


def problem(config: C3Config, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(z (T, d), target c (k,)) of a seed: the same for every head."""
    curve = fourier_curve(config.d, config.n_modes, config.radius, seed)
    return curve.points(config.n_points), fixed_target(config.k, seed)


def _engine_loss(name: str, c: torch.Tensor):
    """The loss summed over points through headgeom.objectives (mean × N): per-point blocks."""
    if name == "cosine":
        return lambda u: negative_cosine(u, c.expand_as(u)) * u.shape[0]
    return lambda u: mse_to_target(u, c.expand_as(u)) * u.shape[0]


def run_cell(config: C3Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Fit one head; the keys of ``METRIC_KEYS``."""
    depth, width, seed = int(cell["depth"]), int(cell["width"]), int(cell["seed"])
    z, c = problem(config, seed)
    spec = head_spec(config.d, config.k, depth, width, config.activation, config.bias)
    params = init_params(spec, seed)
    iso0 = isotropy(mlp_geometry(params, config.activation, config.loss, c, z).h)
    fit = fit_isotropy(params, config.activation, config.loss, c, z, adam_steps=config.adam_steps,
                       adam_lr=config.adam_lr, lbfgs_iters=config.lbfgs_iters, plateau_tol=config.plateau_tol)
    stride = max(1, len(fit.history) // 50)
    for i in range(0, len(fit.history), stride):
        log_metrics(i, {"objective": fit.history[i]})  # step = the fit's evaluation index
    with torch.no_grad():
        geo = mlp_geometry(fit.params, config.activation, config.loss, c, z)
    iso = isotropy(geo.h)
    h_eng, _, m_eng = effective_hessian(head_from_params(spec, fit.params), _engine_loss(config.loss, c), z,
                                        reading="ambient").decomposed_blocks()
    scale = float(h_eng.abs().max())
    m_ratio = float((m_eng.flatten(1).norm(dim=1) / h_eng.flatten(1).norm(dim=1).clamp_min(1e-300)).max())
    out: dict[str, Any] = {
        "loss": config.loss, "depth": depth, "width": width, "activation": config.activation if depth else "linear",
        "bias": config.bias, "d": config.d, "k": config.k, "T": config.n_points,
        "n_params": int(sum(p.numel() for p in params.values())),
        "curve_diameter": float(torch.cdist(z, z).max()),
        **{key: val for key, val in iso.as_dict().items()},
        "init_eps_kappa": iso0.as_dict()["eps_kappa"], "init_eps_iso": iso0.eps_iso, "init_rel_fro": iso0.rel_fro,
        "objective_initial": fit.objective_initial, "objective_final": fit.objective_final,
        "adam_steps": fit.adam_steps, "lbfgs_iterations": fit.lbfgs_iterations, "func_evals": fit.func_evals,
        "grad_norm": fit.grad_norm, "converged": fit.converged, "stop_reason": fit.stop_reason,
        "tail_improvement": tail_improvement(fit.history),
        "M_ratio_fro": m_ratio, "engine_gap": float((geo.h - h_eng).abs().max()) / max(scale, 1e-300),
    }
    return out


# ---------------------------------------------------------------- summary (apart from computing)
def eps_of(m: dict[str, Any]) -> float:
    """ε = max_j κ − 1 of a cell; ∞ where some block was not positive definite (stored as "inf"; as
    None by results written before headgeom.io.json_safe was the one convention)."""
    v = m.get("eps_kappa")
    return math.inf if v is None or v == "inf" else float(v)


def _group(results: list[tuple[dict, dict]]) -> dict[tuple[int, int], dict[int, dict]]:
    groups: dict[tuple[int, int], dict[int, dict]] = {}
    for cell, m in results:
        groups.setdefault((int(cell["depth"]), int(cell["width"])), {})[int(cell["seed"])] = m
    return groups


def _fmt(ms: list[dict], key: str = "eps_kappa") -> str:
    vals = [eps_of(m) if key == "eps_kappa" else float(m[key]) for m in ms]
    if any(math.isinf(v) for v in vals):
        return f"∞ in {sum(math.isinf(v) for v in vals)}/{len(vals)}"
    return format_estimate(measured(vals))


def depth_pairs(config: C3Config, groups: dict) -> tuple[int, int]:
    """(pairs with ε(D+1) < ε(D), all pairs) over widths × seeds × consecutive depths both run."""
    depths = sorted(config.depths)
    wins = total = 0
    for w in config.widths:
        for lo, hi in zip(depths, depths[1:]):
            a, b = groups.get((lo, w), {}), groups.get((hi, w), {})
            for seed in sorted(set(a) & set(b)):
                total += 1
                wins += eps_of(b[seed]) < eps_of(a[seed])
    return wins, total


CONVENTIONS = ("plateau_tol", "eps_threshold", "majority")
"""The settings C3's verdict depends on, each re-judged over its config range (``<name>_sweep``)."""


def converged(config: C3Config, m: dict[str, Any], plateau_tol: float | None = None) -> bool:
    """Whether a fit converged at ``plateau_tol`` (the config's when None): L-BFGS stopped on its own tolerances, or
    its best objective improved by at most plateau_tol over the last 10% of evaluations (the stored
    ``tail_improvement``; cells without it keep the flag they recorded at the config's tolerance)."""
    if plateau_tol is None or plateau_tol == config.plateau_tol or m.get("tail_improvement", "absent") == "absent":
        return bool(m["converged"])
    if m["stop_reason"] == "tolerance":
        return True
    return m["stop_reason"] in ("budget", "plateau") and m["tail_improvement"] is not None \
        and m["tail_improvement"] <= plateau_tol


def _best_deep(config: C3Config, groups: dict) -> dict[int, float]:
    """Per seed, the best ε over widths at the deepest depth: a witness head for Thm 3.2."""
    deepest = max(config.depths)
    seeds = sorted({s for (dp, _), ms in groups.items() if dp >= 1 for s in ms})
    return {s: min((eps_of(groups[(deepest, w)][s]) for w in config.widths if s in groups.get((deepest, w), {})),
                   default=math.inf) for s in seeds}


def judge(config: C3Config, groups: dict, **change: float):
    """C3's verdict with the conventions of ``change`` (plateau_tol, eps_threshold, majority) in place of the
    config's: a pure function of the stored ε, convergence flags and tail improvements."""
    cfg = dataclasses.replace(config, **change)
    mlp = [m for (dp, _), ms in groups.items() if dp >= 1 for m in ms.values()]
    best = _best_deep(cfg, groups)
    wins, total = depth_pairs(cfg, groups)
    return depth_isotropy_verdict(
        n_fits=len(mlp), converged=sum(converged(config, m, cfg.plateau_tol) for m in mlp) / max(1, len(mlp)),
        frac_deep=sum(v <= cfg.eps_threshold for v in best.values()) / max(1, len(best)), wins=wins, total=total,
        majority=cfg.majority)


def robustness(config: C3Config, groups: dict) -> dict[str, Robustness]:
    """The verdict re-judged over each of :data:`CONVENTIONS` (the others at the config's values); the plateau
    tolerance only where every fit stored its tail improvement."""
    names = [n for n in CONVENTIONS if n != "plateau_tol" or all(
        "tail_improvement" in m for (dp, _), ms in groups.items() if dp >= 1 for m in ms.values())]
    return {n: sweep(lambda v, n=n: judge(config, groups, **{n: v}), getattr(config, n),
                     with_own(getattr(config, n), getattr(config, f"{n}_sweep"))) for n in names}


def _claim(config: C3Config, groups: dict) -> Row:
    deepest = max(config.depths)
    mlp = [m for (dp, _), ms in groups.items() if dp >= 1 for m in ms.values()]
    best_deep = _best_deep(config, groups)
    wins, total = depth_pairs(config, groups)
    frac_pairs = wins / total if total else float("nan")
    conv = sum(bool(m["converged"]) for m in mlp) / max(1, len(mlp))
    maj = config.majority
    verdict, headline, reason = judge(config, groups)
    robust = robustness(config, groups)
    unswept = "" if "plateau_tol" in robust else " (plateau_tol not swept: these cells predate the stored tail " \
                                                  "improvement; rerun them to sweep it)"
    criterion = (
        f"ε = max_j κ(H_eff(γ(t_j))) − 1 (∞ if some block is not positive definite). Judged only when ≥ {maj:.0%} "
        f"of the MLP fits converged (L-BFGS stopped on its tolerances, or the best objective moved less than "
        f"{config.plateau_tol:g} relatively over the last 10% of evaluations), else inconclusive. supported if, at "
        f"depth {deepest}, the best width reaches ε ≤ {config.eps_threshold:g} in ≥ {maj:.0%} of seeds AND "
        f"ε(depth D+1) < ε(depth D) in ≥ {maj:.0%} of (width, seed, consecutive depth) pairs; not supported "
        f"otherwise. Reason: {reason}. Re-judged: {robustness_text(robust)}{unswept}."
    )
    meas: dict[str, Any] = {
        "frac_seeds_deepest_below_threshold": measured([float(v <= config.eps_threshold) for v in best_deep.values()],
                                                       what="1 if the seed's best width at the deepest depth reaches "
                                                            "the threshold"),
        "frac_depth_pairs_decreasing": measured(frac_pairs, n=total, wins=wins),
        "frac_fits_converged": measured(conv, n=len(mlp)),
        "best_eps_deepest": measured([v for v in best_deep.values() if math.isfinite(v)],
                                     n_infinite=sum(math.isinf(v) for v in best_deep.values())),
        "engine_gap_max": measured(max(float(m["engine_gap"]) for ms in groups.values() for m in ms.values()),
                                   n=sum(len(ms) for ms in groups.values()), what="max over cells"),
    }
    improvements = [m["tail_improvement"] for m in mlp if m.get("tail_improvement") is not None]
    if improvements:
        meas["fit_tail_improvement"] = measured(improvements, what="relative improvement of each fit's best "
                                                "objective over its last 10% of evaluations (≤ plateau_tol: converged)")
    for (dp, w), ms in sorted(groups.items()):
        vals = [eps_of(m) for m in ms.values()]
        name = "linear" if dp == 0 else f"depth{dp}_width{w}"
        meas[f"eps_kappa[{name}]"] = measured([v for v in vals if math.isfinite(v)],
                                              n_infinite=sum(math.isinf(v) for v in vals))
        meas[f"eps_iso[{name}]"] = measured([float(m["eps_iso"]) for m in ms.values()])
    return Row(
        id="C3", statement=STATEMENT,
        setting={
            "objective": config.loss + " to a fixed target (exact Hessian)", "reading": "ambient",
            "head": f"{config.d}-[width]x[depth]-{config.k}:{config.activation}" + ("" if config.bias else ":nobias"),
            "preset": config.preset, "depths": list(config.depths), "widths": list(config.widths),
            "T": config.n_points, "curve": f"Fourier, {config.n_modes} modes, radius {config.radius:g}",
            "reduction": "per-point blocks (loss summed over points)",
        },
        measured=meas, verdict=verdict, evidence=TEST, criterion=criterion, headline=headline,
        conventions=CONVENTIONS, robustness=robust,
        headline_text=HEADLINE_WORDS.get(headline),
    )


def _table(config: C3Config, groups: dict) -> Table:
    table = Table(("depth", "width", "ε = max κ − 1", "‖H − I‖₂", "rel. Frobenius to cI", "ε at init", "converged",
                   "L-BFGS iters", "final objective", "‖M‖/‖H‖", "n"),
                  title=f"C3: isotropy of H_eff along γ after fitting (mean ± std over seeds), {config.loss} loss")
    for (dp, w), ms in sorted(groups.items()):
        rows = list(ms.values())
        table.add("linear" if dp == 0 else dp, "-" if dp == 0 else w, _fmt(rows), _fmt(rows, "eps_iso"),
                  _fmt(rows, "rel_fro"), _fmt([{"eps_kappa": m["init_eps_kappa"]} for m in rows]),
                  f"{sum(bool(m['converged']) for m in rows)}/{len(rows)}", _fmt(rows, "lbfgs_iterations"),
                  _fmt(rows, "objective_final"), _fmt(rows, "M_ratio_fro"), len(rows))
    return table


HEADLINE_WORDS = {
    "frac_fits_converged": "share of the MLP head fits that converged (too few: ε against depth reflects the "
                           "optimiser, not depth)",
    "frac_seeds_deepest_below_threshold": "share of seeds whose deepest head makes H_eff ε-isotropic along the curve",
    "frac_depth_pairs_decreasing": "share of (width, seed, depth) pairs where one more layer lowers ε",
}
"""The headline of a C3 row in words, by the measured key that decided it (headgeom.claims.depth_isotropy)."""


def summarize(config: C3Config, results: list[tuple[dict, dict]]) -> Summary:
    """The C3 claim, the ε table (mean ± std over seeds), the ε-vs-width figure, notes."""
    groups = _group(results)
    notes = [
        "ε = max_j κ(H_j) − 1 over the T curve points (scale-free); ‖H − I‖₂ is the unit-scale error the fit "
        "minimises (through mean_j ‖H_j − I‖_F² / d); ∞ means some H_j is not positive definite.",
        "A fit only bounds the achievable ε from above: a small ε is a witness head, a large one may be the optimiser.",
    ]
    lin = list(groups.get((0, 0), {}).values())
    if lin:
        notes.append(f"linear baseline ({'affine' if config.bias else 'bias-free'}): ε = {_fmt(lin)}, "
                     f"‖H − I‖₂ = {_fmt(lin, 'eps_iso')}, "
                     f"M = 0 (max ‖M‖/‖H‖ {max(m['M_ratio_fro'] for m in lin):.2g}).")
    gaps = [float(m["engine_gap"]) for ms in groups.values() for m in ms.values()]
    if gaps:
        notes.append(f"closed-form H_eff of the fit vs headgeom's engine: max relative gap {max(gaps):.2g}.")
    stops: dict[str, int] = {}
    for ms in groups.values():
        for m in ms.values():
            stops[m["stop_reason"]] = stops.get(m["stop_reason"], 0) + 1
    notes.append("fit stop reasons: " + ", ".join(f"{k} {v}" for k, v in sorted(stops.items())))
    return Summary(
        claims=[_claim(config, groups)] if any(dp >= 1 for dp, _ in groups) else [],
        tables=[_table(config, groups)],
        figures=[("eps_vs_width", lambda: plots.eps_vs_width(
            {key: [eps_of(m) for m in ms.values()] for key, ms in groups.items()}, config.depths, config.widths,
            config.eps_threshold, config.loss, config.d, config.k))], notes=notes)


PAPER_PROTOCOL = PaperProtocol({"depths": (1, 2, 3)})  # docs/paper.md §2: "fit heads of depth 1-3 along a curve"

EXPERIMENT = register(Experiment(
    id="C3",
    title="Depth and isotropy of H_eff along a curve (Thm 3.2)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
    protocol=PAPER_PROTOCOL,
))

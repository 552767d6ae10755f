"""C4, Thm 4.1 (collapse instability): exact spectra of G, M and H_eff at collapsed states.

States (docs/paper.md §2 C4, §3), built by :mod:`headgeom.theory.collapse`:

- ``equilibrium``: all N representations at one z̄ ~ z_scale · N(0, I_d), the head at its
  default init, targets chosen so that ∇_z L = J_hᵀρ = 0 exactly while ρ = ∇_u L ≠ 0
  (ρ_i in the left null space of J_h, which an expander head k > d has).
- ``scaled-equilibrium``: the same construction with the projector's Linear weights ×0.1.
- ``pseudo-collapsed``: the paper's initialisation (Linear weights ×0.1) at z ~ N(0, I),
  targets the head's outputs on a second view z + view_noise · ε. Not an equilibrium: its
  ‖∇_z L‖ is reported.

Analyses (the ``reading`` axis), each a stated loss and a reading of its Hessian
(``headgeom.geometry.engine.readings``): ``ambient`` and ``tangential`` read the SimSiam negative cosine loss
−mean_i cos(u_i, sg(c_i)); ``mse`` is the collapse theorem's premise as a loss, mean_i ½‖u_i − c_i‖²,
read ambient (its exact Hessian is I/N, and ρ in M is its own, (u − c)/N). The loss is a batch mean, so blocks carry 1/N. Heads: Linear(d→hidden)
→ act → Linear(hidden→k), bias-free like the paper's projector; ``linear`` has nothing between.

Each cell (activation × state × reading × seed) reports the exact per-sample block spectra
(float64 eigh) of H_eff, G and M, ‖M‖_F/‖H_eff‖_F, ‖∇_z L‖ (absolute and relative to
‖J‖₂‖ρ‖), and, when N·d ≤ dense_max, the dense spectrum of the whole H_eff as a cross-check.

Thresholds, not design points (:mod:`headgeom.theory.collapse_threshold`). One equilibrium is one
design point (residual ``mse_residual`` under MSE, angle ``cosine_angle`` under the cosine readings),
and the answer depends on it: with full-rank J, G ≻ 0 and M is linear in ρ, so H_eff turns
indefinite only past a threshold in ‖ρ‖. So each equilibrium cell of a state in ``sweep_states``
also sweeps the design magnitude over a log grid (``residual_range`` or ``angle_range``,
``sweep_points`` points, the same null directions throughout) and reports λ_min(H_eff) along it and
the magnitude at which λ_min first drops below −floor, bisected between the bracketing grid points
to a factor 1 + ``threshold_rel_tol`` ("below range" if the first grid point is already negative,
"none in range" if none is). Every cell also reports ``point_magnitude``, the mean residual ‖u_i − c_i‖
(MSE) or angle ∠(u_i, c_i) (cosine) of its point, so the thresholds can be set against the magnitude
at the paper's pseudo-collapsed initialisation (same weight scale as ``scaled-equilibrium``).

Evidence kinds of the rows (:mod:`headgeom.claims.evidence`):

- per equilibrium state × reading, "smooth heads have a finite threshold past which M's negative
  directions outweigh G": ``test`` (on the sweep; on the design point alone for a state not swept).
  Whether, and where, that happens could come out either way. The row also reports whether the
  pseudo-collapsed init's residual/angle reaches the threshold (reported, not judged).
- per equilibrium state under the MSE loss, "linear and ReLU heads give H_eff ⪰ 0": ``identity``.
  Under the MSE premise ∇²_u L = I/N, so G = JᵀJ/N ⪰ 0, and M ≡ 0 for a linear head (and for a ReLU
  head away from its kinks): H_eff = G ⪰ 0 by construction, at every residual, so a negative
  eigenvalue beyond the floor, or a threshold on the sweep, would be a bug. Under the cosine readings the linear and ReLU heads are reported, not judged.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import torch

from headgeom.claims.collapse_instability import construction_verdict, past_threshold_verdict
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.geometry import effective_hessian, spectrum
from headgeom.geometry.linalg.threshold import pullback_and_ratio
from headgeom.heads import HeadSpec, ProjectionHead, scale_linear_weights_
from headgeom.launch.resources import Resources
from headgeom.claims.estimates import mean_std_text
from headgeom.claims.evidence import IDENTITY, TEST
from headgeom.report.plots import c4_collapse as plots
from headgeom.report.table import Table
from headgeom.runs.cell import check_known, seeded_cells
from headgeom.theory.collapse import collapsed_equilibrium, equilibrium_residual, pseudo_collapsed_point
from headgeom.theory.collapse_threshold import (
    A_SINGULAR, ENGINE_READING, MAGNITUDE_OF_READING, NONE_IN_RANGE, OBJECTIVE_OF_READING, log_grid, threshold_sweep)

STATES = ("equilibrium", "scaled-equilibrium", "pseudo-collapsed")
EQUILIBRIUM_STATES = ("equilibrium", "scaled-equilibrium")
READINGS = ("ambient", "tangential", "mse")
NON_SMOOTH = ("linear", "relu")  # M = 0 (everywhere / away from kinks); all others are smooth

STATEMENT = ("Thm 4.1: at collapsed equilibria, smooth heads inject negative eigenvalues through M "
             "(saddle, escapable) once the residual passes a finite threshold; linear heads give H_eff ⪰ 0 "
             "under the MSE premise")

METRIC_KEYS = (
    "objective", "N", "d", "k", "hidden", "weight_scale", "null_dim", "equilibrium",
    "grad_z_norm", "grad_z_rel", "rho_norm", "jac_norm", "rho_design_error", "u_norm_mean", "kink_distance",
    "floor", "lambda_min_H", "lambda_max_H", "n_negative_H", "n_zero_H",
    "lambda_min_G", "lambda_max_G", "n_negative_G", "lambda_min_M", "lambda_max_M", "n_negative_M",
    "M_fro", "M_ratio_fro", "G_ratio_fro", "lambda_min_rel_H",
    "dense", "dense_lambda_min_H", "dense_n_negative_H", "dense_block_gap", "dense_offblock_max",
    "magnitude", "point_magnitude", "sweep_grid", "sweep_lambda_min", "sweep_floor", "threshold", "threshold_status",
    "threshold_rel_tol", "threshold_sweep", "threshold_sweep_status", "threshold_ratio",
)


@dataclass(frozen=True)
class C4Config:
    """Every setting of C4 (see the module docstring)."""

    preset: str = "quick"
    d: int = 8  # representation dim
    hidden: int = 32  # head hidden width
    k: int = 16  # head output dim (k > d: expander, so equilibria with ρ ≠ 0 exist)
    n_samples: int = 4  # N, batch size of the collapsed batch
    activations: tuple[str, ...] = ("linear", "relu", "gelu", "silu", "softplus", "tanh")
    states: tuple[str, ...] = STATES
    readings: tuple[str, ...] = READINGS
    seeds: int = 5
    bias: bool = False  # the paper's projector has bias-free Linears
    pseudo_scale: float = 0.1  # Linear weights ×0.1: the paper's pseudo-collapsed init
    z_scale: float = 1.0  # z̄ ~ z_scale · N(0, I)
    mse_residual: float = 1.0  # ‖u − c_i‖ at MSE equilibria
    cosine_angle: float = math.pi / 4  # ∠(u, c_i) at cosine equilibria, radians
    view_noise: float = 0.1  # second-view noise for the pseudo-collapsed targets
    residual_range: tuple[float, float] = (1e-3, 10.0)  # threshold sweep of ‖u − c_i‖ (MSE loss), log grid
    # threshold sweep of ∠(u, c_i) (cosine readings). It stops short of π/2: there the target is ⟂ u, the
    # Gauss-Newton part G ∝ cos θ vanishes, and a linear or ReLU head's H_eff is 0 up to round-off
    angle_range: tuple[float, float] = (1e-3, 0.99 * math.pi / 2)
    sweep_points: int = 12  # grid points of each sweep
    sweep_states: tuple[str, ...] = EQUILIBRIUM_STATES  # equilibrium states whose cells run the threshold sweep
    threshold_rel_tol: float = 0.01  # bisection stops when hi/lo <= 1 + this (threshold within that factor)
    rel_floor: float = 1e-10  # λ < −rel_floor·max|λ| counts as negative (docs/paper.md §4 pitfall 2)
    equilibrium_tol: float = 1e-10  # ‖∇_z L‖ / (‖J‖₂‖ρ‖) below this counts as an equilibrium
    dense_max: int = 256  # dense H_eff cross-check when N·d ≤ dense_max
    majority: float = 0.8  # fraction of seeds a smooth head must show λ_min < −floor in
    num_threads: int | None = 1  # torch threads inside a cell (tiny problems: one thread is fastest); None: as set


def quick() -> C4Config:
    """Small heads 8-32-16, N=4, 6 activations × 3 states × 3 readings × 5 seeds (270 cells).

    Command: ``headgeom reproduce --only C4 --preset quick``. Runtime: about 20-40 s on 2 free
    CPU cores, 2-3 min when they are shared with other jobs (no GPU used: float64 CPU analysis).
    Measures exact block and dense spectra of H_eff, G, M at constructed collapsed equilibria and
    at the pseudo-collapsed init, and the threshold sweeps (12 grid points, bisection to a factor
    1.01; two extra H_eff evaluations per equilibrium cell).
    """
    return C4Config(preset="quick")


def small() -> C4Config:
    """Heads 64-256-128, N=8, 5 seeds; dense cross-check off (N·d = 512 > dense_max).

    Command: ``headgeom reproduce --only C4 --preset small``. Runtime: about 20-30 s on 2 CPU
    cores before the threshold sweep, which adds two H_eff evaluations per equilibrium cell (not
    re-measured; no GPU used). Measures the same quantities as quick at a width where the head is
    less tiny.
    """
    return C4Config(preset="small", d=64, hidden=256, k=128, n_samples=8)


def paper() -> C4Config:
    """The paper's projector 512-2048-2048 (bias-free Linears, no BN; docs/paper.md §3), N=4, 5 seeds.

    Command: ``headgeom reproduce --only C4 --preset paper``. Runtime, measured on 2 shared CPU cores
    (load 4-12, no GPU used): 1.4-86 s per cell, the equilibrium cells (two exact anchors of the sweep)
    the costly ones; 72 cells (four activations, two seeds, a 4-point cross-check sweep) took 1,179 s of
    cell time (BENCHMARKS.md), so the full 270 cells take about 1.3 h. Measures the same quantities at the
    paper's widths; the threshold is the closed form, the sweep only its cross-check.
    """
    return C4Config(preset="paper", d=512, hidden=2048, k=2048, n_samples=4, num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; one cell 10-30 s on 2 shared cores (measured)
RESOURCES = {"paper": Resources(cpus=4, mem_gb=8, time_min=30, expected_min=0.5)}


def _validate(config: C4Config) -> None:
    for name, values, allowed in (("states", config.states, STATES), ("readings", config.readings, READINGS),
                                  ("sweep_states", config.sweep_states, EQUILIBRIUM_STATES)):
        check_known(f"C4 config {name}", values, allowed)
    for name, (lo, hi) in (("residual_range", config.residual_range), ("angle_range", config.angle_range)):
        log_grid(lo, hi, max(config.sweep_points, 2))  # raises on a bad range
        if name == "angle_range" and hi >= math.pi:
            raise ValueError(f"C4 angle_range must stay below pi (the target would equal -u); got {hi!r}")
    if config.k <= config.d:
        raise ValueError(f"C4 needs an expander head (k > d) for equilibria with rho != 0; got d={config.d}, k={config.k}")


def cells(config: C4Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per activation × state × reading × seed."""
    _validate(config)
    return seeded_cells("C4", [{"activation": a, "state": s, "reading": r}
                               for a in config.activations for s in config.states for r in config.readings],
                        seeds, default=config.seeds)


def build_head(config: C4Config, activation: str, seed: int, weight_scale: float = 1.0) -> ProjectionHead:
    """Linear(d→hidden) → act → Linear(hidden→k) in float64, eval mode. The same seed gives the
    same Linear weights for every activation, so activations are compared on one draw."""
    torch.manual_seed(seed)
    head = ProjectionHead(HeadSpec((config.d, config.hidden, config.k), activation=activation, bias=config.bias),
                          dtype=torch.float64).eval()
    if weight_scale != 1.0:
        scale_linear_weights_(head, weight_scale)
    return head


def _kink_distance(head: ProjectionHead, z: torch.Tensor) -> float:
    """min |pre-activation| over the hidden units (how far a ReLU head is from its kinks)."""
    first = head.layers[0]
    with torch.no_grad():
        return float(first(z).abs().min())


def _point_magnitude(point, magnitude: str) -> float:
    """Mean over samples of ‖u_i − c_i‖ (``residual``) or ∠(u_i, c_i) in radians (``angle``)."""
    if magnitude == "residual":
        return float((point.u - point.target).norm(dim=1).mean())
    cos = torch.nn.functional.cosine_similarity(point.u, point.target, dim=1).clamp(-1.0, 1.0)
    return float(torch.arccos(cos).mean())


def _primary(sweep: dict[str, Any]) -> tuple[float | None, str]:
    """The cell's threshold: the closed form (exact), or the sweep's bisection where A is singular."""
    if sweep["closed_form_status"] == A_SINGULAR:
        return sweep["threshold"], f"{A_SINGULAR}: sweep {sweep['status']}"
    return sweep["threshold_closed_form"], sweep["closed_form_status"]


def _state_ratio(g: torch.Tensor, m: torch.Tensor, floor_g: float) -> float | None:
    """max over blocks of r_i = λ_max(−G_i^{-1/2} M_i G_i^{-1/2}): the state sits at r times the threshold of its
    own ray G + t·M (past it when r > 1); None when some block of G is not positive definite beyond its floor."""
    lam, r = pullback_and_ratio(g, m)  # one eigendecomposition of G serves both
    if float(lam.min()) <= floor_g or bool(r.isnan().any()):
        return None
    return float(r.max())


def run_cell(config: C4Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Spectra of H_eff, G and M for one cell; the keys of ``METRIC_KEYS``."""
    act, state, reading, seed = cell["activation"], cell["state"], cell["reading"], int(cell["seed"])
    if state not in STATES or reading not in READINGS:
        raise ValueError(f"C4 cell {cell}: state must be one of {STATES} and reading one of {READINGS}")
    objective = OBJECTIVE_OF_READING[reading]
    scale = 1.0 if state == "equilibrium" else config.pseudo_scale
    head = build_head(config, act, seed, scale)
    gen = torch.Generator().manual_seed(10_000 + seed)
    n, d = config.n_samples, config.d
    if state == "pseudo-collapsed":
        z = config.z_scale * torch.randn(n, d, generator=gen, dtype=torch.float64)
        point = pseudo_collapsed_point(head, z, objective, view_noise=config.view_noise, generator=gen)
    else:
        z_bar = config.z_scale * torch.randn(d, generator=gen, dtype=torch.float64)
        point = collapsed_equilibrium(head, z_bar, n, objective, residual=config.mse_residual,
                                      angle=config.cosine_angle, generator=gen)
    res = equilibrium_residual(head, point)
    magnitude = MAGNITUDE_OF_READING[reading]
    sweep = None
    if state in config.sweep_states:
        lo, hi = config.residual_range if magnitude == "residual" else config.angle_range
        sweep = threshold_sweep(head, z_bar, n, reading, log_grid(lo, hi, config.sweep_points), seed=20_000 + seed,
                                rel_floor=config.rel_floor, rel_tol=config.threshold_rel_tol)
    eh = effective_hessian(head, point.loss(), point.z, reading=ENGINE_READING[reading],
                           max_dense=max(config.dense_max, 1))
    h, g, m = eh.decomposed_blocks()
    s_h, s_g, s_m = (spectrum(x, config.rel_floor) for x in (h, g, m))
    # ‖X‖_F² = Σλ² for symmetric X: the Frobenius ratios come from the eigenvalues, no extra SVDs
    fro = {name: float(sp.eigenvalues.square().sum().sqrt()) for name, sp in (("H", s_h), ("G", s_g), ("M", s_m))}
    scale_h = max(abs(s_h.lambda_min), abs(s_h.lambda_max))
    out: dict[str, Any] = {
        "objective": objective, "N": n, "d": d, "k": config.k, "hidden": config.hidden, "weight_scale": scale,
        "null_dim": point.null_dim, "equilibrium": bool(res["relative"] <= config.equilibrium_tol),
        "grad_z_norm": res["grad_norm"], "grad_z_rel": res["relative"], "rho_norm": res["rho_norm"],
        "jac_norm": res["jac_norm"], "rho_design_error": res["rho_design_error"],
        "u_norm_mean": float(point.u.norm(dim=1).mean()), "kink_distance": _kink_distance(head, point.z),
        "floor": s_h.floor, "lambda_min_H": s_h.lambda_min, "lambda_max_H": s_h.lambda_max,
        "n_negative_H": s_h.n_negative, "n_zero_H": s_h.n_zero,
        "lambda_min_G": s_g.lambda_min, "lambda_max_G": s_g.lambda_max, "n_negative_G": s_g.n_negative,
        "lambda_min_M": s_m.lambda_min, "lambda_max_M": s_m.lambda_max, "n_negative_M": s_m.n_negative,
        "M_fro": fro["M"],
        "M_ratio_fro": fro["M"] / fro["H"] if fro["H"] > 0 else None,
        "G_ratio_fro": fro["G"] / fro["H"] if fro["H"] > 0 else None,
        "lambda_min_rel_H": s_h.lambda_min / scale_h if scale_h > 0 else 0.0,
        "dense": False, "dense_lambda_min_H": None, "dense_n_negative_H": None,
        "dense_block_gap": None, "dense_offblock_max": None,
        "magnitude": magnitude, "point_magnitude": _point_magnitude(point, magnitude),
        "sweep_grid": sweep and sweep["grid"], "sweep_lambda_min": sweep and sweep["lambda_min"],
        "sweep_floor": sweep and sweep["floor"], "threshold_sweep": sweep and sweep["threshold"],
        "threshold_sweep_status": sweep and sweep["status"], "threshold_rel_tol": config.threshold_rel_tol,
        "threshold": sweep and _primary(sweep)[0], "threshold_status": sweep and _primary(sweep)[1],
        "threshold_ratio": _state_ratio(g, m, s_g.floor),
    }
    if n * d <= config.dense_max:
        full = eh.dense()
        s_full = spectrum(full, config.rel_floor)
        blocks = full.reshape(n, d, n, d)
        off = blocks.clone()
        ar = torch.arange(n)
        off[ar, :, ar, :] = 0.0
        lam_blocks = torch.sort(s_h.eigenvalues.reshape(-1)).values
        out.update({
            "dense": True, "dense_lambda_min_H": s_full.lambda_min, "dense_n_negative_H": s_full.n_negative,
            "dense_block_gap": float((s_full.eigenvalues - lam_blocks).abs().max()) / max(scale_h, 1e-300),
            "dense_offblock_max": float(off.abs().max()),
        })
    return out


# ---------------------------------------------------------------- summary (apart from computing)
def _group(results: list[tuple[dict, dict]]) -> dict[tuple[str, str, str], list[dict]]:
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for cell, metrics in results:
        groups.setdefault((cell["state"], cell["reading"], cell["activation"]), []).append(metrics)
    return groups


def _pm(ms: list[dict], key: str) -> str:
    return mean_std_text(m.get(key) for m in ms)


def _has_threshold(m: dict) -> bool:
    return m.get("threshold") is not None


def _thresholds(ms: list[dict], magnitude: str) -> dict[str, Any]:
    """Median and spread over seeds of the finite thresholds, with how many seeds had one."""
    vals = [float(m["threshold"]) for m in ms if _has_threshold(m)]
    statuses = sorted({str(m.get("threshold_status")) for m in ms})
    what = f"{magnitude} at which lambda_min(H_eff) reaches 0 (closed form)"
    if not vals:
        return {"value": None, "n": len(ms), "spread": None, "n_with_threshold": 0, "what": what,
                "status": ", ".join(statuses)}
    out = measured(vals, what=what, n_with_threshold=len(vals), n_seeds=len(ms), status=", ".join(statuses))
    return out.replace(mean=out["value"], value=statistics.median(vals),
                       spread_kind="median over the seeds with a threshold; spread = std (ddof=1)")


def _setting(config: C4Config, state: str, reading: str, acts: list[str]) -> dict[str, Any]:
    return {"objective": OBJECTIVE_OF_READING[reading.split(" ")[0]],
            "head": f"{config.d}-{config.hidden}-{config.k}" + ("" if config.bias else ":nobias")
            + f" x {{{', '.join(acts)}}}", "reading": reading, "preset": config.preset, "state": state,
            "N": config.n_samples, "weight_scale": 1.0 if state == "equilibrium" else config.pseudo_scale,
            "reduction": "batch mean (per-sample blocks carry 1/N)"}


COINCIDE_TOL = 1e-8  # |λ(ambient) − λ(tangential)| / max|λ| at a cosine equilibrium: equal up to round-off


def _lemma_claim(config: C4Config, groups: dict, state: str, readings: tuple[str, ...]) -> Row | None:
    """Per equilibrium state and loss: "M has a negative direction ⇒ a finite threshold" (an identity,
    :mod:`headgeom.geometry.linalg.threshold`); for the cosine loss the ambient and tangential readings are one row,
    since they coincide at an equilibrium, and their coincidence is checked in the same row."""
    acts = [a for a in config.activations if a not in NON_SMOOTH and any((state, r, a) in groups for r in readings)]
    if not acts:
        return None
    first = readings[0]
    magnitude = MAGNITUDE_OF_READING[first]
    meas: dict[str, Any] = {}
    broken = []
    for a in acts:
        ms = groups.get((state, first, a), [])
        for m in ms:
            if m["n_negative_M"] > 0 and not _has_threshold(m) and not str(m.get("threshold_status")).startswith(A_SINGULAR):
                broken.append(f"{a} seed with n_negative(M) = {m['n_negative_M']} and no threshold")
        meas[f"threshold[{a}]"] = _thresholds(ms, magnitude)
        meas[f"frac_seeds_M_negative[{a}]"] = measured([float(m["n_negative_M"] > 0) for m in ms],
                                                     what="seeds where M has a direction below -floor")
    gaps = []
    if len(readings) > 1:
        for a in config.activations:
            for x, y in zip(groups.get((state, readings[0], a), []), groups.get((state, readings[1], a), [])):
                scale = max(abs(x["lambda_min_H"]), abs(x["lambda_max_H"]), 1e-300)
                gaps.append(abs(x["lambda_min_H"] - y["lambda_min_H"]) / scale)
                if x.get("threshold") is not None and y.get("threshold") is not None:
                    gaps.append(abs(x["threshold"] - y["threshold"]) / max(abs(x["threshold"]), 1e-300))
        meas["readings_gap"] = measured(max(gaps) if gaps else float("nan"), n=len(gaps),
                                        what="max relative gap of lambda_min(H_eff) and of the threshold between "
                                             "the ambient and tangential readings")
        if gaps and max(gaps) > COINCIDE_TOL:
            broken.append(f"ambient and tangential differ by {max(gaps):.3g} (relative)")
    label = " = ".join(readings) + (" (they coincide at a cosine equilibrium)" if len(readings) > 1 else "")
    coincide = ("; and the ambient and tangential readings give the same lambda_min(H_eff) and threshold to "
                f"{COINCIDE_TOL:g} (relative): Euler's identity for the 0-homogeneous -cos gives P H P - H = "
                "(u^ rho^T + rho u^T)/|u|, which J^T rho = 0 annihilates in J^T(.)J") if len(readings) > 1 else ""
    verdict = construction_verdict(broken, f"threshold[{acts[0]}]")
    return Row(
        id="C4", statement="lemma: where M has a negative direction, H_eff = G + tM turns indefinite at a finite t",
        setting=_setting(config, state, label, acts), measured=meas, headline=verdict.headline,
        verdict=verdict.outcome, evidence=IDENTITY,
        criterion=("holds by construction: if v^T M v < 0 then v^T (G + tM) v < 0 for t > v^T G v / (-v^T M v), "
                      "and with rho drawn sign-symmetrically M has such a direction almost surely, so a finite "
                      "threshold exists; never counted as support. Threshold in closed form (t* = 1/lambda_max"
                      "(-G^-1/2 M G^-1/2) per block, the minimum over blocks; the angle arctan t* under the cosine "
                      f"loss); a bisection sweep over a {config.sweep_points}-point log grid is the tests' cross-check"
                   + coincide + ". A failure is a bug" + (f": {'; '.join(broken)}" if broken else "")),
    )


def _init_claim(config: C4Config, groups: dict, reading: str) -> Row | None:
    """The test at the state training starts from (the paper's pseudo-collapsed init): do smooth heads have
    negative curvature that M injects into a positive semi-definite G, i.e. is the state past its own threshold?"""
    state = "pseudo-collapsed"
    acts = [a for a in config.activations if (state, reading, a) in groups]
    smooth = [a for a in acts if a not in NON_SMOOTH]
    if not smooth:
        return None
    meas: dict[str, Any] = {}
    fractions: dict[str, float | None] = {}
    for a in acts:
        ms = groups[(state, reading, a)]
        usable = [m for m in ms if m["n_negative_G"] == 0]  # G ⪰ 0: a negative eigenvalue of H_eff is M's doing
        past = [float(m["n_negative_H"] > 0) for m in usable]
        if a in smooth:
            fractions[a] = sum(past) / len(past) if past else None
        meas[f"frac_seeds_past_threshold[{a}]"] = measured(past if past else float("nan"), n=len(past),
                                                           what="seeds with lambda_min(H_eff) < -floor among those "
                                                                "with G PSD", seeds_G_indefinite=len(ms) - len(usable))
        meas[f"threshold_ratio[{a}]"] = measured([m["threshold_ratio"] for m in ms if m.get("threshold_ratio") is not None]
                                                 or float("nan"), what="lambda_max(-G^-1/2 M G^-1/2): the state's "
                                                 "residual over its own threshold (> 1: past it)")
        meas[f"lambda_min_H[{a}]"] = measured([m["lambda_min_H"] for m in ms])
        meas[f"lambda_min_G[{a}]"] = measured([m["lambda_min_G"] for m in ms])
    meas["min_frac_past_threshold"] = measured(min((f for f in fractions.values() if f is not None), default=float("nan")),
                                               n=len(smooth), what="smallest fraction over the smooth activations")
    maj = config.majority
    verdict = past_threshold_verdict({a: fractions.get(a) for a in smooth}, maj, "min_frac_past_threshold")
    why = {"ambient": "the exact Hessian of the cosine loss; away from an equilibrium u is not parallel to its target "
                      "and this reading is indefinite for any head, so seeds whose G is indefinite cannot attribute "
                      "negative curvature to M and are left out (counted)",
           "tangential": "the Riemannian Hessian of the cosine loss on the sphere, G = J^T (cos theta P/|u|^2) J / N is "
                         "PSD wherever cos theta > 0",
           "mse": "the collapse theorem's MSE premise as a loss (G = J^T J / N is PSD by construction)"}[reading]
    return Row(
        id="C4", statement=("Thm 4.1 at the state training starts from (the paper's pseudo-collapsed init): smooth "
                            "heads have negative curvature injected by M, i.e. the state is past its own threshold"),
        setting=_setting(config, state, reading, acts), measured=meas, headline=verdict.headline,
        verdict=verdict.outcome, evidence=TEST,
        criterion=(f"per seed with G PSD (no eigenvalue below -floor, floor = {config.rel_floor:g} * max|lambda|): "
                      "the state is past its own threshold when lambda_min(H_eff) < -floor (equivalently the ratio "
                      "lambda_max(-G^-1/2 M G^-1/2) > 1, reported as threshold_ratio); supported if every smooth "
                      f"activation ({', '.join(smooth)}) is past it in >= {maj:.0%} of its usable seeds; not supported if a "
                      "smooth activation is past it in none; inconclusive otherwise or when a smooth activation has no "
                      f"usable seed. Reading: {why}. Linear and ReLU heads (M = 0) are reported beside, not judged: they "
                   "cannot be past a threshold. Magnitudes are compared within this state only"),
    )


def _non_smooth_claim(config: C4Config, groups: dict, state: str) -> Row | None:
    """The MSE loss's linear/ReLU branch at ``state``: H_eff = G = JᵀJ/N ⪰ 0 since M ≡ 0 (an identity);
    None when neither head ran under that reading."""
    acts = [a for a in NON_SMOOTH if (state, "mse", a) in groups]
    if not acts:
        return None
    cells_here = [m for a in acts for m in groups[(state, "mse", a)]]
    verdict = construction_verdict([f"n_negative(H_eff) = {m['n_negative_H']}" + (", a threshold in range"
                                                                              if _has_threshold(m) else "")
                                    for m in cells_here if m["n_negative_H"] != 0 or _has_threshold(m)],
                                   f"lambda_min_H[{acts[0]}]")
    meas: dict[str, Any] = {}
    for a in acts:
        ms = groups[(state, "mse", a)]
        if all(m.get("threshold_status") is not None for m in ms):
            meas[f"threshold[{a}]"] = _thresholds(ms, "residual")
        meas[f"lambda_min_H[{a}]"] = measured([m["lambda_min_H"] for m in ms])
        meas[f"n_negative_H[{a}]"] = measured([m["n_negative_H"] for m in ms])
        meas[f"M_fro[{a}]"] = measured([m["M_fro"] for m in ms], what="‖M‖_F (0 for linear; ReLU off its kinks)")
    return Row(
        id="C4", statement=("Thm 4.1, linear branch under the MSE premise: with ∇²_u L = I/N, G = JᵀJ/N ⪰ 0 "
                            "and M ≡ 0 (linear; ReLU away from its kinks), so H_eff ⪰ 0"),
        setting={"objective": "mse", "head": f"{config.d}-{config.hidden}-{config.k}"
                    + ("" if config.bias else ":nobias") + f" x {{{', '.join(acts)}}}", "reading": "mse",
                    "engine_reading": ENGINE_READING["mse"], "preset": config.preset, "state": state, "N": config.n_samples,
                    "weight_scale": 1.0 if state == "equilibrium" else config.pseudo_scale,
                 "reduction": "batch mean (per-sample blocks carry 1/N)"},
        measured=meas, verdict=verdict.outcome, evidence=IDENTITY, headline=verdict.headline,
        criterion=(f"holds by construction; supported if n_negative(H_eff) = 0 (lambda < -floor, floor = "
                      f"{config.rel_floor:g} * max|lambda|) in every seed of {', '.join(acts)}, at residual "
                      f"{config.mse_residual:g} and everywhere on the sweep of [{config.residual_range[0]:g}, "
                   f"{config.residual_range[1]:g}] (no threshold in range); not supported (a bug) otherwise"),
    )


def _table(config: C4Config, groups: dict, state: str) -> Table:
    cols = [("n_neg(H)", "n_negative_H"), ("λ_min(H)", "lambda_min_H"), ("λ_min(G)", "lambda_min_G"),
            ("λ_min(M)", "lambda_min_M"), ("‖M‖_F/‖H‖_F", "M_ratio_fro"), ("‖∇_z L‖", "grad_z_norm"),
            ("‖∇_z L‖ rel", "grad_z_rel")]
    table = Table(["activation", "reading", *(c for c, _ in cols), "n"],
                  title=f"C4 {state}: spectra of H_eff = G + M (mean ± std over seeds; blocks carry 1/N)")
    for a in config.activations:
        for r in config.readings:
            ms = groups.get((state, r, a))
            if ms:
                table.add(a, r, *(_pm(ms, k) for _, k in cols), len(ms))
    return table


def summarize(config: C4Config, results: list[tuple[dict, dict]]) -> Summary:
    """Claims per equilibrium state × reading, a table per state, the λ_min figure, findings."""
    groups = _group(results)
    cosine = tuple(r for r in ("ambient", "tangential") if r in config.readings)
    claims = []
    for st in (s for s in config.states if s in EQUILIBRIUM_STATES):
        for readings in (cosine, ("mse",) if "mse" in config.readings else ()):
            if readings and (row := _lemma_claim(config, groups, st, readings)) is not None:
                claims.append(row)
    claims += [c for st in config.states if st in EQUILIBRIUM_STATES
               if (c := _non_smooth_claim(config, groups, st)) is not None]
    claims += [c for r in config.readings if (c := _init_claim(config, groups, r)) is not None]
    tables = [_table(config, groups, st) for st in config.states if any(k[0] == st for k in groups)]
    notes = [f"floor = {config.rel_floor:g} * max|lambda| of the whole block-diagonal H_eff; λ < -floor counts as negative.",
             "ambient/tangential readings use the SimSiam negative cosine loss; mse is the MSE loss mean_i "
             "1/2|u_i - c_i|^2 read ambient (its own Hessian I/N and its own rho = (u - c)/N)."]
    for st in config.states:
        for r in ("ambient", "tangential"):
            lin = groups.get((st, r, "linear"))
            if lin:
                neg = sum(m["n_negative_H"] > 0 for m in lin)
                notes.append(f"finding: linear head, {r} cosine reading, state {st}: H_eff has a negative eigenvalue "
                             f"in {neg}/{len(lin)} seeds (min λ_min {min(m['lambda_min_H'] for m in lin):.3g}).")
        gaps = [abs(a["lambda_min_H"] - t["lambda_min_H"]) / max(abs(a["lambda_max_H"]), 1e-300)
                for act in config.activations
                for a, t in zip(groups.get((st, "ambient", act), []), groups.get((st, "tangential", act), []))]
        if gaps:
            notes.append(f"state {st}: max |λ_min(ambient) − λ_min(tangential)| / λ_max = {max(gaps):.3g}. At a cosine "
                         "equilibrium the two readings coincide exactly: Euler's identity for the 0-homogeneous −cos "
                         "gives P H P − H = (û ρᵀ + ρ ûᵀ)/‖u‖, which Jᵀρ = 0 annihilates in Jᵀ(·)J.")
        for a in NON_SMOOTH:
            ms = [m for r in config.readings for m in groups.get((st, r, a), [])]
            if ms:
                notes.append(f"{a} head, state {st}: max ‖M‖_F = {max(m['M_fro'] for m in ms):.3g} "
                             f"(min distance of a pre-activation to a kink {min(m['kink_distance'] for m in ms):.3g}).")
    pseudo = [m for k, ms in groups.items() if k[0] == "pseudo-collapsed" for m in ms]
    if pseudo:
        notes.append(f"pseudo-collapsed init is not an equilibrium: ‖∇_z L‖ rel ranges "
                     f"{min(m['grad_z_rel'] for m in pseudo):.3g} .. {max(m['grad_z_rel'] for m in pseudo):.3g}.")
    for st in config.sweep_states:
        for r in config.readings:
            parts = []
            for a in config.activations:
                ms = [m for m in groups.get((st, r, a), []) if m.get("threshold_status") is not None]
                if ms:
                    thr = [m["threshold"] for m in ms if _has_threshold(m)]
                    parts.append(f"{a} {statistics.median(thr):.3g} ({len(thr)}/{len(ms)} seeds)" if thr
                                 else f"{a} {NONE_IN_RANGE}")
            if parts:
                notes.append(f"threshold in {MAGNITUDE_OF_READING[r]} ({st}, {r}; median over seeds, closed form): "
                             + "; ".join(parts) + ".")
    heads = f"{config.d}-{config.hidden}-{config.k}"
    figures = [("lambda_min", lambda: plots.lambda_min(groups, config.states, config.readings, config.activations,
                                                       config.rel_floor, heads))]
    if any(m.get("sweep_grid") for ms in groups.values() for m in ms):
        figures.append(("lambda_min_sweep", lambda: plots.lambda_min_sweep(
            groups, config.sweep_states, config.readings, config.activations, config.rel_floor, MAGNITUDE_OF_READING,
            set(), heads)))
    return Summary(claims=claims, tables=tables, figures=figures, notes=notes)


EXPERIMENT = register(Experiment(
    id="C4",
    title="Collapse instability at constructed collapsed equilibria (Thm 4.1)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
))

"""C2, Prop 3.3 (curvature barrier): Riemann curvature of g_L = ∇²_u L on slices through head outputs.

Setting (docs/paper.md §2 C2). u0 = h(z) (N, K) is the output of a small random smooth head at
z ~ N(0, I); the other view (the stop-gradient target of the cosine loss, the fixed second view
of InfoNCE / VICReg / Barlow Twins) is h(z + view_noise·ε). k = N·K. A slice is
u(x) = u0 + B x with B (k, m) orthonormal, and the metric on it is g(x) = Bᵀ ∇²_u L(u0 + Bx) B.

- Readings (``headgeom.geometry.engine.readings``), one per setting ``"objective:reading"``:
  ``negative_cosine:tangential`` (P H P, positive definite on the sphere's tangent where
  cos(u_i, c_i) > 0) and ``negative_cosine:ambient`` (the exact, indefinite Hessian);
  ``info_nce`` (u the anchors, block-diagonal), ``vicreg``, ``barlow_twins`` ambient; ``mse``
  (½‖u − c‖² mean: g = I/N constant) is the flat control.
- Indefinite g: ∇²_u L is indefinite for all but mse (cosine and InfoNCE are 0-homogeneous per
  row, Barlow Twins per feature, VICReg's variance hinge is concave). With ``slice_mode =
  "positive"`` (default) B is Haar-distributed inside the span of the eigenvectors of the
  reading's k×k Hessian at u0 with λ > rel_floor·max|λ| — the positive part, so g(0) is a
  Riemannian metric — and with ``"random"`` B is Haar in R^k, redrawn (≤ max_slice_draws) until
  g(0) is positive definite. Each cell reports the Hessian's negative/zero eigenvalue counts at
  u0 and how many evaluation points of the slice have an indefinite g (their isotropy error is
  still reported; it is ≥ 1 there).
- Curvature at x = 0 by two routes (``headgeom.theory.curvature``): exact (jacfwd for Γ and ∂Γ,
  i.e. 3rd and 4th derivatives of L) and central differences of g of order ``fd_order`` with
  step h = fd_step·ℓ, ℓ = ‖u0‖_F/√N the RMS row norm. route_rel_diff = max|ΔR^a_bcd| / max|R^a_bcd|.
- Isotropy barrier: W = g(0)^{-1/2}; error ‖Wᵀ g(r d) W − I‖₂ (spectral norm) at radii r = ρ·ℓ
  along n_directions random unit d. Caveat: this error measures how g varies in the slice's affine
  coordinates (what no constant W, i.e. no linear head, can undo; a flat metric in curvilinear
  coordinates varies too); curvature, a coordinate invariant, is what rules out every head,
  linear or not. Both are reported.

Evidence kind of every row: ``identity`` (:mod:`headgeom.claims.evidence`). That a constant linear
map cannot flatten a curved metric is a mathematical fact (curvature is invariant under a change of
coordinates, and a constant W only changes coordinates), so the rows check the code's curvature
routes and isotropy error, never the paper: a "not supported" here would be a bug.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch.func import vmap

from headgeom.claims.curvature_barrier import barrier_verdict, iso_key
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.heads import head_from
from headgeom.launch.resources import Resources
from headgeom.objectives import analysis_loss
from headgeom.claims.estimates import format_estimate
from headgeom.claims.evidence import IDENTITY
from headgeom.report.plots import c2_curvature as plots
from headgeom.report.table import Table
from headgeom.runs.cell import seeded_cells
from headgeom.theory.curvature import (curvature_exact, curvature_fd, is_positive_definite, isotropy_error,
                                       random_slice_basis, route_difference, slice_metric, whitener)

STATEMENT = ("Prop 3.3: if the loss metric g_L(u) = ∇²_u L has nonzero Riemann curvature, no constant W "
             "makes H_eff isotropic everywhere")
SETTINGS = ("negative_cosine:tangential", "negative_cosine:ambient", "info_nce:ambient", "vicreg:ambient",
            "barlow_twins:ambient", "mse:ambient")
FLAT = "mse"
SLICE_MODES = ("positive", "random")
METRIC_KEYS = (
    "setting", "objective", "reading", "m", "k", "N", "K", "seed", "slice_mode", "slice_draws", "slice_found",
    "row_scale", "fd_step", "fd_order", "hess_n_negative", "hess_n_zero", "ambient_n_negative",
    "g0_lambda_min", "g0_lambda_max", "scalar_exact", "scalar_fd", "gaussian_exact", "max_abs_R_exact",
    "max_abs_R_fd", "max_abs_R_frame", "route_abs_diff", "route_rel_diff", "cancellation",
    "radii_rel", "radii", "iso_error_max", "iso_error_mean", "n_points", "n_points_indefinite", "iso_slope",
    "seconds",
)


@dataclass(frozen=True)
class C2Config:
    """Every setting of C2 (see the module docstring)."""

    preset: str = "quick"
    head: str = "8-32-4:silu"  # d-hidden-K, smooth so that u0 are generic head outputs
    n_samples: int = 4  # N; k = N·K
    view_noise: float = 0.3  # other view / target = h(z + view_noise·ε)
    settings: tuple[str, ...] = SETTINGS
    slice_dims: tuple[int, ...] = (2, 3)  # m
    slice_mode: str = "positive"
    max_slice_draws: int = 50  # slice_mode="random": redraws until g(0) is positive definite
    seeds: int = 3
    fd_step: float = 2e-3  # h = fd_step·ℓ; order 4 balances truncation h⁴ and round-off eps/h² near here
    fd_order: int = 4
    radii: tuple[float, ...] = (0.0, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)  # ρ, r = ρ·ℓ
    n_directions: int = 3
    rel_floor: float = 1e-10  # sign of an eigenvalue only beyond rel_floor·max|λ| (docs/paper.md §4 pitfall 2)
    # criterion
    route_tol: float = 1e-4  # routes agree: max route_rel_diff below this
    curved_min: float = 1e-8  # curved: max|R| / (max|∂Γ| + max|Γ|²) above this (flat: round-off ~1e-16)
    growth_min: float = 1e-3  # isotropy error at the largest radius above this
    origin_tol: float = 1e-10  # isotropy error at x0 below this
    flat_tol: float = 1e-10  # flat control: max|R| and isotropy error below this


def quick() -> C2Config:
    """Head 8-32-4 SiLU, N=4 (k=16), m=2,3, 6 settings × 3 seeds (36 cells), 3 directions × 6 radii.

    Command: ``headgeom reproduce --only C2 --preset quick``. Runtime: about 25 s of CPU time, 45 s
    wall on 2 shared CPU cores (no GPU needed: float64 autograd on m ≤ 3). Measures curvature by
    both routes, their agreement, and the isotropy error of W = g(0)^{-1/2} against distance,
    curved losses vs the flat MSE control.
    """
    return C2Config(preset="quick")


def small() -> C2Config:
    """Head 16-64-8 SiLU, N=8 (k=64), m=2,3,4, 5 seeds, 4 directions (90 cells).

    Command: ``headgeom reproduce --only C2 --preset small``. Runtime: about 5-10 minutes on 2 CPU
    cores (an m = 4 VICReg cell takes ~15 s). Measures the same quantities on larger slices
    through wider heads.
    """
    return C2Config(preset="small", head="16-64-8:silu", n_samples=8, slice_dims=(2, 3, 4), seeds=5,
                    n_directions=4)


def paper() -> C2Config:
    """Head 32-128-16 SiLU, N=16 (k=256), m=2..6 (slice dimensions 2 to 6), 5 seeds, 6 directions (150 cells).

    Command: ``headgeom reproduce --only C2 --preset paper``. Runtime: roughly 30-60 minutes on
    2 CPU cores (an m = 6 cell takes ~30 s: 6⁴ fourth-derivative entries and 265 stencil points).
    Measures the same quantities.
    """
    return C2Config(preset="paper", head="32-128-16:silu", n_samples=16, slice_dims=(2, 3, 4, 5, 6), seeds=5,
                    n_directions=6)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; an m = 6 cell about 30 s on 2 cores (measured)
RESOURCES = {"paper": Resources(cpus=2, mem_gb=4, time_min=30, expected_min=0.5)}


def _parse_setting(setting: str) -> tuple[str, str]:
    objective, _, reading = setting.partition(":")
    return objective, reading or "ambient"


def _validate(config: C2Config) -> None:
    if config.slice_mode not in SLICE_MODES:
        raise ValueError(f"C2 slice_mode must be one of {SLICE_MODES}; got {config.slice_mode!r}")
    if not config.radii or config.radii[0] != 0.0 or any(b <= a for a, b in zip(config.radii, config.radii[1:])):
        raise ValueError(f"C2 radii must start at 0.0 and increase; got {config.radii}")
    for s in config.settings:
        _parse_setting(s)


def cells(config: C2Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per setting × slice dimension m × seed."""
    _validate(config)
    return seeded_cells("C2", [{"setting": s, "m": m} for s in config.settings for m in config.slice_dims], seeds,
                        default=config.seeds)


def head_outputs(config: C2Config, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(u0, other) (N, K) float64: h(z) and h(z + view_noise·ε); the same draw for every setting of a seed."""
    torch.manual_seed(seed)
    head = head_from(config.head, dtype=torch.float64).eval()
    gen = torch.Generator().manual_seed(20_000 + seed)
    z = torch.randn(config.n_samples, head.in_dim, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        return head(z), head(z + config.view_noise * torch.randn(z.shape, generator=gen, dtype=torch.float64))


def _full_hessian(loss, u0: torch.Tensor, reading: str) -> torch.Tensor:
    k = u0.numel()
    eye = torch.eye(k, dtype=u0.dtype)
    return slice_metric(loss, u0, eye, reading)(torch.zeros(k, dtype=u0.dtype))  # B = I: the k×k Hessian


def _draw_slice(config: C2Config, loss, u0, reading, m, gen) -> tuple[torch.Tensor | None, int, torch.Tensor]:
    """(B or None, draws used, full Hessian of the reading at u0)."""
    hess = _full_hessian(loss, u0, reading)
    lam, vec = torch.linalg.eigh(hess)
    if config.slice_mode == "positive":
        pos = vec[:, lam > config.rel_floor * lam.abs().max()]
        if pos.shape[1] < m:
            return None, 1, hess
        return pos @ random_slice_basis(pos.shape[1], m, gen), 1, hess
    for draw in range(1, config.max_slice_draws + 1):
        b = random_slice_basis(u0.numel(), m, gen)
        if is_positive_definite(b.T @ hess @ b, config.rel_floor):
            return b, draw, hess
    return None, config.max_slice_draws, hess


def _counts(hess: torch.Tensor, rel_floor: float) -> tuple[int, int]:
    lam = torch.linalg.eigvalsh(hess)
    floor = rel_floor * float(lam.abs().max())
    return int((lam < -floor).sum()), int((lam.abs() <= floor).sum())


def run_cell(config: C2Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Curvature (both routes) and the isotropy barrier for one cell; the keys of ``METRIC_KEYS``."""
    t0 = time.perf_counter()
    setting, m, seed = cell["setting"], int(cell["m"]), int(cell["seed"])
    objective, reading = _parse_setting(setting)
    u0, other = head_outputs(config, seed)
    n, kk = u0.shape
    loss = analysis_loss(objective, other)
    gen = torch.Generator().manual_seed(30_000 + 100 * seed + m)
    basis, draws, hess = _draw_slice(config, loss, u0, reading, m, gen)
    ell = float(u0.norm()) / math.sqrt(n)
    neg, zero = _counts(hess, config.rel_floor)
    amb_neg = neg if reading == "ambient" else _counts(_full_hessian(loss, u0, "ambient"), config.rel_floor)[0]
    out: dict[str, Any] = {k: None for k in METRIC_KEYS}
    out.update({"setting": setting, "objective": objective, "reading": reading, "m": m, "k": u0.numel(),
                "N": n, "K": kk, "seed": seed, "slice_mode": config.slice_mode, "slice_draws": draws,
                "slice_found": basis is not None, "row_scale": ell, "fd_step": config.fd_step * ell,
                "fd_order": config.fd_order, "hess_n_negative": neg, "hess_n_zero": zero,
                "ambient_n_negative": amb_neg, "radii_rel": list(config.radii),
                "radii": [r * ell for r in config.radii]})
    if basis is None:
        out["seconds"] = time.perf_counter() - t0
        return out
    metric = slice_metric(loss, u0, basis, reading)
    x0 = torch.zeros(m, dtype=torch.float64)
    exact = curvature_exact(metric, x0)
    fd = curvature_fd(metric, x0, config.fd_step * ell, config.fd_order)
    abs_diff, rel_diff = route_difference(exact, fd)
    lam0 = torch.linalg.eigvalsh(exact.g)
    w = whitener(exact.g)
    dirs = torch.randn(config.n_directions, m, generator=gen, dtype=torch.float64)
    dirs = dirs / dirs.norm(dim=1, keepdim=True)
    radii = torch.tensor(out["radii"], dtype=torch.float64)
    gs = vmap(metric)((radii[:, None, None] * dirs[None]).reshape(-1, m))  # all points in one pass
    gs = gs.reshape(len(radii), config.n_directions, m, m)
    errs = [[isotropy_error(w, g) for g in row] for row in gs]
    n_indef = sum(not is_positive_definite(g, config.rel_floor) for row in gs for g in row)
    out.update({
        "g0_lambda_min": float(lam0[0]), "g0_lambda_max": float(lam0[-1]),
        "scalar_exact": exact.scalar, "scalar_fd": fd.scalar,
        "gaussian_exact": exact.gaussian if m == 2 else None,
        "max_abs_R_exact": float(exact.riemann.abs().max()), "max_abs_R_fd": float(fd.riemann.abs().max()),
        "max_abs_R_frame": float(exact.frame_riemann(w).abs().max()),
        "route_abs_diff": abs_diff, "route_rel_diff": rel_diff, "cancellation": exact.cancellation(),
        "iso_error_max": [max(e) for e in errs], "iso_error_mean": [sum(e) / len(e) for e in errs],
        "n_points": len(errs) * config.n_directions, "n_points_indefinite": n_indef,
        "iso_slope": _slope(config.radii, [max(e) for e in errs]),
        "seconds": time.perf_counter() - t0,
    })
    return out


def _slope(radii, errs) -> float | None:
    """Least-squares slope of log(error) against log(radius) over the nonzero radii (1: linear growth)."""
    pts = [(math.log(r), math.log(e)) for r, e in zip(radii, errs) if r > 0 and e > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


# ----------------------------------------------------------------------------- summary
def _vals(rows: list[dict[str, Any]], key: str, index: int | None = None) -> list[float]:
    out = []
    for r in rows:
        v = r.get(key)
        v = v[index] if (index is not None and v is not None) else v
        if v is not None:
            out.append(abs(float(v)) if key in ("scalar_exact", "gaussian_exact") else float(v))
    return out


def _fmt(xs: list[float]) -> str:
    if not xs:
        return "–"
    return format_estimate(measured(xs), spread_of_one=False)


def summarize(config: C2Config, results: list[tuple[dict[str, Any], dict[str, Any]]]) -> Summary:
    """Claims (one per curved setting, each judged with the flat control), a table and the figure."""
    rows = [m for _, m in results]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["setting"], []).append(r)
    flat_rows = [r for r in rows if r["objective"] == FLAT and r["slice_found"]]
    flat_vals = {"R": _vals(flat_rows, "max_abs_R_exact") or [float("nan")],
                 "iso": [max(r["iso_error_max"]) for r in flat_rows] or [float("nan")]}
    flat_r, flat_iso = (max(flat_vals["R"]), max(flat_vals["iso"])) if flat_rows else (None, None)
    rmax = config.radii[-1]
    criterion = (f"supported if, in every cell with a slice, the exact and finite-difference (order {config.fd_order}, "
                 f"h = {config.fd_step:g}·ℓ) routes agree (max|ΔR|/max|R| < {config.route_tol:g}), the curvature "
                 f"is nonzero beyond round-off (max|R|/(max|∂Γ|+max|Γ|²) > {config.curved_min:g}), and the "
                 f"spectral-norm isotropy error of W = g(0)^(-1/2) is < {config.origin_tol:g} at x0 and > "
                 f"{config.growth_min:g} at r = {rmax:g}·ℓ, while the flat control (mse) has max|R| and isotropy "
                 f"error < {config.flat_tol:g}; not supported if curved and routes agree but the error stays "
                 f"≤ {config.growth_min:g}; inconclusive otherwise (no slice, routes disagree, flat, or no control)")
    claims, notes = [], []
    table = Table(("setting", "cells (slice found)", "max route rel diff", "max abs R, g-frame", "abs scalar S",
                   "R / terms (min)", "iso err at x0 (max)", "iso err at r_max", "log-log slope", "indefinite pts",
                   "neg. eig. of ∇²L at u0"), title="C2: curvature and isotropy barrier")
    for setting, rs in by.items():
        found = [r for r in rs if r["slice_found"]]
        rel = _vals(found, "route_rel_diff")
        table.add(setting, f"{len(rs)} ({len(found)})", f"{max(rel):.2g}" if rel else "– (R = 0)",
                  _fmt(_vals(found, "max_abs_R_frame")), _fmt(_vals(found, "scalar_exact")),
                  f"{min(_vals(found, 'cancellation'), default=float('nan')):.2g}",
                  f"{max(_vals(found, 'iso_error_max', 0), default=float('nan')):.2g}",
                  _fmt(_vals(found, "iso_error_max", -1)), _fmt(_vals(found, "iso_slope")),
                  f"{sum(r['n_points_indefinite'] for r in found)}/{sum(r['n_points'] for r in found)}",
                  f"{_fmt(_vals(rs, 'hess_n_negative'))} of k={rs[0]['k']}")
        objective, reading = _parse_setting(setting)
        if objective == FLAT:
            continue
        verdict, decided_by, reason = barrier_verdict(config, rs, flat_r, flat_iso)
        claims.append(Row(
            id="C2", statement=STATEMENT,
            setting={"objective": objective, "reading": reading, "head": config.head, "N": config.n_samples,
                        "slice_dims": list(config.slice_dims), "slice_mode": config.slice_mode,
                        "preset": config.preset, "isotropy_norm": "spectral", "radius_unit": "ℓ = ‖u0‖_F/√N"},
            measured={
                "max_abs_R_frame": measured(_vals(found, "max_abs_R_frame")),
                "abs_scalar_curvature": measured(_vals(found, "scalar_exact")),
                "curvature_over_terms": measured(_vals(found, "cancellation")),
                "route_rel_diff": measured(rel, reduce="max is the criterion"),
                "iso_error_at_x0": measured(_vals(found, "iso_error_max", 0)),
                iso_key(config): measured(_vals(found, "iso_error_max", -1)),
                "iso_slope_loglog": measured(_vals(found, "iso_slope")),
                "flat_control_max_abs_R": measured(flat_vals["R"], reduce="max is the criterion"),
                "flat_control_iso_error": measured(flat_vals["iso"], reduce="max is the criterion"),
                "indefinite_point_fraction": measured([r["n_points_indefinite"] / r["n_points"] for r in found]),
                "slice_found_fraction": measured([float(r["slice_found"]) for r in rs]),
            },
            verdict=verdict, criterion=criterion, reason=reason, evidence=IDENTITY, headline=decided_by,
        ))
        notes.append(f"{setting}: {verdict} — {reason}.")
    notes[:0] = [
        f"g(x) = Bᵀ ∇²_u L(u0 + Bx) B on m = {list(config.slice_dims)} slices, k = N·K; "
        "the loss is a batch mean.",
        f"slice_mode = {config.slice_mode}: " + ("B lies in the positive eigenspace of the reading's Hessian at u0 "
                                                 "(its positive part), so g(0) is positive definite" if
                                                 config.slice_mode == "positive" else
                                                 "B is Haar in R^k, redrawn until g(0) is positive definite"),
        "Isotropy error is the spectral norm ‖Wᵀg(x)W − I‖₂ with W = g(0)^(-1/2), max over directions; "
        "in affine slice coordinates it measures how g varies (no constant W can undo that), while the "
        "curvature (coordinate invariant) rules out any head, linear or not.",
        "Curvature is at x0 only; n = cells (seeds × m); spread = std (ddof=1).",
    ]
    return Summary(claims=claims, tables=[table],
                   figures=[("isotropy_vs_distance", lambda: plots.isotropy_vs_distance(
                       by, config.radii, {s for s in by if _parse_setting(s)[0] == FLAT}))], notes=notes)


EXPERIMENT = register(Experiment(
    id="C2",
    title="Curvature barrier: Riemann curvature of the loss metric on slices (Prop 3.3)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
))

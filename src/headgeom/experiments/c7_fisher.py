"""C7, Thm 5.3 (Fisher information rank): rank(I_h) ≤ rank(I_z) − dim V_aug on C6's system.

The system per preset, its regimes and cells: :mod:`headgeom.theory.invariance_system` (shared with C6).

Observation model (Gaussian, isotropic, σ = ``sigma``; ranks do not depend on σ): the data
manifold's latent parameters θ = (c, ξ) ∈ R^{p+G} (content and group parameters, see
:mod:`headgeom.theory.invariance`) are observed through

    z̃ = f(x(θ)) + ε,  ε ~ N(0, σ² I_d)      ⇒  I_z(θ) = J_zᵀ J_z / σ²,   J_z = ∂f(x(θ))/∂θ  (d × (p+G))
    ũ = h(f(x(θ))) + ε, ε ~ N(0, σ² I_k)    ⇒  I_h(θ) = J_uᵀ J_u / σ²,   J_u = J_h J_z      (k × (p+G))

and, in representation space, ũ = h(z) + ε gives I_{u|z} = J_hᵀJ_h/σ² (d × d), the pullback metric G.
With respect to the input pixels instead of θ (reported beside, not judged): I_z^x = J_fᵀJ_f/σ² and
I_h^x = (J_h J_f)ᵀ(J_h J_f)/σ², whose ranks are those of J_f and J_h J_f.
V_aug in θ-space is span{e_ξ} (G directions), so the inequality is exact when h∘f is exactly
invariant (J_u e_ξ = 0) and the backbone is not (J_z e_ξ linearly independent). Numerical ranks:
eigenvalues of I above rel_tol · λ_max(I) (:func:`headgeom.geometry.invariance.fisher.fisher_rank`), at the
stated ``rel_tol`` and over a sweep of tolerances. The manifold's own rank, rank ∂x/∂θ = p + G, is
checked at the same tolerance (columns of ∂x/∂θ scaled to unit norm, so the check does not
depend on the units of c and ξ). Each cell (regime × seed) measures before and after training on the
very models C6 measures (the same cached training when both run in one process).

Measured runtime of ``headgeom reproduce --only C6,C7 --preset quick``: 50-72 s wall (17-20 s
CPU) on 2 CPU cores under load 9-10 from other jobs (C6 36-52 s, C7 4-6 s); details in :func:`quick`.

Evidence kind of every row (:mod:`headgeom.claims.evidence`): ``test``: whether the numerical Fisher
rank drops by dim V_aug after training could come out either way; the theorem's premise (h∘f
invariant, f not) is checked per seed inside the criterion, and seeds that miss it leave the row
inconclusive.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.func import jacrev, vmap

from headgeom.claims.fisher_rank import rank_bound_verdict
from headgeom.claims.row import Row
from headgeom.experiments.registry import Experiment, Summary, measured, register
from headgeom.geometry.invariance.fisher import GaussianObservation, fisher_rank, null_space_fraction, per_sample_jacobian
from headgeom.launch.resources import Resources
from headgeom.claims.estimates import format_estimate
from headgeom.claims.evidence import TEST
from headgeom.report.plots import c7_fisher as plots
from headgeom.report.table import Table
from headgeom.theory.invariance import STAGES, InvarianceSpec, PatternManifold, invariance_gap
from headgeom.theory.invariance_system import REGIME_FIELDS, REGIMES, cell_system, preset_system, regime_cells, regime_spec

STATEMENT = "Thm 5.3: rank(I_h) ≤ rank(I_z) − dim V_aug for Fisher information"
TOL_SWEEP = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-9)


@dataclass(frozen=True)
class C7Config:
    """Every setting of C7 (see the module docstring); ``system``: the preset's, as C6's
    (:data:`headgeom.theory.invariance_system.SYSTEMS`)."""

    preset: str = "quick"
    system: InvarianceSpec = field(default_factory=InvarianceSpec)
    regimes: tuple[str, ...] = REGIMES
    seeds: int = 3
    n_eval: int = 48
    sigma: float = 1.0  # observation noise; ranks are scale-free
    rel_tol: float = 1e-3  # Fisher eigenvalues above rel_tol · λ_max count towards the rank
    tol_sweep: tuple[float, ...] = TOL_SWEEP
    premise_max: float = 0.1  # premise (as C6): gap of h∘f ≤ this and gap of f > this
    majority: float = 0.8  # fraction of points per seed, and of seeds, a verdict needs
    num_threads: int | None = 1


def quick() -> C7Config:
    """The C6 quick system (12×12, p = 6, G = 2, f 144-64-16, h 16-32-16); 2 regimes × 3 seeds, 48 points.

    Command: ``headgeom reproduce --only C6,C7 --preset quick`` (C7 alone retrains the systems).
    Runtime: C6 + C7 together 50-72 s wall, 17-20 s CPU
    time (two runs; C6 36-52 s, C7 4-6 s reusing C6's trained systems, the rest start-up and report),
    on 2 CPU cores shared with other jobs (load average 9-10); per cell about 2 s training + 2.5 s analysis.
    No GPU used. Measures numerical ranks of I_z,
    I_h, I_{u|z} and of the manifold, the inequality per point, and null-space fractions of V_aug.
    """
    return C7Config(preset="quick", system=preset_system("quick"))


def small() -> C7Config:
    """The C6 small system; 2 regimes × 5 seeds, 96 points.

    Command: ``headgeom reproduce --only C6,C7 --preset small``. Runtime: C6 + C7 together 4.2 min wall, 68 s
    CPU time, on 2 CPU cores under load ~10 from other jobs (C6 176 s, C7 60 s).
    """
    return C7Config(preset="small", system=preset_system("small"), seeds=5, n_eval=96)


def paper() -> C7Config:
    """The C6 paper system; 2 regimes × 10 seeds, 128 points.

    Command: ``headgeom reproduce --only C6,C7 --preset paper``. Runtime: not measured
    (estimated 30-60 min for C6 + C7 on 2 CPU cores).
    """
    return C7Config(preset="paper", system=preset_system("paper"), seeds=10, n_eval=128, num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; 30-60 min for the 40 cells of C6 + C7 on 2 cores (estimated, not measured)
RESOURCES = {"paper": Resources(cpus=2, mem_gb=4, time_min=30, expected_min=1.5)}


def cells(config: C7Config, seeds: int | None = None) -> list[dict[str, Any]]:
    """One cell per regime × seed."""
    if not 0 <= config.rel_tol < 1 or any(not 0 <= t < 1 for t in config.tol_sweep):
        raise ValueError(f"C7 tolerances must lie in [0, 1); got rel_tol={config.rel_tol}, sweep={config.tol_sweep}")
    return regime_cells("C7", config.regimes, config.seeds if seeds is None else seeds)


def jacobians(backbone, head, manifold: PatternManifold, theta: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-point Jacobians w.r.t. θ of x (S², p+G), z = f(x) (d, p+G), u = h(z) (k, p+G); J_h (k, d); and
    J_f (d, S²) w.r.t. the input pixels (keys x, z, u, h, f)."""
    jx = per_sample_jacobian(lambda th: manifold.render(th).flatten(1), theta)
    jz = per_sample_jacobian(lambda th: backbone(manifold.render(th)), theta)
    ju = per_sample_jacobian(lambda th: head(backbone(manifold.render(th))), theta)
    with torch.no_grad():
        z = backbone(manifold.render(theta))
    jh = per_sample_jacobian(head, z)
    # w.r.t. the input pixels: J_f (d, S²) by reverse mode (d ≪ S²)
    images = manifold.render(theta).detach()
    shape = images.shape[1:]
    jf = vmap(jacrev(lambda v: backbone(v.reshape(1, *shape)).squeeze(0)))(images.flatten(1))
    return {"x": jx.detach(), "z": jz.detach(), "u": ju.detach(), "h": jh.detach(), "f": jf.detach()}


def manifold_coordinates(jac: dict[str, torch.Tensor], dim_aug: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Re-express the θ-Jacobians in coordinates orthonormal for the pixel metric on the manifold.

    J_x = Q R per point; θ' = R θ makes ∂x/∂θ' = Q orthonormal, so J_z' = J_z R⁻¹ and J_u' = J_u R⁻¹
    measure information per unit pixel displacement along the manifold. Exact ranks are unchanged;
    numerical ranks no longer depend on the units of c and ξ. Returns the new Jacobians and the unit
    augmentation directions R e_ξ / ‖R e_ξ‖ (N, G, p+G) in the new coordinates.
    """
    _, r = torch.linalg.qr(jac["x"])  # (N, m, m)
    m = r.shape[-1]
    eye = torch.eye(m, dtype=r.dtype).expand_as(r)
    r_inv = torch.linalg.solve_triangular(r, eye, upper=True)
    out = dict(jac, z=jac["z"] @ r_inv, u=jac["u"] @ r_inv)
    w = r[..., m - dim_aug:].transpose(-1, -2)  # (N, G, m): rows R e_ξ
    return out, w / w.norm(dim=-1, keepdim=True)


def rank_metrics(jac: dict[str, torch.Tensor], dim_aug: int, rel_tol: float, tol_sweep: tuple[float, ...],
                 sigma: float) -> dict[str, Any]:
    """Ranks, the inequality per point, and null-space fractions of V_aug, from the Jacobians.

    I_z and I_h are taken in the manifold-orthonormal coordinates of :func:`manifold_coordinates`;
    rank_Ix is the rank of ∂x/∂θ with unit columns (the manifold check, free of the units of c and ξ:
    p + G expected).
    """
    m = jac["z"].shape[-1]
    ortho, w_aug = manifold_coordinates(jac, dim_aug)
    v_z = (jac["z"] @ torch.eye(m, dtype=jac["z"].dtype)[:, m - dim_aug:]).transpose(-1, -2)  # (N, G, d)
    x_unit = jac["x"] / jac["x"].norm(dim=-2, keepdim=True)  # unit columns: the check ignores the units of c, ξ
    out: dict[str, Any] = {}
    for tol in (rel_tol, *tol_sweep):
        r = {"x": fisher_rank(x_unit, tol, sigma), "z": fisher_rank(ortho["z"], tol, sigma),
             "u": fisher_rank(ortho["u"], tol, sigma), "h": fisher_rank(jac["h"], tol, sigma)}
        key = "" if tol == rel_tol and "rank_Iz" not in out else f"@{tol:g}"
        out[f"rank_Ix{key}"] = r["x"].double().mean().item()
        out[f"rank_Iz{key}"] = r["z"].double().mean().item()
        out[f"rank_Ih{key}"] = r["u"].double().mean().item()
        out[f"rank_Iu_given_z{key}"] = r["h"].double().mean().item()
        out[f"holds_frac{key}"] = (r["u"] <= r["z"] - dim_aug).double().mean().item()
        out[f"manifold_ok_frac{key}"] = (r["x"] == m).double().mean().item()
    nf = {"Ih": null_space_fraction(ortho["u"], w_aug, rel_tol), "Iz": null_space_fraction(ortho["z"], w_aug, rel_tol),
          "Iu_given_z": null_space_fraction(jac["h"], v_z / v_z.norm(dim=-1, keepdim=True), rel_tol)}
    for k, v in nf.items():
        out[f"null_frac_{k}"] = v.median().item()
    # information along V_aug relative to the most informative direction, per point (median)
    for name, key in (("Ih", "u"), ("Iz", "z")):
        top = torch.linalg.svdvals(ortho[key]).amax(-1).square()
        along = (ortho[key] @ w_aug.transpose(-1, -2)).square().sum(-2).amax(-1)
        out[f"aug_info_rel_{name}"] = (along / top).median().item()
    if "f" in jac:  # the same bound w.r.t. the input pixels: I_z^x = J_fᵀJ_f, I_h^x = (J_h J_f)ᵀ(J_h J_f)
        rz, rh = fisher_rank(jac["f"], rel_tol, sigma), fisher_rank(jac["h"] @ jac["f"], rel_tol, sigma)
        out["rank_Iz_input"] = rz.double().mean().item()
        out["rank_Ih_input"] = rh.double().mean().item()
        out["holds_frac_input"] = (rh <= rz - dim_aug).double().mean().item()
    return out


def run_cell(config: C7Config, cell: dict[str, Any]) -> dict[str, Any]:
    """Fisher ranks of one regime × seed, before and after training."""
    regime, seed = cell["regime"], int(cell["seed"])
    spec, system, manifold = cell_system(config.system, cell)
    out: dict[str, Any] = {"regime": regime, "dim_aug": spec.dim_aug, "n_latent": manifold.n_latent,
                           "rel_tol": config.rel_tol,
                           "observation_model": GaussianObservation(config.sigma).describe("f(x(theta)) or h(f(x(theta)))")}
    for stage in STAGES:
        backbone, head = (copy.deepcopy(m).double().eval() for m in system.models[stage])
        g = torch.Generator().manual_seed(515_151 + seed)
        theta = manifold.sample(config.n_eval, g)
        jac = jacobians(backbone, head, manifold, theta)
        for k, v in rank_metrics(jac, spec.dim_aug, config.rel_tol, config.tol_sweep, config.sigma).items():
            out[f"{stage}.{k}"] = v
        out[f"{stage}.gap_end_to_end"] = invariance_gap(backbone, head, manifold, theta, g)
        out[f"{stage}.gap_backbone"] = invariance_gap(backbone, None, manifold, theta, g)
    return out


# ---------------------------------------------------------------- summary (apart from computing)
def _claim(config: C7Config, regime: str, ms: list[dict]) -> Row:
    maj = config.majority
    premise = [m["after.gap_end_to_end"] <= config.premise_max < m["after.gap_backbone"]
               and m["after.manifold_ok_frac"] >= maj for m in ms]
    holds = [m["after.holds_frac"] >= maj for m in ms]
    both = [p and h for p, h in zip(premise, holds)]
    verdict, headline, _ = rank_bound_verdict(premise, holds, maj)
    s = regime_spec(config.system, regime)
    criterion = (f"numerical rank = number of Fisher eigenvalues > {config.rel_tol:g} * lambda_max (I_z, I_h in "
                 "manifold-orthonormal coordinates). Per seed, premise: invariance gap of h∘f after training <= "
                 f"{config.premise_max:g}, the gap of f > {config.premise_max:g} (the theorem needs a backbone that still "
                 "varies along the orbits) and the manifold Jacobian has full rank p + G at >= {maj:.0%} of points; holds: "
                 f"rank(I_h) <= rank(I_z) - {s.dim_aug} at >= {maj:.0%} of points. Supported if >= {maj:.0%} of seeds "
                 f"meet the premise and hold; not supported if >= {maj:.0%} meet the premise and none of them holds; "
                 "inconclusive otherwise")
    meas: dict[str, Any] = {
        "seeds_premise_met": measured([float(p) for p in premise], what="1 if the seed meets the premise"),
        "seeds_premise_and_holding": measured([float(b) for b in both],
                                              what="1 if the seed meets the premise and the rank bound holds"),
    }
    for stage in STAGES:
        for k in ("rank_Iz", "rank_Ih", "rank_Iu_given_z", "holds_frac", "null_frac_Ih", "null_frac_Iz",
                  "aug_info_rel_Ih", "gap_end_to_end", "gap_backbone"):
            meas[f"{k}_{stage}"] = measured([m[f"{stage}.{k}"] for m in ms], what="mean over points per seed"
                                            if k.startswith(("rank", "holds")) else "median over points per seed")
    return Row(
        id="C7", statement=STATEMENT,
        setting={"objective": s.objective, "head": f"{s.d}-{s.head_hidden}-{s.k}:{s.activation}",
                    "reading": "Fisher information, Gaussian observation model", "preset": config.preset,
                    "regime": regime, "observation_model": GaussianObservation(config.sigma).describe(),
                    "rel_tol": config.rel_tol, "dim_aug": s.dim_aug, "n_latent": s.n_content + s.dim_aug,
                    "n_eval": config.n_eval},
        measured=meas, verdict=verdict, evidence=TEST, criterion=criterion, headline=headline,
    )


def _pm(vals: list[float]) -> str:
    return format_estimate(measured(vals))


def _tables(config: C7Config, groups: dict[str, list[dict]]) -> list[Table]:
    main = Table(("regime", "stage", "rank I_x", "rank I_z", "rank I_h", "rank I_{u|z}", "holds",
                  "null frac of V_aug in I_h", "in I_z", "gap h∘f", "gap f", "n"),
                 title=f"C7: numerical Fisher ranks at rel_tol = {config.rel_tol:g} (mean over points; mean ± std over "
                       "seeds)")
    sweep = Table(("regime", "stage", "rel_tol", "rank I_z", "rank I_h", "holds"), title="C7: tolerance sweep")
    pixels = Table(("regime", "stage", "rank I_z^x", "rank I_h^x", "holds (input)", "n"),
                   title=f"C7: the same bound w.r.t. the input pixels at rel_tol = {config.rel_tol:g} (reported, not "
                         "judged)")
    for regime in config.regimes:
        ms = groups.get(regime, [])
        for stage in STAGES if ms else ():
            main.add(regime, stage, *(_pm([m[f"{stage}.{k}"] for m in ms]) for k in (
                "rank_Ix", "rank_Iz", "rank_Ih", "rank_Iu_given_z", "holds_frac", "null_frac_Ih", "null_frac_Iz",
                "gap_end_to_end", "gap_backbone")), len(ms))
            if all(f"{stage}.rank_Iz_input" in m for m in ms):
                pixels.add(regime, stage, *(_pm([m[f"{stage}.{k}"] for m in ms]) for k in (
                    "rank_Iz_input", "rank_Ih_input", "holds_frac_input")), len(ms))
            for tol in config.tol_sweep:
                sweep.add(regime, stage, f"{tol:g}", *(_pm([m[f"{stage}.{k}@{tol:g}"] for m in ms])
                                                       for k in ("rank_Iz", "rank_Ih", "holds_frac")))
    return [main, sweep, pixels]


def summarize(config: C7Config, results: list[tuple[dict, dict]]) -> Summary:
    """A claim per regime, the rank table and tolerance sweep, the rank-vs-tolerance figure."""
    groups: dict[str, list[dict]] = {}
    for cell, m in results:
        groups.setdefault(cell["regime"], []).append(m)
    regimes = [r for r in config.regimes if r in groups]
    notes = [f"observation model: {GaussianObservation(config.sigma).describe('f(x(theta)) [I_z] or h(f(x(theta))) [I_h]')}"
             "; theta = (content c, shift xi) of the pattern manifold, re-expressed in coordinates orthonormal for "
             "the pixel metric on the manifold (numerical ranks then do not depend on the units of c and xi); "
             "I_{u|z} = J_h^T J_h / sigma^2 is the head's Fisher information about z.",
             "the inequality is exact for an exactly invariant h∘f over a backbone whose tangents are independent; a "
             "backbone that is itself invariant lowers rank(I_z) too, and the bound can then fail.",
             "w.r.t. the input pixels the bound only asks that J_h have dim V_aug numerically null directions "
             "somewhere in range(J_f) = R^d, not along V_aug: compare its 'before' row, which shows how much power "
             "that version has at this tolerance."]
    return Summary(claims=[_claim(config, r, groups[r]) for r in regimes], tables=_tables(config, groups),
                   figures=[("ranks", lambda: plots.ranks_vs_tolerance(
                       {r: groups[r] for r in regimes}, STAGES, config.tol_sweep, config.rel_tol,
                       config.system.dim_aug))], notes=notes)


EXPERIMENT = register(Experiment(
    id="C7",
    title="Fisher-information rank drops by dim V_aug through an invariant head (Thm 5.3)",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
    cell_keys={f"system.{name}": instead for name, instead in REGIME_FIELDS.items()},
))

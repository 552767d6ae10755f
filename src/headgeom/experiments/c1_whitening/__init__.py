"""C1, Thm 3.1 (local subspace whitening): at a fixed point, a linear head whitens any r-dim subspace.

Setting. A small real head h (``config.head``, d → k) at random z0 (N, d) gives u0 = h(z0); the other view
(two-view losses) or the stop-gradient target (mse, negative_cosine) is c = h(z0 + view_noise · ξ), held fixed
through ``analysis_loss``. u0 is not a fixed point of the loss (‖∇_u L(u0)‖ ≠ 0), so the theorem's premise is
built: u* is the stationary point of u ↦ L(u) near u0 that :func:`headgeom.theory.fixed_points.stationary_point`
reaches (a damped Newton iteration on ∇L = 0, blind to the sign of the Hessian: minima and saddles alike), with
the loss's gauge (the row scale of the cosine losses, the feature shift and scale of Barlow Twins, whose
``eps`` is set to ``barlow_eps`` = 0 so that its fixed points exist at finite u). A row is at a fixed point when
‖∇L(u*)‖ ≤ grad_tol · ‖∇L(u0)‖, checked by an autograd gradient apart from the solver's. For MSE u* = c, for
the cosine loss u*_i ∥ ±c_i. For each analysed sample i at u*: A = [∇²_u L(u*)]_ii (k × k, the loss's own 1/N
reduction kept) under the reading (at a fixed point the ambient and tangential readings coincide: the radial
term is the gradient); A₊ = U_r Λ_r U_rᵀ (eigenvalues > rel_tol · max|λ|); for ``subspaces`` random S ⊂ R^d of
dim r with basis B: W = U_r Λ_r^{-1/2} Bᵀ, H_eff = Wᵀ A W. See :mod:`headgeom.theory.whitening`.

Independent check. H_eff is also computed by :func:`headgeom.geometry.effective_hessian` on the head
nn.Linear(d, k) with weight W and bias b = u*_i − W z0_i (the bias places row i at u*_i, so the tangential reading
projects at the right point; J = W and M = 0 as for u = W z), with the loss u ↦ L(u + C), C = u* − (z0 Wᵀ + b) a
constant (C_i = 0) so that every row of the batch sits at u*. Its block i is compared with Wᵀ A W and its M block
must vanish.

Also measured: where A has negative eigenvalues, ε_S of the |Λ| construction on dim S = rank A (the paper's r read
literally), the directions with vᵀHv = −‖v‖², and a numerical best fit of W; for dim S = r₊ + 1 ε_S of the
natural construction and of a best fit, both held against the inertia bound ε_S ≥ 1. The view noise is swept
(``view_noise_sweep``): at each value the fixed point and A's eigenvalues are measured again, so the verdict of
Thm 3.1 as stated is re-judged over the distance between the two views.

Evidence kinds of the rows (:mod:`headgeom.claims.evidence`; the rows: :mod:`.summary`):

- per loss × reading, "r = rank A₊": ``identity``. W = U_r Λ_r^{-1/2} Bᵀ gives WᵀAW = BBᵀ by construction, so
  ε_S ≤ iso_tol fails only through a bug (in the construction, the loss Hessian block or the engine's H_eff).
- per loss × reading, "Thm 3.1 as stated, r = rank A, at a fixed point"
  (:func:`headgeom.claims.whitening_verdict.fixed_point_verdict`): the paper states no premise A ⪰ 0
  (docs/paper.md#c1), so a fixed point with n₋(A) > 0 is a counterexample (Sylvester: no W whitens dim S = rank
  A > n₊(A)). ``test`` for InfoNCE, VICReg and Barlow Twins, whose fixed points near u0 may be minima (A ⪰ 0) or
  saddles (n₋ > 0): it could go either way. ``diagnostic`` for MSE (A = I/N at every u: the verdict is the sign
  of a constant) and for the cosine loss (its only fixed points are the rays u_i ∥ ±c_i, where A = ±P/(N‖u_i‖²)
  in closed form: the ray the solver reaches fixes the verdict).
- the dimension condition (dim S = r + 1 cannot be whitened): ``identity`` (Sylvester again).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import vmap

from headgeom.experiments.c1_whitening.summary import STATEMENT, summarize
from headgeom.experiments.registry import Experiment, register
from headgeom.geometry import effective_hessian
from headgeom.geometry.engine.readings import check_reading
from headgeom.heads import head_from
from headgeom.launch.resources import Resources
from headgeom.objectives import analysis_loss, get_objective
from headgeom.runs.cell import seeded_cells
from headgeom.theory.fixed_points import loss_gauge, stationary_point
from headgeom.theory.whitening import (
    best_fit_isotropy,
    inertia_lower_bound,
    isotropy_error,
    leakage,
    linear_effective_hessian,
    random_subspace,
    restricted,
    sample_loss_block,
    split_eigen,
    whitening_head,
)

__all__ = ["C1Config", "DEFAULT_SETTINGS", "STATEMENT", "cells", "loss_options", "parse_setting", "paper", "quick",
           "run_cell", "small", "summarize"]

DEFAULT_SETTINGS = (
    "mse:ambient", "negative_cosine:ambient", "negative_cosine:tangential", "info_nce:ambient", "vicreg:ambient",
    "barlow_twins:ambient",
)


@dataclass(frozen=True)
class C1Config:
    """Every setting of C1. ``settings`` are "objective:reading" strings; the ``*_sweep`` tuples are the ranges over
    which the verdict of Thm 3.1 as stated is re-judged (each convention's own value is added when missing)."""

    preset: str = "quick"
    head: str = "12-32-8:silu"  # the real head giving u0 = h(z0): d = 12, k = 8
    batch: int = 8  # N
    samples: int = 2  # rows i analysed per cell (one A, one W per row)
    subspaces: int = 2  # random S per row
    settings: tuple[str, ...] = DEFAULT_SETTINGS
    view_noise: float = 0.3  # other view / target = h(z0 + view_noise · ξ)
    view_noise_sweep: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)  # fixed points and A measured again at each
    barlow_eps: float = 0.0  # eps in Barlow Twins' sqrt(var + eps): 0 makes it scale-invariant, so fixed points exist
    grad_tol: float = 1e-10  # a fixed point: ‖∇L(u*)‖ ≤ grad_tol · ‖∇L(u0)‖
    grad_tol_sweep: tuple[float, ...] = (1e-12, 1e-10, 1e-8, 1e-6)
    solver_iterations: int = 30  # damped Newton steps at most (those that converge here take 3-16)
    rel_tol: float = 1e-10  # sign/rank floor of A: rel_tol · max|λ| (docs/paper.md §4, pitfall 2)
    rel_tol_sweep: tuple[float, ...] = (1e-12, 1e-10, 1e-8, 1e-6, 1e-4)
    iso_tol: float = 1e-10  # verdict: ε_S ≤ iso_tol is round-off
    iso_tol_sweep: tuple[float, ...] = (1e-12, 1e-10, 1e-8, 1e-6)
    fit_restarts: int = 2  # L-BFGS restarts of the best-fit search (dim S > r₊); 0 skips it
    seeds: int = 5
    num_threads: int | None = 1  # torch threads inside a cell (64 × 64 problems); None: as set


def quick() -> C1Config:
    """`headgeom reproduce --only C1 --preset quick`: 19 s CPU, 73 s wall on 2 cores at load ~17 (measured).

    6 loss/readings × 5 seeds × 2 rows × 2 subspaces = 20 (S, seed) trials per loss/reading, d = 12, k = 8, N = 8,
    each at the fixed point near the head's output, found again at 4 view noises. Measures ε_S, leakage,
    engine-vs-formula agreement, the inertia of A at the fixed points, the dim S > r case. CPU only (float64 eigh,
    Newton, L-BFGS); a GPU host runs it on its CPUs.
    """
    return C1Config()


def small() -> C1Config:
    """`headgeom reproduce --only C1 --preset small`: ~3-5 min on 2 CPU cores (CPU only).

    Wider head (32 → 64 → 16, N = 16): 10 seeds × 3 rows × 4 subspaces = 120 trials per loss/reading; the same
    measurements with r up to 16 (the fixed-point solver works on N·k = 256 coordinates).
    """
    return C1Config(preset="small", head="32-64-16:silu", batch=16, samples=3, subspaces=4, seeds=10)


def paper() -> C1Config:
    """`headgeom reproduce --only C1 --preset paper`: ~1-2 h on 2 CPU cores (CPU only; estimated).

    The paper's projector input at reduced width (512 → 512 → 128, N = 32; r up to 128) over 5 seeds × 2 rows × 2
    subspaces, one view noise: ε_S at realistic sizes, where round-off grows with κ(A₊). The fixed-point solver
    forms and diagonalises the dense (N·k)² = 4096² Hessian at each step, which dominates.
    """
    return C1Config(preset="paper", head="512-512-128:silu", batch=32, samples=2, subspaces=2, fit_restarts=1,
                    seeds=5, view_noise_sweep=(0.3,), num_threads=None)


# what one cell needs per preset (headgeom reproduce --launcher slurm; overridden on the command line):
# CPU only; one cell several minutes on 2 cores (the 4096² Hessian of the fixed-point solver; estimated)
RESOURCES = {"paper": Resources(cpus=2, mem_gb=8, time_min=60, expected_min=5)}


def parse_setting(setting: str) -> tuple[str, str]:
    """"objective:reading" -> (objective, reading), both validated."""
    obj, sep, reading = setting.partition(":")
    if not sep:
        raise ValueError(f"setting {setting!r} must be 'objective:reading', e.g. 'negative_cosine:tangential'")
    get_objective(obj)
    check_reading(reading)
    return obj, reading


def loss_options(config: C1Config, objective: str) -> dict[str, float]:
    """The objective's options in C1: Barlow Twins' eps (``barlow_eps``); the defaults otherwise."""
    return {"eps": config.barlow_eps} if objective == "barlow_twins" else {}


def cells(config: C1Config, seeds: int | None = None) -> list[dict]:
    """One cell per setting × seed."""
    for s in config.settings:
        parse_setting(s)
    if config.view_noise not in config.view_noise_sweep:
        raise ValueError(f"view_noise {config.view_noise:g} must be one of view_noise_sweep {config.view_noise_sweep} "
                         "(the row's own value is judged from the sweep's fixed points)")
    return seeded_cells("C1", [{"setting": s} for s in config.settings], seeds, default=config.seeds)


def _views(config: C1Config, seed: int) -> tuple[Tensor, Tensor, dict[float, Tensor]]:
    """(z0 (N, d), u0 = h(z0) (N, k), {view noise: h(z0 + noise · ξ) (N, k)}) in float64, one ξ for every noise."""
    torch.manual_seed(seed)
    head = head_from(config.head).to(torch.float64).eval()
    d = head.spec.widths[0]
    z0 = torch.randn(config.batch, d, dtype=torch.float64)
    xi = torch.randn_like(z0)
    with torch.no_grad():
        return z0, head(z0), {s: head(z0 + s * xi) for s in config.view_noise_sweep}


def _engine_block(loss, reading: str, z0: Tensor, u: Tensor, w: Tensor, i: int) -> tuple[Tensor, float]:
    """(H_eff block i (d, d), max|M e_{i,c}|) from the engine on the affine head z ↦ W z + b placing row i at u_i.

    d matvecs H_eff e_{i,c} (vmapped) give the block's columns: H_eff of the whole composite
    L ∘ h (a full HVP for the ambient reading, G + M otherwise), never the formula WᵀAW.
    """
    k, d = w.shape
    lin = nn.Linear(d, k, bias=True).to(torch.float64)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(u[i] - w @ z0[i])
        offset = u - lin(z0)  # constant; row i is 0 up to round-off
    offset[i] = 0.0
    eh = effective_hessian(lin, lambda v: loss(v + offset), z0, reading=reading)
    units = torch.zeros(d, *z0.shape, dtype=z0.dtype)
    units[:, i, :] = torch.eye(d, dtype=z0.dtype)
    h = vmap(eh.matvec)(units)[:, i, :].T  # (d, d): column c = block i of H_eff e_{i,c}
    m = vmap(eh.interaction_matvec)(units)
    return h, float(m.abs().max())


def _reference_block(loss, reading: str, u: Tensor, i: int) -> Tensor:
    """A from torch.func.hessian (and P A P for tangential) - an independent route to loss_hvp."""
    rows = torch.arange(u.shape[0]) == i  # L as a function of row i alone: a (k, k) Hessian
    a = torch.func.hessian(lambda ui: loss(torch.where(rows[:, None], ui, u)))(u[i])
    if reading == "tangential":
        uh = u[i] / u[i].norm()
        p = torch.eye(u.shape[1], dtype=u.dtype) - torch.outer(uh, uh)
        a = p @ a @ p
    return a


KEYS_ROW = ("rank_positive", "n_negative", "n_zero", "rank", "eigenvalues", "lambda_min", "lambda_max",
            "cond_positive", "block_check", "relative_gradient")
KEYS_TRIAL = ("iso_error", "iso_error_engine", "leakage", "leakage_engine", "engine_vs_direct", "engine_M_max",
              "oversize_iso_error", "oversize_fit_error", "oversize_bound")
KEYS_INDEF = ("abs_iso_error", "abs_minus_one", "abs_plus_one", "abs_signs_ok", "abs_restricted_min",
              "literal_fit_error", "literal_best")


def run_cell(config: C1Config, cell: dict) -> dict:
    """Metrics of one (setting, seed) at the fixed point u* near u0; lists run over rows (per-row keys) or (row,
    subspace) trials.

    Per cell: fixed_point ({grad_norm_start, grad_norm, relative_gradient, iterations, stop, move = ‖u* − u0‖ /
    ‖u0‖}) and view_noise_sweep ({"<noise>": {"eigenvalues": per row, "relative_gradient": per row}}). Per row:
    rank_positive, n_negative, n_zero, rank, eigenvalues (of A, ascending), lambda_min, lambda_max, cond_positive,
    block_check (max|A_hvp − A_hessian|), relative_gradient; per trial: iso_error, iso_error_engine, leakage,
    leakage_engine, engine_vs_direct, engine_M_max; oversize (dim S = r₊ + 1 ≤ d): oversize_iso_error (per trial),
    oversize_fit_error and oversize_bound (per row). Rows with n₋(A) > 0, dim S = rank A with the |Λ|
    construction: abs_iso_error, abs_minus_one / abs_plus_one (eigenvalues of BᵀHB at −1 / +1), abs_signs_ok,
    abs_restricted_min (per trial); literal_fit_error (best fit) and literal_best (the best any tried W reached;
    per row). Rows with A₊ = 0 have no positive-part trials.
    """
    obj, reading = parse_setting(cell["setting"])
    seed = int(cell["seed"])
    z0, u0, others = _views(config, seed)
    n, k = u0.shape
    d = z0.shape[1]
    if k > d:
        raise ValueError(f"C1 needs k <= d so that dim S = r <= min(k, d) always fits; head {config.head} has d={d}, k={k}")
    if not 1 <= config.samples <= n:
        raise ValueError(f"samples must be in 1..N={n}; got {config.samples}")
    gauge = loss_gauge(obj, loss_options(config, obj))
    out: dict = {"setting": cell["setting"], "objective": obj, "reading": reading, "seed": seed, "d": d, "k": k,
                 "N": n, "gauge": gauge.name, "view_noise_sweep": {},
                 **{key: [] for key in KEYS_ROW + KEYS_TRIAL + KEYS_INDEF}}
    for noise, other in others.items():
        loss = analysis_loss(obj, other, **loss_options(config, obj))
        fp = stationary_point(loss, u0, gauge, max_iter=config.solver_iterations)
        blocks = [sample_loss_block(loss, fp.u, i, reading) for i in range(config.samples)]
        out["view_noise_sweep"][f"{noise:g}"] = {
            "eigenvalues": [torch.linalg.eigvalsh(a).tolist() for a in blocks],
            "relative_gradient": [fp.relative_gradient] * config.samples}
        if noise == config.view_noise:
            out["fixed_point"] = {"grad_norm_start": fp.grad_norm_start, "grad_norm": fp.grad_norm,
                                  "relative_gradient": fp.relative_gradient, "iterations": fp.iterations,
                                  "stop": fp.stop, "move": float((fp.u - u0).norm() / u0.norm())}
            _analyse(config, out, loss, reading, z0, fp.u, blocks, fp.relative_gradient, seed)
    return out


def _analyse(config: C1Config, out: dict, loss, reading: str, z0: Tensor, u: Tensor, blocks: list[Tensor],
             relative_gradient: float, seed: int) -> None:
    """The whitening measurements of :func:`run_cell` at the fixed point u (N, k), into ``out``."""
    d = z0.shape[1]
    gen = torch.Generator().manual_seed(10_000 + seed)
    for i, a in enumerate(blocks):
        split = split_eigen(a, config.rel_tol)
        r = split.n_positive
        for key, value in (("rank_positive", r), ("n_negative", split.n_negative), ("n_zero", split.n_zero),
                           ("rank", split.rank), ("eigenvalues", split.eigenvalues.tolist()),
                           ("lambda_min", float(split.eigenvalues[0])), ("lambda_max", float(split.eigenvalues[-1])),
                           ("cond_positive", split.condition_positive()),
                           ("block_check", float((a - _reference_block(loss, reading, u, i)).abs().max())),
                           ("relative_gradient", relative_gradient)):
            out[key].append(value)
        fit = (lambda dim: best_fit_isotropy(a, dim, config.fit_restarts, seed, rel_tol=config.rel_tol)
               if config.fit_restarts > 0 and dim <= d else None)
        if split.n_negative:  # the paper's r = rank A, literally: best fit over W
            out["literal_fit_error"].append(fit(split.rank))
        if r + 1 <= d:  # ε_S depends on W only through W B, so one best fit per row and dim
            out["oversize_fit_error"].append(fit(r + 1))
            out["oversize_bound"].append(inertia_lower_bound(r, r + 1))
        for _ in range(config.subspaces if r else 0):  # r = 0: A₊ = 0, nothing to whiten
            b, b_perp = random_subspace(d, r, gen)
            w = whitening_head(split, b)
            h = linear_effective_hessian(w, a)
            h_eng, m_max = _engine_block(loss, reading, z0, u, w, i)
            out["iso_error"].append(isotropy_error(h, b))
            out["iso_error_engine"].append(isotropy_error(h_eng, b))
            out["leakage"].append(leakage(h, b_perp))
            out["leakage_engine"].append(leakage(h_eng, b_perp))
            out["engine_vs_direct"].append(float((h_eng - h).abs().max()))
            out["engine_M_max"].append(m_max)
            if r + 1 <= d:  # dimension condition: dim S = r₊ + 1, W whitening r of its directions
                b_big, _ = random_subspace(d, r + 1, gen)
                h_big = linear_effective_hessian(whitening_head(split, b_big[:, :r]), a)
                out["oversize_iso_error"].append(isotropy_error(h_big, b_big))
        abs_errors = []
        for _ in range(config.subspaces if split.n_negative and split.rank <= d else 0):
            b_abs, _ = random_subspace(d, split.rank, gen)  # the paper's r = rank A, with |Λ|
            h_abs = linear_effective_hessian(whitening_head(split, b_abs, part="nonzero"), a)
            q = torch.linalg.eigvalsh(restricted(h_abs, b_abs))
            minus, plus = int(((q + 1).abs() < 1e-8).sum()), int(((q - 1).abs() < 1e-8).sum())
            abs_errors.append(isotropy_error(h_abs, b_abs))
            out["abs_minus_one"].append(minus)
            out["abs_plus_one"].append(plus)
            out["abs_signs_ok"].append(minus == split.n_negative and plus == r)
            out["abs_restricted_min"].append(float(q.min()))
        out["abs_iso_error"] += abs_errors
        if split.n_negative:  # best any tried W reached on dim S = rank A for this row
            tried = [t for t in abs_errors + out["literal_fit_error"][-1:] if t is not None]
            out["literal_best"].append(min(tried) if tried else None)


EXPERIMENT = register(Experiment(
    id="C1",
    title="Thm 3.1: local subspace whitening by a linear head",
    statement=STATEMENT,
    presets={"quick": quick, "small": small, "paper": paper},
    cells=cells,
    run_cell=run_cell,
    summarize=summarize,
    theory=True,
    resources=RESOURCES,
))

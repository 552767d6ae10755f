"""C1 summary: the rows, the table, the figure and the notes from the cells' metrics (Thm 3.1; docs/paper.md#c1).

Rows per loss × reading: the positive-part construction (an identity), Thm 3.1 as stated at the fixed points
(:func:`headgeom.claims.whitening_verdict.fixed_point_verdict`; a test or a diagnostic, :data:`DIAGNOSTIC_REASONS` says
which losses fix its outcome and why), and one dimension-condition identity. The as-stated row names its
conventions and is re-judged over each (:func:`literal_robustness`): the sign floor, the fixed-point tolerance and
the isotropy tolerance from the stored eigenvalues and residuals, the view noise from the fixed points the cells
measured again at each value of ``view_noise_sweep``.
"""
from __future__ import annotations

from typing import Any

from headgeom.claims.evidence import DIAGNOSTIC, IDENTITY, TEST
from headgeom.claims.robustness import Robustness, robustness_text, sweep, with_own
from headgeom.claims.row import Row
from headgeom.claims.whitening_verdict import (count_negative, dimension_verdict, fixed_point_verdict,
                                               positive_part_verdict)
from headgeom.experiments.registry import Summary, measured
from headgeom.report.plots import c1_whitening as plots
from headgeom.report.table import Table

__all__ = ["CONVENTIONS", "DIAGNOSTIC_REASONS", "HEADLINE_TEXT", "STATEMENT", "literal_robustness", "summarize"]

STATEMENT = (
    "Thm 3.1: at a fixed point, for any subspace S with dim S = r = rank ∇²_u L, a linear W makes "
    "vᵀH_eff v = ‖v‖² on S (implicit subspace whitening)"
)
CONVENTIONS = ("view_noise", "grad_tol", "rel_tol", "iso_tol")
"""The settings the verdict of Thm 3.1 as stated depends on, each swept over its config range."""
DIAGNOSTIC_REASONS = {
    "mse": "A = I/N at every u, so n₋(A) = 0 at its one fixed point u* = c whatever is measured: the verdict is the "
           "sign of a constant loss Hessian",
    "negative_cosine": "the fixed points of −cos(u_i, c_i) are the rays u_i ∥ ±c_i, where A = ±P_i/(N‖u_i‖²) in "
                       "closed form (P_i the projector orthogonal to u_i; both readings agree there): n₋(A) = 0 on the "
                       "ray along c_i, k − 1 on the opposite one, so the ray the solver reaches fixes the verdict",
}
"""Objectives whose as-stated row is a diagnostic, with the reason its outcome is fixed (module docstring)."""
HEADLINE_TEXT = {
    "isotropy_error_both_routes": "largest whitening error of the constructed linear head on S (two routes)",
    "trials_with_negative_A": "share of fixed points where the loss Hessian has negative directions (there no "
                              "linear head whitens a subspace of dim rank ∇²L)",
    "trials_at_fixed_point": "share of trials in which the solver reached a fixed point of the loss",
    "best_error_any_W": "lowest whitening error any linear head reached where the loss Hessian has negative directions",
    "construction_isotropy_error": "largest whitening error of the constructed linear head on S",
    "error_any_W": "lowest whitening error any linear head reached on a subspace one dimension too large",
}


def _values(ms: list[dict], key: str) -> list[float]:
    return [float(v) for m in ms for v in m.get(key, []) if v is not None]


def _rng(xs: list[float], fmt: str = "{:.0f}") -> str:
    if not xs:
        return "–"
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}–{fmt.format(hi)}"


def _signs(ms: list[dict]) -> str:
    ok = _values(ms, "abs_signs_ok")
    return f"{int(sum(ok))}/{len(ok)}" if ok else "–"


def _mn(xs: list[float]) -> str:
    return f"{min(xs):.3f}" if xs else "–"


def _mx(xs: list[float]) -> str:
    return f"{max(xs):.2e}" if xs else "–"


def _sweep_data(ms: list[dict], noise: float) -> tuple[list[list[float]], list[float]]:
    """(A's eigenvalues per row, relative gradient per row) of the fixed points measured at view noise ``noise``."""
    runs = [m["view_noise_sweep"][f"{noise:g}"] for m in ms]
    return [ev for r in runs for ev in r["eigenvalues"]], [g for r in runs for g in r["relative_gradient"]]


def literal_robustness(config: Any, ms: list[dict], best: list[float], worst: float) -> dict[str, Robustness]:
    """The as-stated verdict re-judged over each of :data:`CONVENTIONS` (the others at the config's values)."""
    eig = [ev for m in ms for ev in m["eigenvalues"]]
    grad = _values(ms, "relative_gradient")
    tols = {"rel_tol": config.rel_tol, "grad_tol": config.grad_tol, "iso_tol": config.iso_tol}

    def judge(eigenvalues, relative, best_error, **change):
        return fixed_point_verdict(eigenvalues, relative, best_error, worst, **{**tols, **change})

    def at_noise(noise: float):  # fits of W only ran at the row's own noise; Sylvester's bound needs none
        return judge(eig, grad, best) if noise == config.view_noise else judge(*_sweep_data(ms, noise), [])

    return {"view_noise": sweep(at_noise, config.view_noise, with_own(config.view_noise, config.view_noise_sweep)),
            **{name: sweep(lambda v, name=name: judge(eig, grad, best, **{name: v}), tols[name],
                           with_own(tols[name], getattr(config, f"{name}_sweep"))) for name in tols}}


def _literal_row(config: Any, obj: str, setting: dict, ms: list[dict], both_routes: Any, worst: float) -> Row:
    eig = [ev for m in ms for ev in m["eigenvalues"]]
    grad = _values(ms, "relative_gradient")
    nneg = [count_negative(ev, config.rel_tol) for ev in eig]
    reached = [g <= config.grad_tol for g in grad]
    lit = _values(ms, "literal_best")
    decided = fixed_point_verdict(eig, grad, lit, worst, rel_tol=config.rel_tol, grad_tol=config.grad_tol,
                                  iso_tol=config.iso_tol)
    kind = DIAGNOSTIC if obj in DIAGNOSTIC_REASONS else TEST
    fixed = f"Diagnostic: {DIAGNOSTIC_REASONS[obj]}. " if kind == DIAGNOSTIC else ""
    robust = literal_robustness(config, ms, lit, worst)
    return Row(
        id="C1",
        statement=STATEMENT + " — as stated, r = rank A (all non-zero eigenvalues of A = ∇²_u L), at fixed points of "
                              "the loss; the paper states no premise A ⪰ 0 (docs/paper.md#c1)",
        setting={**setting, "construction": "W = U_r Λ_r^{-1/2} Bᵀ where A ⪰ 0; where n₋(A) > 0, W = U |Λ|^{-1/2} Bᵀ over "
                                            "all non-zero eigenvalues and an L-BFGS best fit of W",
                 "sign_floor": f"an eigenvalue of A counts as negative below −{config.rel_tol:g} · max|λ|"},
        measured={
            "n_negative": measured(nneg, definition=f"n₋(A): eigenvalues below −{config.rel_tol:g} · max|λ|"),
            "trials_with_negative_A": measured([float(r and k > 0) for r, k in zip(reached, nneg)],
                                               definition="1 if the trial is at a fixed point with n₋(A) > 0"),
            "trials_at_fixed_point": measured([float(r) for r in reached],
                                              definition=f"1 if ‖∇L(u*)‖ ≤ {config.grad_tol:g} · ‖∇L(u0)‖"),
            "relative_gradient": measured(grad, definition="‖∇L(u*)‖ / ‖∇L(u0)‖ (autograd)", reduce="max decides"),
            "gradient_at_start": measured([m["fixed_point"]["grad_norm_start"] for m in ms],
                                          definition="‖∇L(u0)‖ at the head's output, the point the solver starts from"),
            "distance_to_start": measured([m["fixed_point"]["move"] for m in ms], definition="‖u* − u0‖ / ‖u0‖"),
            "abs_isotropy_error": measured(_values(ms, "abs_iso_error")),
            "directions_with_vHv_minus_1": measured(_values(ms, "abs_minus_one")),
            "signs_match_inertia": measured(_values(ms, "abs_signs_ok"),
                                            definition="1 if BᵀHB has n₋ eigenvalues −1 and n₊ at +1"),
            "best_fit_error": measured(_values(ms, "literal_fit_error")),
            "best_error_any_W": measured(lit),
            "construction_isotropy_error": both_routes,
        },
        verdict=decided.outcome, evidence=kind, headline=decided.headline, reason=decided.reason,
        headline_text=HEADLINE_TEXT[decided.headline], conventions=CONVENTIONS, robustness=robust,
        criterion=(fixed + f"u* is the stationary point of the batch loss near the head's output u0 = h(z0) (damped "
                   f"Newton on ∇L = 0, blind to the sign of ∇²L; the other view or target h(z0 + "
                   f"{config.view_noise:g} ξ) fixed), a fixed point when ‖∇L(u*)‖ ≤ {config.grad_tol:g} · ‖∇L(u0)‖ "
                   f"(autograd). Decided by n₋(A) at the fixed point in each of the {len(eig)} trials: not supported "
                   "if n₋(A) > 0 in some trial at a fixed point (a counterexample: Sylvester's law of inertia gives "
                   "ε_S ≥ 1 for every W on dim S = rank A > n₊(A), and every W tried confirms it, ε_S ≥ 1 − 1e-6); "
                   f"supported if every trial reached a fixed point with n₋(A) = 0 (A ⪰ 0 up to the floor "
                   f"{config.rel_tol:g} · max|λ|, so rank A = rank A₊ and W = U_r Λ_r^{{-1/2}} Bᵀ reaches ε_S ≤ "
                   f"{config.iso_tol:g}); inconclusive otherwise (a trial short of a fixed point, a construction beyond "
                   f"round-off, or a W that beats the bound: a bug). Re-judged: {robustness_text(robust)}."),
    )



def _view_noise_cell(ms: list[dict], config: Any, noise: float) -> str:
    """"counterexamples/fixed points reached/rows" at one view noise."""
    eig, grad = _sweep_data(ms, noise)
    reached = [g <= config.grad_tol for g in grad]
    counter = sum(r and count_negative(ev, config.rel_tol) > 0 for ev, r in zip(eig, reached))
    return f"{counter}/{sum(reached)}/{len(eig)}"


def summarize(config: Any, results: list[tuple[dict, dict]]) -> Summary:
    """Claims per loss/reading: the positive-part construction (identity) and Thm 3.1 as stated at the fixed
    points (a test or a diagnostic); one for the dimension condition; the table, the figure and notes."""
    order = list(config.settings) + sorted({m["setting"] for _, m in results} - set(config.settings))
    groups = {s: [m for _, m in results if m["setting"] == s] for s in order}
    groups = {s: ms for s, ms in groups.items() if ms}
    tol = config.iso_tol
    base = {"head": config.head, "preset": config.preset, "N": config.batch,
            "construction": "W = U_r Λ_r^{-1/2} Bᵀ from the positive part of A = [∇²_u L]_ii",
            "point": "the fixed point u* of the loss near u0 = h(z0) (damped Newton on ∇L = 0, in the loss's gauge)",
            "reduction": "loss mean over the batch (A carries 1/N)",
            "rank_tolerance": f"eigenvalue counted if |λ| > {config.rel_tol:g} · max|λ|"}
    claims, notes = [], []
    noises = list(config.view_noise_sweep)
    table = Table(("objective", "reading", "trials", "at a fixed point", "max ‖∇L(u*)‖/‖∇L(u0)‖", "r = n₊(A)", "n₋(A)",
                   "max κ(A₊)", "max ε_S (WᵀAW)", "max ε_S (engine)", "max leakage", "max engine − formula",
                   "max abs M", "ε_S with abs(Λ), dim S = rank A", "S with n₋ directions at −1, n₊ at +1",
                   "ε_S, dim S = r+1: natural / best fit (min)",
                   *(f"n₋ > 0 / fixed points / rows at view noise {v:g}" for v in noises)),
                  title="C1: subspace whitening at the fixed points, per loss × reading")
    over_nat, over_fit = [], []
    for s, ms in groups.items():
        obj, reading = ms[0]["objective"], ms[0]["reading"]
        setting = {"objective": obj, "reading": reading, **base}
        if obj == "barlow_twins":
            setting["loss_options"] = f"eps = {config.barlow_eps:g} in sqrt(var + eps)"
        iso, iso_e = _values(ms, "iso_error"), _values(ms, "iso_error_engine")
        ranks, nneg = _values(ms, "rank_positive"), _values(ms, "n_negative")
        both_routes = measured(iso + iso_e, definition="ε_S from WᵀAW and from the engine's H_eff, every trial",
                               reduce="max is the criterion")
        meas = {
            "isotropy_error_both_routes": both_routes,
            "isotropy_error": measured(iso, definition="‖BᵀWᵀAWB − I_r‖₂ (max over unit v in S)"),
            "isotropy_error_engine": measured(iso_e, definition="same, H_eff from effective_hessian"),
            "leakage": measured(_values(ms, "leakage"), definition="‖H_eff B_⊥‖₂"),
            "leakage_engine": measured(_values(ms, "leakage_engine")),
            "engine_vs_direct": measured(_values(ms, "engine_vs_direct"), definition="max|H_engine − WᵀAW|"),
            "engine_M_max": measured(_values(ms, "engine_M_max"), definition="max|M| of the linear head"),
            "rank_positive": measured(ranks), "n_negative": measured(nneg),
            "cond_positive": measured(_values(ms, "cond_positive"), definition="κ(A₊)"),
            "block_check": measured(_values(ms, "block_check"), definition="max|A_hvp − A_hessian|"),
        }
        worst = max(iso + iso_e) if iso else float("nan")
        verdict = positive_part_verdict(iso, iso_e, ranks, tol)
        claims.append(Row(
            id="C1", statement=STATEMENT + " — r = rank of the positive part A₊",
            setting=setting, measured=meas, verdict=verdict.outcome, evidence=IDENTITY, headline=verdict.headline,
            headline_text=HEADLINE_TEXT[verdict.headline],
            criterion=(f"supported if ε_S ≤ {tol:g} (round-off) for every subspace and seed, from WᵀAW "
                       f"and from the engine's H_eff of the linear head; not supported if any exceeds it; "
                       f"inconclusive if A₊ = 0 everywhere ({len(iso)} trials)"),
        ))
        claims.append(_literal_row(config, obj, setting, ms, both_routes, worst))
        on, of = _values(ms, "oversize_iso_error"), _values(ms, "oversize_fit_error")
        over_nat += on
        over_fit += of
        abs_err = _values(ms, "abs_iso_error")
        grad = _values(ms, "relative_gradient")
        mins = "–" if not (on or of) else " / ".join(f"{min(x):.3f}" if x else "–" for x in (on, of))
        table.add(obj, reading, str(len(iso)), f"{sum(g <= config.grad_tol for g in grad)}/{len(grad)}", _mx(grad),
                  _rng(ranks), _rng(nneg), _mx(_values(ms, "cond_positive")), _mx(iso), _mx(iso_e),
                  _mx(_values(ms, "leakage")), _mx(_values(ms, "engine_vs_direct")), _mx(_values(ms, "engine_M_max")),
                  _mx(abs_err), _signs(ms), mins, *(_view_noise_cell(ms, config, v) for v in noises))
        vacuous = sum(x == 0 for x in ranks)
        if vacuous:
            notes.append(f"{obj}/{reading}: A₊ = 0 (A negative semi-definite) in {vacuous} of {len(ranks)} rows: "
                         "nothing to whiten there, those rows have no positive-part trials.")
        if any(nneg):
            notes.append(
                f"{obj}/{reading}: at the fixed points A has negative eigenvalues in {sum(x > 0 for x in nneg)} of "
                f"{len(nneg)} rows (n₋ = {_rng([x for x in nneg if x > 0])}): saddle points of the loss, "
                "counterexamples to Thm 3.1 as stated (r = rank A), which states no premise A ⪰ 0. The construction "
                "whitens only A₊; the |Λ| construction on dim S = rank A gives vᵀH_eff v = −‖v‖² on n₋ directions "
                f"(ε_S = {_mx(abs_err)}), and no W found does better than {_mn(_values(ms, 'literal_best'))} "
                "(inertia bound: 1).")
    if over_fit or over_nat:
        v3 = dimension_verdict(over_fit + over_nat, tol)
        any_w = measured(over_nat + over_fit, definition="ε_S of every W tried (natural construction and best fit)",
                         reduce="min is the criterion")
        claims.append(Row(
            id="C1",
            statement="Thm 3.1's dimension condition: for dim S > r = rank A₊ no linear W makes H_eff isotropic on S",
            setting={"objective": "all", "reading": "all", **base, "dim_S": "r + 1"},
            measured={"error_any_W": any_w,
                      "natural_construction_error": measured(over_nat, definition="W whitens r of the r+1 directions"),
                      "best_fit_error": measured(over_fit, definition="L-BFGS on ‖VᵀAV − I‖_F², spectral error")},
            verdict=v3.outcome, evidence=IDENTITY, headline=v3.headline, headline_text=HEADLINE_TEXT[v3.headline],
            criterion=("supported if every W tried has ε_S ≥ 1 − 1e-6 (the inertia bound: the error is never zero); "
                       f"not supported if some W reaches ε_S ≤ {tol:g}; inconclusive in between"),
        ))
    notes += [
        "u0 = h(z0) is not a fixed point (‖∇L(u0)‖ ≠ 0): every measurement is at the stationary point u* of the batch "
        "loss that a damped Newton iteration on ∇L = 0 reaches from u0 (headgeom.theory.fixed_points), orthogonal to "
        "the loss's invariances (the row scale of the cosine losses, the feature shift and scale of Barlow Twins at "
        f"eps = {config.barlow_eps:g}); its residual ‖∇L(u*)‖ is checked by autograd.",
        "H_eff = WᵀAW for u = W z (M = 0); the engine check uses nn.Linear(W, bias b = u*_i − W z0_i) with the "
        "loss u ↦ L(u + C) so that every row sits at u* and the tangential reading projects at u*_i.",
        "Leakage is ‖H_eff B_⊥‖₂ (= ‖P_⊥ H_eff‖₂); the construction gives H_eff = BBᵀ, so it is round-off.",
        f"Round-off of ε_S grows like κ(A₊) · 1e-16; rank counts eigenvalues above {config.rel_tol:g} · max|λ|.",
        "A is one row's block of the batch loss Hessian with the loss's mean reduction (1/N), the other view "
        f"or target h(z0 + {config.view_noise:g} ξ) fixed; the last columns of the table repeat the fixed-point "
        "search with the other view at each view noise of the sweep.",
    ]
    values = {s: {key: _values(ms, key) for key in plots.KEYS} for s, ms in groups.items()}
    return Summary(claims=claims, tables=[table],
                   figures=[("isotropy_error", lambda: plots.isotropy_error(values, tol))], notes=notes)

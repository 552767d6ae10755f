"""C1's rules (Thm 3.1, local subspace whitening; docs/paper.md §2 C1), pure functions of the isotropy
errors ε_S and the inertia of A = [∇²_u L]_ii that headgeom.experiments.c1_whitening measures:

- :func:`positive_part_verdict` (an identity): W = U_r Λ_r^{-1/2} Bᵀ gives WᵀAW = BBᵀ by construction, so
  ε_S ≤ tol in every trial, from WᵀAW and from the engine's H_eff;
- :func:`fixed_point_verdict`: Thm 3.1 as stated, r = rank A, at fixed points of the loss, decided by n₋(A) there
  (a re-judgeable function of A's eigenvalues and the gradient residuals, so each tolerance can be swept);
- :func:`dimension_verdict` (an identity): on dim S = r + 1 no W reaches ε_S below the inertia bound 1.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["INERTIA_BOUND", "count_negative", "dimension_verdict", "fixed_point_verdict", "positive_part_verdict"]

INERTIA_BOUND = 1 - 1e-6  # ε_S every W must reach where n₋(A) > 0 (Sylvester: 1), less round-off


def positive_part_verdict(errors: Sequence[float], errors_engine: Sequence[float], ranks: Sequence[float],
                          tol: float) -> Verdict:
    """The positive-part construction: supported if every ε_S (``errors`` from WᵀAW, ``errors_engine`` from the
    engine's H_eff) is ≤ ``tol``, not supported if one exceeds it, inconclusive without a trial or where
    A₊ = 0 in every row (``ranks``: rank A₊ per row). Headline: ``isotropy_error_both_routes``."""
    headline = "isotropy_error_both_routes"
    if not errors or max(ranks) == 0:
        return Verdict("inconclusive", headline)
    worst = max([*errors, *errors_engine])
    return Verdict("supported" if worst <= tol else "not supported", headline)


def count_negative(eigenvalues: Sequence[float], rel_tol: float) -> int:
    """n₋(A): the eigenvalues of A below the sign floor −rel_tol · max|λ| (docs/paper.md §4, pitfall 2)."""
    floor = rel_tol * max((abs(x) for x in eigenvalues), default=0.0)
    return sum(x < -floor for x in eigenvalues)


def fixed_point_verdict(eigenvalues: Sequence[Sequence[float]], relative_gradient: Sequence[float],
                        best_error: Sequence[float], worst_positive_part: float, *, rel_tol: float, grad_tol: float,
                        iso_tol: float) -> Verdict:
    """Thm 3.1 as stated (r = rank A, no premise A ⪰ 0) at the fixed points reached, one per trial.

    eigenvalues: A's eigenvalues per trial; relative_gradient: ‖∇_u L(u*)‖ / ‖∇_u L(u0)‖ per trial (a trial is at a
    fixed point when it is ≤ ``grad_tol``); best_error: the lowest ε_S any W reached on dim S = rank A in the trials
    with n₋(A) > 0 (empty where none was tried); worst_positive_part: the largest ε_S of W = U_r Λ_r^{-1/2} Bᵀ (NaN
    when none ran). n₋(A) counts eigenvalues below −rel_tol · max|λ| (:func:`count_negative`).

    Not supported when a trial at a fixed point has n₋(A) > 0 (a counterexample: by Sylvester's law of inertia no W
    whitens dim S = rank A > n₊(A)) and no W tried beats the inertia bound; supported when every trial reached a
    fixed point with n₋(A) = 0 and the construction reaches ε_S ≤ ``iso_tol``; inconclusive otherwise (no trial, a
    trial short of a fixed point, a construction beyond round-off, or a W below the bound: a bug). The headline
    names the measured key that decided: ``trials_with_negative_A`` (n₋(A) > 0 per trial at a fixed point),
    ``trials_at_fixed_point``, ``best_error_any_W`` or ``construction_isotropy_error``.
    """
    n = len(eigenvalues)
    if not n:
        return Verdict("inconclusive", "trials_with_negative_A", "no trial")
    reached = [r <= grad_tol for r in relative_gradient]
    neg = [count_negative(ev, rel_tol) for ev in eigenvalues]
    counter = [k for k, r in zip(neg, reached) if r and k]
    if counter:
        if any(x < INERTIA_BOUND for x in best_error):
            return Verdict("inconclusive", "best_error_any_W", (
                f"n₋(A) > 0 at {len(counter)} fixed points, but a W reached ε_S = {min(best_error):.3g} < 1, which "
                "contradicts the inertia bound (a bug)"))
        return Verdict("not supported", "trials_with_negative_A", (
            f"n₋(A) > 0 at {len(counter)} of {sum(reached)} fixed points (n₋ up to {max(counter)}): no W whitens "
            f"dim S = rank A there (best ε_S any W reached: {min(best_error) if best_error else math.nan:.3f})"))
    if not all(reached):
        return Verdict("inconclusive", "trials_at_fixed_point", (
            f"{n - sum(reached)} of {n} trials reached no fixed point (‖∇L‖ above {grad_tol:g} of its start), and "
            "none of those that did has n₋(A) > 0"))
    if not worst_positive_part <= iso_tol:
        return Verdict("inconclusive", "construction_isotropy_error", (
            f"A ⪰ 0 at all {n} fixed points, but the construction's ε_S = {worst_positive_part:.3g} > {iso_tol:g} "
            "(see the positive-part row)"))
    return Verdict("supported", "trials_with_negative_A", (f"A ⪰ 0 at all {n} fixed points; the construction's "
                                                           f"largest ε_S = {worst_positive_part:.2e}"))


def dimension_verdict(errors: Sequence[float], tol: float) -> Verdict:
    """The dimension condition (dim S = r + 1): supported if every W tried has ε_S ≥ :data:`INERTIA_BOUND` (the
    inertia bound: never zero), not supported if some W reaches ε_S ≤ ``tol``, inconclusive in between.
    ``errors``: ε_S of every W tried (natural construction and best fit), not empty. Headline: ``error_any_W``."""
    lowest = min(errors)
    outcome = "supported" if lowest >= INERTIA_BOUND else ("not supported" if lowest <= tol else "inconclusive")
    return Verdict(outcome, "error_any_W")

"""C1's rules (Thm 3.1, local subspace whitening; docs/paper.md §2 C1), pure functions of the isotropy
errors ε_S and the inertia of A = [∇²_u L]_ii that headgeom.experiments.c1_whitening measures:

- :func:`positive_part_verdict` (an identity): W = U_r Λ_r^{-1/2} Bᵀ gives WᵀAW = BBᵀ by construction, so
  ε_S ≤ tol in every trial, from WᵀAW and from the engine's H_eff;
- :func:`literal_rank_verdict` (a test): Thm 3.1 as stated, r = rank A, decided by n₋(A);
- :func:`dimension_verdict` (an identity): on dim S = r + 1 no W reaches ε_S below the inertia bound 1.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["INERTIA_BOUND", "dimension_verdict", "literal_rank_verdict", "positive_part_verdict"]

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


def literal_rank_verdict(n_negative: Sequence[int], best_error: Sequence[float], worst_positive_part: float,
                         tol: float) -> Verdict:
    """(verdict, the measured key that decided it, reason) of Thm 3.1 as stated, r = rank A, from n₋(A)
    of every trial.

    n_negative: n₋(A) per trial (eigenvalues below the sign floor); best_error: the lowest ε_S any W
    reached on dim S = rank A in each trial with n₋(A) > 0; worst_positive_part: the largest ε_S of
    W = U_r Λ_r^{-1/2} Bᵀ over the trials (NaN when none ran). Supported iff n₋(A) = 0 in every trial
    and that construction reaches ε_S ≤ tol; not supported iff n₋(A) > 0 in some trial and every W
    tried there stays at the inertia bound (a counterexample); else inconclusive. The key names the literal
    row's measured entry of the quantity that decided: ``trials_with_negative_A`` (n₋(A) > 0 per trial),
    ``best_error_any_W`` (a W below the inertia bound) or ``construction_isotropy_error``.
    """
    n, neg = len(n_negative), sum(x > 0 for x in n_negative)
    if not n:
        return Verdict("inconclusive", "trials_with_negative_A", "no trial")
    if neg:
        if any(x < INERTIA_BOUND for x in best_error):
            return Verdict("inconclusive", "best_error_any_W", (
                f"n₋(A) > 0 in {neg} of {n} trials, but a W reached ε_S = {min(best_error):.3g} "
                "< 1, which contradicts the inertia bound (a bug)"))
        return Verdict("not supported", "trials_with_negative_A", (
            f"n₋(A) > 0 in {neg} of {n} trials (n₋ up to {max(n_negative)}): no W whitens "
            f"dim S = rank A there (best ε_S any W reached: "
            f"{min(best_error) if best_error else math.nan:.3f})"))
    if not worst_positive_part <= tol:
        return Verdict("inconclusive", "construction_isotropy_error", (
            f"A ⪰ 0 in all {n} trials, but the construction's ε_S = {worst_positive_part:.3g} "
            f"> {tol:g} (see the positive-part row)"))
    return Verdict("supported", "trials_with_negative_A", (f"A ⪰ 0 in all {n} trials; the construction's largest "
                                                           f"ε_S = {worst_positive_part:.2e}"))


def dimension_verdict(errors: Sequence[float], tol: float) -> Verdict:
    """The dimension condition (dim S = r + 1): supported if every W tried has ε_S ≥ :data:`INERTIA_BOUND` (the
    inertia bound: never zero), not supported if some W reaches ε_S ≤ ``tol``, inconclusive in between.
    ``errors``: ε_S of every W tried (natural construction and best fit), not empty. Headline: ``error_any_W``."""
    lowest = min(errors)
    outcome = "supported" if lowest >= INERTIA_BOUND else ("not supported" if lowest <= tol else "inconclusive")
    return Verdict(outcome, "error_any_W")

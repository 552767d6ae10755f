"""C1's rules (headgeom.claims.whitening_verdict) on built cases: every verdict reachable, each naming the
measured key that decided it."""
import math

import pytest

from headgeom.claims.robustness import sweep
from headgeom.claims.whitening_verdict import (INERTIA_BOUND, count_negative, dimension_verdict, fixed_point_verdict,
                                               positive_part_verdict)

TOLS = {"rel_tol": 1e-10, "grad_tol": 1e-10, "iso_tol": 1e-10}
PSD, SADDLE = [0.0, 0.5, 1.0], [-0.2, 0.0, 1.0]  # eigenvalues of A at two fixed points


def test_count_negative_against_the_relative_floor():
    assert count_negative([-1e-7, 0.0, 1.0], 1e-10) == 1
    assert count_negative([-1e-7, 0.0, 1.0], 1e-6) == 0  # below the floor 1e-6 · max|λ|: a zero
    assert count_negative([-3.0, -1.0, 2.0], 0.5) == 1  # the floor scales with max|λ| = 3
    assert count_negative([], 1e-10) == 0


def test_fixed_point_rule_on_built_cases():
    # A ⪰ 0 at every fixed point: rank A = rank A₊, the construction whitens dim S = rank A
    assert fixed_point_verdict([PSD, PSD], [1e-15, 0.0], [], 3e-14, **TOLS)[:2] == ("supported",
                                                                                   "trials_with_negative_A")
    # a fixed point with n₋(A) > 0 and every W at the inertia bound: a counterexample to the theorem as stated
    verdict, key, why = fixed_point_verdict([PSD, SADDLE, PSD], [0.0] * 3, [1.0], 3e-14, **TOLS)
    assert verdict == "not supported" and key == "trials_with_negative_A" and "1 of 3 fixed points" in why
    # a saddle that is not a fixed point is no counterexample; a trial short of a fixed point leaves it undecided
    assert fixed_point_verdict([PSD, SADDLE], [0.0, 1e-3], [1.0], 3e-14, **TOLS)[:2] == ("inconclusive",
                                                                                       "trials_at_fixed_point")
    # a W below the bound where n₋ > 0 contradicts Sylvester: a bug, not evidence
    assert fixed_point_verdict([SADDLE], [0.0], [1e-12], 3e-14, **TOLS)[:2] == ("inconclusive", "best_error_any_W")
    # A ⪰ 0 but the construction failed, or nothing measured: undecided
    assert fixed_point_verdict([PSD], [0.0], [], 1e-3, **TOLS)[:2] == ("inconclusive", "construction_isotropy_error")
    assert fixed_point_verdict([], [], [], math.nan, **TOLS)[0] == "inconclusive"


def test_fixed_point_rule_flips_where_each_tolerance_crosses_the_measurement():
    eig, grad = [[-1e-7, 0.5, 1.0]], [1e-9]  # a small negative eigenvalue, a residual at 1e-9 of the start

    def rule(**change):
        return fixed_point_verdict(eig, grad, [1.0], 3e-14, **{**TOLS, "grad_tol": 1e-8, **change})

    by_floor = sweep(lambda v: rule(rel_tol=v), 1e-10, [1e-12, 1e-10, 1e-8, 1e-6, 1e-4])
    assert by_floor.verdicts == ("not supported",) * 3 + ("supported",) * 2 and by_floor.status == "flips at 1e-06, 0.0001"
    by_grad = sweep(lambda v: rule(grad_tol=v), 1e-8, [1e-10, 1e-8, 1e-6])
    assert by_grad.verdicts == ("inconclusive", "not supported", "not supported")
    by_iso = sweep(lambda v: rule(rel_tol=1e-6, iso_tol=v), 1e-10, [1e-14, 1e-10])  # A ⪰ 0 at floor 1e-6
    assert by_iso.verdicts == ("inconclusive", "supported")


def test_positive_part_rule_reads_both_routes():
    tol = 1e-10
    assert positive_part_verdict([1e-14, 2e-14], [3e-14], [2, 2], tol) == ("supported", "isotropy_error_both_routes", "")
    # either route beyond the tolerance fails the identity
    assert positive_part_verdict([1e-14], [1e-6], [2], tol).outcome == "not supported"
    assert positive_part_verdict([1e-6], [1e-14], [2], tol).outcome == "not supported"
    # nothing to whiten (A₊ = 0 in every row) or no trial: not checked
    assert positive_part_verdict([1e-14], [1e-14], [0, 0], tol).outcome == "inconclusive"
    assert positive_part_verdict([], [], [], tol).outcome == "inconclusive"


@pytest.mark.parametrize("errors, outcome", [([1.0, 1.3], "supported"), ([INERTIA_BOUND, 2.0], "supported"),
                                             ([0.5, 2.0], "inconclusive"), ([1e-12, 2.0], "not supported")])
def test_dimension_rule_against_the_inertia_bound(errors, outcome):
    assert dimension_verdict(errors, 1e-10) == (outcome, "error_any_W", "")
    assert INERTIA_BOUND == 1 - 1e-6  # Sylvester's bound 1, less round-off

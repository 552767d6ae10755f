"""C1's rules (headgeom.claims.whitening_verdict) on built cases: every verdict reachable, each naming the
measured key that decided it."""
import math

import pytest

from headgeom.claims.whitening_verdict import (INERTIA_BOUND, dimension_verdict, literal_rank_verdict,
                                               positive_part_verdict)


def test_literal_rank_rule_on_built_cases():
    # n₋(A) = 0 in every trial: A ⪰ 0, the construction whitens dim S = rank A
    assert literal_rank_verdict([0, 0, 0], [], 3e-14, 1e-10)[:2] == ("supported", "trials_with_negative_A")
    # n₋(A) > 0 in one trial, every W at the inertia bound: a counterexample to the theorem as stated
    verdict, key, why = literal_rank_verdict([0, 2, 0], [1.0], 3e-14, 1e-10)
    assert verdict == "not supported" and key == "trials_with_negative_A" and "1 of 3 trials" in why
    # a W below the bound where n₋ > 0 contradicts Sylvester: a bug, not evidence
    assert literal_rank_verdict([1], [1e-12], 3e-14, 1e-10)[:2] == ("inconclusive", "best_error_any_W")
    # A ⪰ 0 but the construction failed, or nothing measured: undecided
    assert literal_rank_verdict([0], [], 1e-3, 1e-10)[:2] == ("inconclusive", "construction_isotropy_error")
    assert literal_rank_verdict([], [], math.nan, 1e-10)[0] == "inconclusive"


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

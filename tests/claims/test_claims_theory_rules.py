"""The theory claims' rules (C2, C3, C4's constructed states, C5, C6, C7; headgeom.claims) on built values:
every outcome reachable, each naming the measured key that decided it, the thresholds on both sides."""
import math
from types import SimpleNamespace

import pytest

from headgeom.claims.collapse_instability import construction_verdict, flags_verdict, past_threshold_verdict, state_flag
from headgeom.claims.curvature_barrier import barrier_verdict, iso_key
from headgeom.claims.depth_isotropy import depth_isotropy_verdict
from headgeom.claims.fisher_rank import rank_bound_verdict
from headgeom.claims.invariance_verdict import degeneracy_verdict, lowpass_verdict
from headgeom.claims.relu_gap import relu_gap_verdict, smooth_key

C2 = SimpleNamespace(radii=(0.0, 0.5, 1.0), flat_tol=1e-8, route_tol=1e-3, curved_min=1e-6, origin_tol=1e-8,
                     growth_min=1e-3)


def _cell(found=True, rel=1e-6, cancellation=0.1, errors=(1e-12, 1e-2, 5e-2)):
    return {"slice_found": found, "route_rel_diff": rel, "cancellation": cancellation, "iso_error_max": list(errors)}


def test_c2_each_gate_names_its_measure():
    assert iso_key(C2) == "iso_error_at_r=1l"
    assert barrier_verdict(C2, [_cell(), _cell()], 1e-14, 1e-14)[:2] == ("supported", "iso_error_at_r=1l")
    assert barrier_verdict(C2, [_cell(found=False)], 1e-14, 1e-14)[:2] == ("inconclusive", "slice_found_fraction")
    assert barrier_verdict(C2, [_cell()], None, None)[:2] == ("inconclusive", "flat_control_max_abs_R")
    assert barrier_verdict(C2, [_cell()], 1e-14, 1e-2)[:2] == ("inconclusive", "flat_control_iso_error")
    assert barrier_verdict(C2, [_cell()], 1e-2, 1e-14)[:2] == ("inconclusive", "flat_control_max_abs_R")
    assert barrier_verdict(C2, [_cell(rel=None)], 1e-14, 1e-14)[:2] == ("inconclusive", "route_rel_diff")
    assert barrier_verdict(C2, [_cell(cancellation=1e-9)], 1e-14, 1e-14)[:2] == ("inconclusive",
                                                                                 "curvature_over_terms")
    stuck = barrier_verdict(C2, [_cell(), _cell(errors=(1e-12, 1e-5, 1e-4))], 1e-14, 1e-14)
    assert stuck.outcome == "not supported" and stuck.headline == iso_key(C2) and "1 of 2 cells" in stuck.reason


def test_c3_judged_only_when_the_fits_converged():
    common = {"n_fits": 6, "total": 4, "majority": 0.8}
    assert depth_isotropy_verdict(converged=1.0, frac_deep=1.0, wins=4, **common)[:2] == (
        "supported", "frac_seeds_deepest_below_threshold")
    assert depth_isotropy_verdict(converged=0.5, frac_deep=1.0, wins=4, **common)[:2] == (
        "inconclusive", "frac_fits_converged")
    assert depth_isotropy_verdict(converged=1.0, frac_deep=0.5, wins=4, **common)[:2] == (
        "not supported", "frac_seeds_deepest_below_threshold")
    assert depth_isotropy_verdict(converged=1.0, frac_deep=1.0, wins=3, **common)[:2] == (
        "not supported", "frac_depth_pairs_decreasing")  # 3/4 pairs < the 80 % majority
    assert depth_isotropy_verdict(n_fits=0, converged=0.0, frac_deep=0.0, wins=0, total=0, majority=0.8)[:2] == (
        "inconclusive", "frac_depth_pairs_decreasing")


def test_c4_past_threshold_and_constructions():
    assert past_threshold_verdict({"silu": 1.0, "gelu": 0.8}, 0.8, "h").outcome == "supported"
    assert past_threshold_verdict({"silu": 1.0, "gelu": 0.0}, 0.8, "h").outcome == "not supported"
    assert past_threshold_verdict({"silu": 1.0, "gelu": 0.5}, 0.8, "h").outcome == "inconclusive"
    assert past_threshold_verdict({"silu": 1.0, "gelu": None}, 0.8, "h").outcome == "inconclusive"  # no usable seed
    assert past_threshold_verdict({"silu": 0.0, "gelu": None}, 0.8, "h").outcome == "not supported"
    assert construction_verdict([], "x") == ("supported", "x", "")
    assert construction_verdict(["seed 2 broke", "seed 3 broke"], "x") == ("not supported", "x",
                                                                           "seed 2 broke; seed 3 broke")


def test_c4_a_stored_state_re_read_at_another_floor_or_size():
    # block 0: lambda_min(H) = -1e-6 against max|lambda| 1 (G PSD); block 1: G has -1e-3 (indefinite)
    per_block = {"H_lambda_min": [-1e-6, 0.5], "H_lambda_max": [1.0, 1.0],
                 "G_lambda_min": [1e-3, -1e-3], "G_lambda_max": [1.0, 1.0]}
    assert state_flag(per_block, None, 1e-10, n=1) is True
    assert state_flag(per_block, None, 1e-5, n=1) is False  # the floor 1e-5 hides -1e-6
    assert state_flag(per_block, None, 1e-10) is None  # with block 1 the state's G is indefinite: not usable
    assert state_flag(per_block, None, 1e-2) is False  # a floor of 1e-2 also hides G's -1e-3
    assert state_flag(per_block, 1e4, 1e-10, n=1) is False  # an operand scale 1e4 raises the floor to 1e-6
    with pytest.raises(ValueError, match="n must lie"):
        state_flag(per_block, None, 1e-10, n=3)
    assert flags_verdict({"silu": [True, True, None], "gelu": [True, False, True, True, True]}, 0.8, "h").outcome == \
        "supported"
    assert flags_verdict({"silu": [True], "gelu": [False, None]}, 0.8, "h").outcome == "not supported"
    assert flags_verdict({"silu": [True], "gelu": [None]}, 0.8, "h").outcome == "inconclusive"


def test_c5_relu_gap_rule():
    smooth = {"silu": 1.0, "gelu": math.nan}
    ok = {"flow_escaped": [False, False], "alive_and_stuck": [True, True], "other_route": True, "m_zero": True,
          "smooth_fractions": smooth, "support_fraction": 0.8}
    assert relu_gap_verdict(**ok)[:2] == ("supported", "relu_flow_alive_and_not_escaped_fraction")
    assert relu_gap_verdict(**{**ok, "flow_escaped": [True, True]})[:2] == ("not supported",
                                                                            "relu_flow_escape_fraction")
    assert relu_gap_verdict(**{**ok, "m_zero": False})[:2] == ("not supported", "relu_max_M_over_H_along_flow")
    assert relu_gap_verdict(**{**ok, "alive_and_stuck": [True, False]})[:2] == (
        "inconclusive", "relu_flow_alive_and_not_escaped_fraction")
    assert relu_gap_verdict(**{**ok, "other_route": False})[:2] == ("inconclusive", "relu_other_route_escaped")
    slow = {"silu": 0.0, "gelu": 0.4}
    assert relu_gap_verdict(**{**ok, "smooth_fractions": slow})[:2] == ("inconclusive", "gelu_flow_escape_fraction")
    assert smooth_key({"silu": math.nan}) == "smooth_flow_escape_fraction"
    assert relu_gap_verdict(**{**ok, "flow_escaped": [], "alive_and_stuck": []}).outcome == "inconclusive"


@pytest.mark.parametrize("premise, ratio, outcome, headline", [
    ([True] * 5, [0.1] * 5, "supported", "seeds_premise_and_degenerate"),
    ([True] * 5, [0.9] * 5, "not supported", "seeds_premise_and_not_degenerate"),
    ([True] * 5, [0.3] * 5, "inconclusive", "seeds_premise_and_degenerate"),  # partial suppression
    ([True, False, False, False, False], [0.1] * 5, "inconclusive", "seeds_premise_met"),
])
def test_c6_degeneracy_rule(premise, ratio, outcome, headline):
    verdict = degeneracy_verdict(premise, ratio, ratio_max=0.2, ratio_none=0.5, majority=0.8)
    assert verdict[:2] == (outcome, headline)


def test_c6_lowpass_rule():
    t, f = [True] * 5, [False] * 5
    assert lowpass_verdict(t, f, f, majority=0.8)[:2] == ("supported", "seeds_head_degenerate_backbone_not")
    assert lowpass_verdict(f, t, f, majority=0.8)[:2] == ("not supported", "seeds_backbone_degenerate")
    assert lowpass_verdict(f, f, t, majority=0.8)[:2] == ("not supported", "seeds_head_not_degenerate")
    assert lowpass_verdict(f, f, f, majority=0.8)[:2] == ("inconclusive", "seeds_head_degenerate_backbone_not")


def test_c7_rank_bound_rule():
    t, f = [True] * 5, [False] * 5
    assert rank_bound_verdict(t, t, 0.8)[:2] == ("supported", "seeds_premise_and_holding")
    assert rank_bound_verdict(t, f, 0.8)[:2] == ("not supported", "seeds_premise_and_holding")
    assert rank_bound_verdict(t, [True, False, False, False, False], 0.8)[:2] == ("inconclusive",
                                                                                 "seeds_premise_and_holding")
    assert rank_bound_verdict(f, t, 0.8)[:2] == ("inconclusive", "seeds_premise_met")

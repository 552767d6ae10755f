"""Estimates over seeds (headgeom.claims.estimates): the measured entry against the statistics
module, and the one text form "mean ± std" with its options."""
import math
import statistics

import pytest

from headgeom.claims.estimates import SPREAD_KIND, format_estimate, mean_std_text, measured


def test_measured_matches_the_statistics_module_and_counts_non_finite_values_in_n():
    xs = [0.3, -1.25, 2.0, 0.7]
    m = measured(xs + [float("nan"), float("inf")], what="a note")
    assert m["value"] == pytest.approx(statistics.fmean(xs), rel=1e-15)
    assert m["spread"] == pytest.approx(statistics.stdev(xs), rel=1e-14)
    assert (m["n"], m["min"], m["max"], m["spread_kind"], m["what"]) == (6, -1.25, 2.0, SPREAD_KIND, "a note")
    one = measured(4.5)
    assert (one["value"], one["spread"], one["n"]) == (4.5, 0.0, 1)
    none = measured([float("nan")])
    assert math.isnan(none["value"]) and none["min"] is None and none["n"] == 1


def test_format_estimate_writes_mean_plus_minus_std_with_its_options():
    m = {"value": 0.123456, "spread": 0.0456789, "n": 3}
    assert format_estimate(m) == "0.123 ± 0.046"
    assert format_estimate(m, ".3f", ".3f") == "0.123 ± 0.046"
    assert format_estimate(m, with_n=True) == "0.123 ± 0.046 (3)"
    single = {"value": 2.0, "spread": 0.0, "n": 1}
    assert format_estimate(single) == "2 ± 0"
    assert format_estimate(single, spread_of_one=False) == "2"


def test_mean_std_text_leaves_out_undefined_values_and_says_when_none_is_left():
    assert mean_std_text([1.0, None, 3.0, float("nan")], with_n=True) == f"2 ± {math.sqrt(2):.2g} (2)"
    assert mean_std_text([None, float("inf")]) == "-"
    assert mean_std_text([], empty="–") == "–"


def test_format_estimate_takes_number_functions_and_leaves_out_a_missing_spread():
    m = {"value": 1.5, "spread": None, "n": 2}
    assert format_estimate(m) == "1.5"
    assert format_estimate({"value": True, "spread": 0.25, "n": 4}, str, lambda x: f"{x:.1%}") == "True ± 25.0%"

"""C4 at the collapsed states of training runs: which points count, the row's kind, its conventions re-read, on
built series."""
from types import SimpleNamespace

from headgeom.claims.budget import PaperBudget
from headgeom.claims.collapsed_states import collapsed_points, collapsed_state_claim, collapsed_verdict

CONFIG = SimpleNamespace(negative_points=0.5, majority=0.8, collapse_fraction=0.5, rel_floor=1e-10)
PAPER = PaperBudget(epochs=10, batch=256, source="built")


def _run(spread, lmin, lmin_g, level=0.1, reading="tangential", gaps=None, floor=1e-10):
    n = len(spread)
    return {"collapse_level": level, "spread_projector": spread, f"lambda_min[{reading}]": lmin,
            f"floor[{reading}]": [floor] * n, f"lambda_min_G[{reading}]": lmin_g,
            f"threshold_ratio[{reading}]": [2.0 if x is not None and x < 0 else 0.5 for x in lmin],
            "view_gap_deg": gaps if gaps is not None else [10.0 + i for i in range(n)],
            "train_budget": {"steps": 100, "batch": 32}}


def test_only_collapsed_points_with_a_psd_g_are_judged():
    m = _run([0.05, 0.05, 0.05, 0.2], [-1.0, 1.0, -1.0, -1.0], [0.3, 0.3, -0.5, 0.3])
    pts = collapsed_points(m, "tangential")
    # point 3 is not collapsed (spread above the level), point 2 has an indefinite G: counted apart
    assert len(pts["collapsed"]) == 3 and len(pts["g_indefinite"]) == 1
    assert pts["past"] == [1.0, 0.0] and pts["ratio"] == [2.0, 0.5]
    assert pts["gap"] == [10.0, 11.0, 12.0]  # the view gap at every collapsed point


def test_a_run_without_a_calibrated_level_has_no_collapsed_state():
    m = _run([0.05], [-1.0], [0.3], level=None)
    assert collapsed_points(m, "tangential") == {"past": [], "ratio": [], "collapsed": [], "g_indefinite": [],
                                                 "gap": []}


def test_missing_series_entries_are_skipped():
    m = _run([0.05, 0.05], [None, -1.0], [None, None], gaps=[None, 3.0])
    pts = collapsed_points(m, "tangential")
    assert len(pts["collapsed"]) == 1 and pts["g_indefinite"] == [1.0] and pts["past"] == [] and pts["gap"] == [3.0]


def test_the_scales_re_read_the_collapse_level_and_the_floor():
    m = _run([0.05, 0.08], [-1e-9, -1e-9], [0.3, 0.3])
    assert len(collapsed_points(m, "tangential", level_scale=0.7)["collapsed"]) == 1  # level 0.07: 0.08 is out
    assert collapsed_points(m, "tangential")["past"] == [1.0, 1.0]
    # a floor 100x larger (1e-8) hides eigenvalues of -1e-9
    assert collapsed_points(m, "tangential", floor_scale=100.0)["past"] == [0.0, 0.0]


def _groups():
    # a smooth run past at every collapsed point, a ReLU run never (reported, not judged)
    return {"collapsed-silu": [_run([0.05] * 3, [-1e-9] * 3, [0.3] * 3) for _ in range(2)],
            "collapsed-relu": [_run([0.05] * 3, [1.0] * 3, [0.3] * 3) for _ in range(2)]}


SMOOTH = {"collapsed-silu": True, "collapsed-relu": False}


def test_the_tangential_row_is_a_test_with_its_conventions_re_read():
    row = collapsed_state_claim(CONFIG, _groups(), "tangential", {"preset": "quick"}, SMOOTH, paper=PAPER)
    assert row.evidence == "test" and row.verdict == "supported"
    assert row.conventions == ("view_gap", "rel_floor", "negative_points", "majority", "collapse_fraction")
    # the eigenvalue -1e-9 against a floor of 1e-10 (relative, stored as an absolute floor): it flips once the
    # floor passes 1e-9, i.e. at the floors 1e-8 and 1e-6 of the range
    assert row.robustness["rel_floor"].status == "flips at 1e-08, 1e-06"
    assert row.robustness["majority"].status == "robust"
    # every point has spread 0.05 under the level 0.1 = 0.5 x 0.2: a fraction 0.3 puts the level at 0.06 (still
    # collapsed); none of the range leaves the points uncollapsed
    assert row.robustness["collapse_fraction"].status == "robust"
    assert row.view_gap["value"] == 11.0 and row.view_gap["n"] == 6 and row.view_gap["unit"] == "degrees"
    assert "not swept" in row.criterion and row.headline_text


def test_a_built_rule_that_flips_at_a_known_collapse_fraction():
    # spreads 0.05 with a stored level 0.1 (fraction 0.5): below fraction 0.25 (level 0.05) no point is collapsed
    groups = {"collapsed-silu": [_run([0.05] * 2, [-1.0] * 2, [0.3] * 2) for _ in range(2)]}
    rule = dict(negative_points=0.5, majority=0.8)
    assert collapsed_verdict(groups, "tangential", {"collapsed-silu": True}, **rule).outcome == "supported"
    assert collapsed_verdict(groups, "tangential", {"collapsed-silu": True}, level_scale=0.4,
                             **rule).outcome == "inconclusive"  # level 0.04: no collapsed point, nothing judged


def test_the_ambient_row_is_a_diagnostic_that_counts_the_indefinite_points():
    groups = {"collapsed-silu": [_run([0.05] * 3, [-1.0] * 3, [-0.5, -0.5, 0.3], reading="ambient")],
              "collapsed-relu": [_run([0.05] * 3, [-1.0] * 3, [-0.5] * 3, reading="ambient")]}
    row = collapsed_state_claim(CONFIG, groups, "ambient", {"preset": "quick"}, SMOOTH, paper=PAPER)
    assert row.evidence == "diagnostic" and row.conventions == () and row.robustness == {}
    assert "G indefinite at 2 of 3 collapsed points of the smooth runs, 3 of 3 collapsed points of the linear/ReLU runs" \
        in row.criterion


def test_runs_tracked_before_the_view_gap_say_so():
    groups = {"collapsed-silu": [_run([0.05] * 2, [-1.0] * 2, [0.3] * 2, gaps=[])]}
    row = collapsed_state_claim(CONFIG, groups, "tangential", {"preset": "quick"}, {"collapsed-silu": True}, paper=PAPER)
    assert row.view_gap is None and "rerun them" in row.criterion
    # no angle was recorded: the per-run entry counts none (n = 0), not one
    assert row.measured["view_gap_deg[collapsed-silu]"].n == 0

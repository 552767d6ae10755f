"""C4 at the collapsed states of training runs: which points count, on built series."""
from headgeom.claims.collapsed_states import collapsed_points


def _run(spread, lmin, lmin_g, level=0.1):
    n = len(spread)
    return {"collapse_level": level, "spread_projector": spread, "lambda_min[tangential]": lmin,
            "floor[tangential]": [1e-10] * n, "lambda_min_G[tangential]": lmin_g,
            "threshold_ratio[tangential]": [2.0 if x is not None and x < 0 else 0.5 for x in lmin]}


def test_only_collapsed_points_with_a_psd_g_are_judged():
    m = _run([0.05, 0.05, 0.05, 0.2], [-1.0, 1.0, -1.0, -1.0], [0.3, 0.3, -0.5, 0.3])
    pts = collapsed_points(m, "tangential")
    # point 3 is not collapsed (spread above the level), point 2 has an indefinite G: counted apart
    assert len(pts["collapsed"]) == 3 and len(pts["g_indefinite"]) == 1
    assert pts["past"] == [1.0, 0.0] and pts["ratio"] == [2.0, 0.5]


def test_a_run_without_a_calibrated_level_has_no_collapsed_state():
    m = _run([0.05], [-1.0], [0.3], level=None)
    assert collapsed_points(m, "tangential") == {"past": [], "ratio": [], "collapsed": [], "g_indefinite": []}


def test_missing_series_entries_are_skipped():
    m = _run([0.05, 0.05], [None, -1.0], [None, None])
    pts = collapsed_points(m, "tangential")
    assert len(pts["collapsed"]) == 1 and pts["g_indefinite"] == [1.0] and pts["past"] == []

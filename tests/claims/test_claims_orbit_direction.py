"""C10's rule (headgeom.claims.orbit_direction) on built estimates: the direction of one interval against 1,
a method's verdict over its checkpoint × family pairs (with the pair that decided as its headline), and the
dichotomy over the three methods."""
import pytest

from headgeom.claims.orbit_direction import dichotomy_verdict, direction, direction_verdict


def _est(v, lo, hi):
    return {"value": v, "ci": [lo, hi]}


def test_direction_reads_the_interval():
    assert direction(_est(2, 1.01, 3)) == "compress"
    assert direction(_est(0.5, 0.2, 0.99)) == "expand"
    assert direction(_est(1, 0.9, 1.1)) == "neither"
    assert direction(_est(1, None, 1.1)) == "undefined"
    assert direction(_est(5, 2, "inf")) == "compress"  # an infinite bound as headgeom writes it
    assert direction({"value": 1}) == "undefined"


def test_a_method_is_supported_only_when_every_pair_goes_the_stated_way():
    every = {"s[vit/rot]": "compress", "s[r50/rot]": "compress"}
    assert direction_verdict(every, "compress") == ("supported", "s[vit/rot]", "")
    assert direction_verdict(every, "compress", lead="s[r50/rot]").headline == "s[r50/rot]"
    # one pair the opposite way refutes, and is the headline, whatever comes before it
    mixed = {"s[vit/rot]": "neither", "s[r50/rot]": "expand", "s[r50/hue]": "compress"}
    assert direction_verdict(mixed, "compress") == ("not supported", "s[r50/rot]", "")
    # no pair the opposite way, one not the stated way: undecided, that pair named
    undecided = {"s[vit/rot]": "compress", "s[r50/rot]": "undefined"}
    assert direction_verdict(undecided, "compress") == ("inconclusive", "s[r50/rot]", "")
    assert direction_verdict({"s[v/r]": "expand"}, "expand").outcome == "supported"
    with pytest.raises(ValueError, match="at least one"):
        direction_verdict({}, "compress")
    # a checkpoint not measured decides, whatever the others say
    assert direction_verdict(every, "compress", complete=False) == ("inconclusive", "checkpoints_measured", "")


@pytest.mark.parametrize("verdicts, complete, outcome", [
    ({"dino": "supported", "vicreg": "supported", "barlow": "supported"}, True, "supported"),
    ({"dino": "supported", "vicreg": "not supported", "barlow": "inconclusive"}, True, "not supported"),
    ({"dino": "supported", "vicreg": "inconclusive", "barlow": "supported"}, True, "inconclusive"),
    ({"dino": "supported", "vicreg": "supported", "barlow": "supported"}, False, "inconclusive"),
])
def test_the_dichotomy_combines_the_methods(verdicts, complete, outcome):
    verdict = dichotomy_verdict(verdicts, complete)
    assert verdict.outcome == outcome
    assert verdict.headline == ("methods_not_supported" if outcome == "not supported" else "methods_supported")

"""The typed claims core (headgeom.claims: Measured, Row, Verdict, Robustness, Claim): each checks
itself when made, with one line naming what is wrong; the JSON forms round-trip, results files written
before the types (docs/results/*.json) load and write back unchanged, and optional fields appear only when
present."""
import json
import math
from pathlib import Path

import pytest

from headgeom.claims.claim import CLAIMS, Claim, claim_of, declare
from headgeom.claims.estimates import measured
from headgeom.claims.measured import Measured
from headgeom.claims.robustness import Robustness, robustness_text, status_of, sweep, with_own
from headgeom.claims.row import NOT_MEASURED, Row, row_name
from headgeom.claims.verdict import Verdict
from headgeom.io import json_safe

ROOT = Path(__file__).resolve().parents[2]
RESULTS = sorted((ROOT / "docs" / "results").glob("*.json"))


def _row(**over):
    fields = {"id": "C4", "statement": "s", "setting": {"reading": "tangential", "part": "collapsed states"},
              "measured": {"x": measured([1.0, 3.0]), "note": "text"}, "verdict": "supported",
              "evidence": "test", "headline": "x", "criterion": "c"}
    return Row(**{**fields, **over})


def test_measured_is_the_mean_std_entry_and_reads_as_its_json_form():
    m = measured([1.0, 3.0, float("nan")], what="w")
    assert (m.value, m.n, m.spread, m.min, m.max) == (2.0, 3, math.sqrt(2.0), 1.0, 3.0)
    assert m["value"] == 2.0 and m.get("what") == "w" and m.get("ci") is None and "ci" not in m
    assert list(m) == ["value", "n", "spread", "spread_kind", "min", "max", "what"]
    assert Measured.from_json(m.to_json()) == m
    # a key written as null stays null (a single model's bootstrap estimate has "spread": null beside its ci)
    one = Measured.from_json({"value": 1.4, "n": 1, "spread": None, "ci": [1.2, 1.6], "level": 0.95})
    assert one.to_json() == {"value": 1.4, "n": 1, "spread": None, "ci": [1.2, 1.6], "level": 0.95}
    assert one.replace(spread=0.1).to_json()["spread"] == 0.1 and one.ci == (1.2, 1.6)
    assert math.isnan(Measured.from_json({"value": None, "n": 0}).finite_value)  # NaN as results.json writes it
    assert Measured.from_json({"value": "-inf", "n": 2}).finite_value == -math.inf


@pytest.mark.parametrize("entry, match", [
    ({"value": 1.0}, "at least 'value' and 'n'"), ({"value": 1.0, "n": -1}, "n, a count >= 0"),
    ({"value": "big", "n": 1}, "value must be a number"), ({"value": 1.0, "n": 1, "ci": [1.0]}, "the pair"),
    ({"value": 1.0, "n": True}, "n, a count"),
])
def test_a_bad_measured_entry_is_one_line_naming_it(entry, match):
    with pytest.raises(ValueError, match=match):
        Measured.from_json(entry, "x")


def test_a_row_checks_itself_and_names_itself_in_every_error():
    assert row_name("C4", {"part": "collapsed states", "reading": "tangential"}) == \
        "C4 (part collapsed states, reading tangential)"
    assert _row().name == "C4 (part collapsed states, reading tangential)"
    with pytest.raises(ValueError, match=r"claim row C4 \(part collapsed states, reading tangential\): headline 'y'"):
        _row(headline="y")
    with pytest.raises(ValueError, match="verdict 'maybe' is not one of"):
        _row(verdict="maybe")
    with pytest.raises(ValueError, match="evidence 'proof' is not one of"):
        _row(evidence="proof")
    with pytest.raises(ValueError, match="measured entry 'x' must hold at least"):
        _row(measured={"x": {"mean": 1.0}})
    with pytest.raises(ValueError, match="needs an id"):
        _row(id="")
    with pytest.raises(ValueError, match="unknown keys \\['verdit'\\]"):
        Row.from_json({**_row().to_json(), "verdit": "x"})
    with pytest.raises(ValueError, match="robustness over \\['floor'\\], which its conventions"):
        _row(robustness={"floor": Robustness.of(1e-10, (1e-10, 1e-8), ("supported", "supported"))})


def test_the_decision_is_the_verdict_a_rule_returns():
    row = _row(reason="all seeds")
    assert row.decision == Verdict("supported", "x", "all seeds") and row.headline_entry.value == 2.0
    outcome, headline, reason = row.decision  # a rule's result unpacks
    assert (outcome, headline, reason) == ("supported", "x", "all seeds")
    with pytest.raises(ValueError, match="not one of"):
        Verdict("holds", "x")
    with pytest.raises(ValueError, match="names the measured key"):
        Verdict("supported", "")


def test_optional_fields_are_written_only_when_present():
    plain = _row().to_json()
    assert list(plain) == ["id", "statement", "setting", "measured", "headline", "verdict", "evidence", "criterion"]
    gap = measured([5.6, 6.0], what="angle between the two views' head outputs, degrees")
    sweep_ = Robustness.of(0.1, (0.1, 0.3, 1.0), ("not supported", "not supported", "supported"))
    full = _row(conventions=("view_gap",), robustness={"view_gap": sweep_}, view_gap=gap, source="ours (quick)",
                headline_text="states past their own threshold", experiment="C4",
                incomplete="1 of 3 cells failed").to_json()
    assert full["conventions"] == ["view_gap"] and full["view_gap"] == gap.to_json()
    assert full["headline_text"] == "states past their own threshold"
    assert full["robustness"] == {"view_gap": {"at": 0.1, "values": [0.1, 0.3, 1.0],
                                               "verdicts": ["not supported", "not supported", "supported"],
                                               "status": "flips at 1"}}
    back = Row.from_json(json.loads(json.dumps(json_safe(full))))
    assert back.to_json() == full and back.robustness["view_gap"].status == "flips at 1"


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_results_files_written_before_the_types_load_and_write_back_unchanged(path):
    results = json.loads(path.read_text(encoding="utf-8"))
    for entry in results["claims"]:
        row = Row.from_json(entry)
        expected = {k: v for k, v in entry.items() if v is not None}  # a null optional key is an absent one
        assert json.loads(json.dumps(json_safe(row.to_json()))) == expected, row.name


def test_robustness_status_follows_from_the_verdicts():
    def rule(view_gap):  # a built rule that flips at a known value: past the threshold from 0.5 on
        return Verdict("supported" if view_gap >= 0.5 else "not supported", "threshold_ratio")

    assert sweep(rule, 0.1, (0.1, 0.3)).status == "robust"
    swept = sweep(rule, 0.1, (0.1, 0.3, 0.5, 1.0))
    assert swept.verdicts == ("not supported", "not supported", "supported", "supported")
    assert swept.status == "flips at 0.5, 1"
    assert status_of("a", ("a", "b"), ("supported", "inconclusive")) == "flips at b"
    with pytest.raises(ValueError, match="does not follow"):
        Robustness(0.1, (0.1, 1.0), ("supported", "not supported"), "robust")
    with pytest.raises(ValueError, match="among the values swept"):
        Robustness.of(2.0, (0.1, 1.0), ("supported", "supported"))
    # a row's own setting joins its range, in order; the sweeps read in words for its criterion
    assert with_own(0.2, (0.5, 0.1, 1.0)) == [0.1, 0.2, 0.5, 1.0] and with_own(0.5, (0.1, 0.5)) == [0.1, 0.5]
    text = robustness_text({"view_gap": swept, "floor": sweep(rule, 0.1, (0.1,))})
    assert text == "view_gap over [0.1, 0.3, 0.5, 1.0]: flips at 0.5, 1; floor over [0.1]: robust"


def test_a_test_row_lacks_its_conventions_unless_it_could_not_be_measured():
    def rule(floor):
        return Verdict("supported" if floor < 1 else "not supported", "x")

    assert _row().convention_gaps() == ["names no conventions"]
    named = _row(conventions=("floor", "majority"), robustness={"floor": sweep(rule, 0.1, (0.1, 2.0))})
    assert named.convention_gaps() == [] and named.unswept == ("majority",)  # shown "not swept", said why
    assert _row(evidence="diagnostic").convention_gaps() == []  # its outcome is fixed: nothing to re-judge
    # a test row whose data is missing has no verdict to re-judge; one with another reason still must
    missing = _row(verdict="inconclusive", reason=f"{NOT_MEASURED}CIFAR-10 not found")
    assert missing.convention_gaps() == []
    assert _row(verdict="inconclusive", reason="too few seeds").convention_gaps() == ["names no conventions"]


def test_claims_and_their_declaration():
    assert CLAIMS["C4"].paper == "proof" and claim_of("C4").short.startswith("smooth heads")
    assert claim_of("C99", "a statement of its own").short == "a statement of its own"
    toy = Claim("C99", "a toy claim", "none")
    try:
        assert declare(toy) is toy and claim_of("C99") == toy
        with pytest.raises(ValueError, match="declared twice"):
            declare(Claim("C99", "other words"))
    finally:
        CLAIMS.pop("C99", None)

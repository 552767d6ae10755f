"""A claim's bottom line (headgeom.claims.bottom_line) on built rows: every conclusion is reachable, only test rows
decide, a row whose verdict flips within a convention's range or that is budget-limited does not decide by itself,
headgeom's rows and the authors' runs re-judged are judged by one rule, a claim without a test row is undecided,
and a failing identity is said in the text. The conclusion is also checked against a decision table written
separately here, over every combination of up to three rows."""
import itertools

import pytest

from headgeom.claims.bottom_line import (CONCLUSIONS, DECIDES, ROLES, RULE, Basis, BottomLine, bottom_line,
                                         bottom_lines, conclusion_of, role_of)
from headgeom.claims.budget import PaperBudget, budget
from headgeom.claims.estimates import measured
from headgeom.claims.robustness import Robustness
from headgeom.claims.row import Row
from headgeom.claims.sources import AUTHORS, ours

PAPER = PaperBudget(epochs=50, batch=256, source="docs/paper.md §3, a toy protocol")
FULL = budget(PAPER.steps, PAPER.batch, PAPER)          # the paper's budget: fraction 1
SHORT = budget(100, 32, PAPER)                          # 100 × 32 images of 50 · 195 × 256: budget-limited


def row(verdict="supported", evidence="test", cid="C4", part="a", source=None, **over):
    fields = {"id": cid, "statement": "s", "setting": {"part": part}, "measured": {"x": measured([1.0, 2.0])},
              "verdict": verdict, "evidence": evidence, "headline": "x", "criterion": "c",
              "source": source or ours("quick")}
    return Row(**{**fields, **over})


def flips_at(values=(0.1, 0.3, 1.0), at=0.1, verdicts=("supported", "supported", "not supported")):
    return {"view_gap": Robustness.of(at, values, verdicts)}


def line(*rows, claim="C4"):
    return bottom_line(claim, list(enumerate(rows)))


def test_every_conclusion_is_reachable_and_the_text_starts_with_it():
    cases = {
        "holds": [row("supported", part="a"), row("supported", part="b")],
        "does not hold": [row("not supported", part="a"), row("inconclusive", part="b")],
        "holds in part": [row("supported", part="a"), row("not supported", part="b")],
        "undecided": [row("inconclusive", part="a"), row("inconclusive", part="b")],
    }
    for conclusion, rows in cases.items():
        got = line(*rows)
        assert got.conclusion == conclusion, (conclusion, got.text)
        assert got.text.startswith(conclusion.capitalize() + ": ") and got.text.endswith(".")
        assert got.rest == got.text[len(conclusion) + 2:]
    assert set(cases) == set(CONCLUSIONS)
    # supported where decided, undecided elsewhere: in part, never "holds"
    partly = line(row("supported", part="a"), row("inconclusive", part="b"))
    assert partly.conclusion == "holds in part" and "not deciding: 1 of our test rows (part b) inconclusive" in partly.text


def test_only_test_rows_decide():
    base = [row("supported", part="a")]
    others = [row("not supported", evidence="identity", part="i"), row("not supported", evidence="premise", part="p"),
              row("not supported", evidence="diagnostic", part="d"), row("inconclusive", evidence="identity", part="j")]
    assert line(*base).conclusion == line(*base, *others).conclusion == "holds"
    assert [b.row for b in line(*others, *base).rows] == [4]  # it rests on the test row, at its index
    alone = line(*others)
    assert alone.conclusion == "undecided" and alone.rows == ()
    assert "no test row measures it" in alone.text and "check headgeom's code" in alone.text
    assert "show what a reading fixes" in alone.text and "could come out either way" in alone.text


def test_a_failing_identity_is_said_but_does_not_decide():
    got = line(row("supported"), row("not supported", evidence="identity", part="threshold"))
    assert got.conclusion == "holds"
    assert "1 identity check of it fails (C4 (part threshold)), a bug in headgeom" in got.text
    held = line(row("supported"), row("supported", evidence="identity", part="threshold"))
    assert "bug" not in held.text


def test_a_verdict_that_flips_within_its_range_does_not_decide_by_itself():
    flipping = row("supported", conventions=("view_gap",), robustness=flips_at())
    assert role_of(flipping) == "flips"
    got = line(flipping)
    assert got.conclusion == "undecided"
    assert "view_gap flips at 1" in got.text and "fixed by the theorem or measured" in got.text
    # beside a firm row it cannot make the claim hold, only hold in part
    firm = row("supported", part="b", conventions=("view_gap",),
               robustness=flips_at(verdicts=("supported",) * 3))
    assert role_of(firm) == DECIDES
    both = line(firm, flipping)
    assert both.conclusion == "holds in part" and "robust over view_gap" in both.text
    # a refutation that flips does not refute
    assert line(row("not supported", conventions=("view_gap",),
                    robustness=flips_at(verdicts=("not supported", "supported", "supported")))).conclusion == "undecided"


def test_robustness_not_swept_is_said():
    assert "robustness to the rows' conventions not swept" in line(row("supported")).text
    named_only = row("supported", conventions=("view_gap", "floor"),
                     robustness=flips_at(verdicts=("supported",) * 3))
    swept = row("supported", part="b", conventions=("view_gap",), robustness=flips_at(verdicts=("supported",) * 3))
    assert "robustness not swept for 1 of these 2 rows" in line(named_only, swept).text
    assert "robust over view_gap" in line(swept).text


def test_a_budget_limited_row_speaks_for_its_budget_only():
    limited = row("not supported", budget=SHORT)
    assert SHORT.limited and role_of(limited) == "budget-limited"
    got = line(limited)
    assert got.conclusion == "undecided"
    assert "at 0.13% of the paper's training budget" in got.text  # 3200 / (50 · ⌊50000 / 256⌋ · 256) = 0.00128
    assert "budget-limited: 1 do not support it at that budget" in got.text
    assert "runs at 25% or more of the paper's training budget" in got.text
    at_budget = row("not supported", budget=FULL)
    assert role_of(at_budget) == DECIDES and line(at_budget).conclusion == "does not hold"
    assert "at 100% of the paper's training budget" in line(at_budget).text


def test_ours_and_the_authors_runs_are_judged_by_one_rule():
    theirs = row("supported", source=AUTHORS, part="rotation", budget=FULL)
    mine = row("inconclusive", part="knn", budget=SHORT)
    got = line(theirs, mine)
    assert got.conclusion == "holds in part"
    assert "1 test row of the authors' runs re-judged (at 100% of the paper's training budget) supports it" in got.text
    assert "1 of our test rows (at 0.13% of the paper's training budget) inconclusive" in got.text
    assert [(b.source, b.role) for b in got.rows] == [(AUTHORS, "decides"), (ours("quick"), "inconclusive")]
    # the same rows with their sources swapped come to the same conclusion: the source never weighs
    swapped = line(theirs.replace(source=ours("quick")), mine.replace(source=AUTHORS))
    assert swapped.conclusion == got.conclusion
    # an authors' row below the budget decides no more than ours would
    assert line(theirs.replace(budget=SHORT)).conclusion == "undecided"


def test_an_undecided_row_says_what_would_decide_it():
    told = row("inconclusive", reason="two of the four checkpoint files are missing; with them it is decided")
    assert "what would decide it: two of the four checkpoint files are missing" in line(told).text
    assert "what the inconclusive rows' criteria ask for" in line(row("inconclusive")).text


def test_rows_are_named_by_what_sets_them_apart_and_indexed_into_the_list():
    rows = [row("supported", cid="C1", setting={"objective": "mse", "reading": "ambient"}),
            row("not supported", cid="C1", setting={"objective": "vicreg", "reading": "ambient"}),
            row("supported", cid="C4")]
    lines = bottom_lines(rows)
    assert [b.claim for b in lines] == ["C1", "C4"]
    assert [(b.row, b.name) for b in lines[0].rows] == [(0, "objective mse"), (1, "objective vicreg")]
    assert [b.row for b in lines[1].rows] == [2]
    assert [b.claim for b in bottom_lines([row(cid="C10"), row(cid="C2")])] == ["C2", "C10"]


def _independent(pairs):
    """The conclusion by a table written apart from the module: pairs of (verdict, decides)."""
    firm = [v for v, decides in pairs if decides]
    if not firm:
        return "undecided"
    if all(v == "supported" for v in firm) and len(firm) == len(pairs):
        return "holds"
    if "supported" in firm:
        return "holds in part"
    return "does not hold"


def test_the_conclusion_follows_a_decision_table_over_every_small_case():
    kinds = [("supported", "decides"), ("not supported", "decides"), ("inconclusive", "inconclusive"),
             ("supported", "flips"), ("not supported", "budget-limited")]
    for n in range(0, 4):
        for combo in itertools.product(kinds, repeat=n):
            rows = [Basis(i, f"r{i}", "s", v, role) for i, (v, role) in enumerate(combo)]
            assert conclusion_of(rows) == _independent([(v, role == "decides") for v, role in combo]), combo


def test_a_bottom_line_checks_itself_and_round_trips():
    got = line(row("supported"), row("not supported", part="b"))
    assert BottomLine.from_json(got.to_json()) == got
    edited = {**got.to_json(), "conclusion": "holds"}
    with pytest.raises(ValueError, match="does not follow from its rows; the rule gives 'holds in part'"):
        BottomLine.from_json(edited)
    with pytest.raises(ValueError, match="starting with 'Holds in part: '"):
        BottomLine.from_json({**got.to_json(), "text": "Holds: it does."})
    with pytest.raises(ValueError, match="conclusion 'maybe' is not one of"):
        BottomLine.from_json({**got.to_json(), "conclusion": "maybe"})
    with pytest.raises(ValueError, match="role 'maybe'"):
        Basis(0, "r", "s", "supported", "maybe")
    with pytest.raises(ValueError, match="only a decided verdict decides"):
        Basis(0, "r", "s", "inconclusive", "decides")
    assert set(ROLES) >= {"decides", "inconclusive", "flips", "budget-limited"}
    assert "one pool under the same rule" in RULE and "25%" in RULE

"""The training budget of a verdict against the paper's, and its 25 % label (hand formulas below)."""
import pytest

from headgeom.experiments.c8_hessian_tracking import PAPER_BUDGET as C8
from headgeom.experiments.collapse_grid import PAPER_BUDGET as GRID
from headgeom.claims.budget import LIMITED_BELOW, Budget, PaperBudget, budget, budget_of_cells, budget_text
from headgeom.claims.row import Row
from headgeom.report.markdown import claims_table
from headgeom.report.terminal import format_claims_short


def test_the_paper_budgets_are_the_protocols_numbers():
    # collapse grid: 50 epochs of CIFAR-10 (50,000 images) at batch 512, whole batches: 97 steps an epoch
    assert (GRID.epochs, GRID.batch, GRID.n_train, GRID.steps) == (50, 512, 50_000, 50 * 97)
    # Hessian tracking: 100 epochs at batch 256, 195 steps an epoch (the paper tracked once per 195 steps)
    assert (C8.epochs, C8.batch, C8.steps) == (100, 256, 100 * 195)


def test_fraction_is_images_seen_against_the_papers():
    b = budget(100, 32, GRID)
    assert b.fraction == pytest.approx(100 * 32 / (4850 * 512))
    assert (b.steps, b.batch, b.paper_steps, b.paper_batch, b.limited) == (100, 32, 4850, 512, True)
    full = budget(19_500, 256, C8)
    assert full.fraction == pytest.approx(1.0) and not full.limited
    with pytest.raises(ValueError, match="batch=0"):
        budget(10, 0, GRID)


def test_the_label_on_both_sides_of_25_percent():
    paper = PaperBudget(epochs=1, batch=100, n_train=400)  # 4 steps of 100 = 400 images
    assert LIMITED_BELOW == 0.25
    below, at, above = budget(1, 99, paper), budget(1, 100, paper), budget(1, 101, paper)
    assert below.fraction == pytest.approx(99 / 400) and below.limited
    assert at.fraction == pytest.approx(0.25) and not at.limited
    assert above.fraction == pytest.approx(101 / 400) and not above.limited
    assert budget_text(below).endswith(", budget-limited") and "budget-limited" not in budget_text(above)
    assert budget_text(at) == "25% of the paper's budget (1 steps × 100 vs 4 × 100)"


def test_a_verdict_is_as_limited_as_its_least_trained_cell():
    cells = [{"train_budget": {"steps": 10, "batch": 8}}, {"train_budget": {"steps": 4, "batch": 8}}, {"x": 1}]
    assert budget_of_cells(cells, GRID).steps == 4
    assert budget_of_cells([{"x": 1}], GRID) is None


def test_the_report_labels_budget_limited_verdicts():
    row = Row(id="C8", statement="s", setting={}, measured={"x": 1.0}, verdict="supported", criterion="c",
              evidence="test", headline="x", budget=budget(100, 32, C8))
    full = row.replace(id="C12", budget=budget(19_500, 256, C8))
    table = claims_table([row, full])
    assert ("| **supported**, budget-limited<br>budget: 0.0641% of the paper's budget (100 steps × 32 vs 19500 × 256) |"
            in table)
    assert "| **supported**<br>budget: 100% of the paper's budget" in table
    short = format_claims_short([row, full], width=200).splitlines()
    assert short[2].startswith("  [test] supported, budget-limited") and "budget-limited" not in short[4]


def test_a_malformed_budget_is_rejected_with_the_row():
    row = {"id": "C8", "statement": "s", "setting": {}, "measured": {"x": {"value": 1.0, "n": 1, "spread": 0.0}},
           "verdict": "supported", "criterion": "c", "evidence": "test", "budget": budget(100, 32, C8).to_json(),
           "headline": "x"}
    assert Row.from_json(row).budget == Budget.from_json(row["budget"]) and Row.from_json(dict(row, budget=None))
    assert Row.from_json(row).to_json()["budget"] == row["budget"]  # the JSON form round-trips
    with pytest.raises(ValueError, match="C8: budget .* lacks \\['paper_steps'\\]"):
        Row.from_json(dict(row, budget={k: v for k, v in row["budget"].items() if k != "paper_steps"}))
    with pytest.raises(ValueError, match="limited=False but fraction"):
        Row.from_json(dict(row, budget=dict(row["budget"], limited=False)))
    with pytest.raises(ValueError, match="unknown keys \\['spent'\\]"):
        Row.from_json(dict(row, budget=dict(row["budget"], spent=1)))

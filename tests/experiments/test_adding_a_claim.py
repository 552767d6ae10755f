"""Adding a claim is one experiment module, its rule and its test (docs/design.md, "Adding a claim"): a toy
claim declared and registered from this file alone runs through the runner and comes out in every report
(results.json, report.md, report.html, the terminal summary and the dry run), no other file touched."""
from __future__ import annotations

import dataclasses
import json

import pytest

from headgeom.claims.claim import CLAIMS, Claim
from headgeom.claims.estimates import measured
from headgeom.claims.evidence import TEST
from headgeom.claims.robustness import sweep
from headgeom.claims.row import Row
from headgeom.claims.verdict import Verdict
from headgeom.cli import main
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary, register
from headgeom.report.markdown import rows_of
from headgeom.report.terminal import format_claims_short
from headgeom.report.paper_protocol import PaperProtocol
from headgeom.report.table import Table

CLAIM = Claim("C13", "a toy claim: every seed's value clears a floor", "no number")


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    preset: str = "quick"
    seeds: int = 3
    floor: float = 0.5  # the rule's threshold


def cleared_floor(values: list[float], floor: float) -> Verdict:
    """The toy claim's rule (in a real claim: a module of headgeom.claims): supported when every value clears the
    floor, not supported when none does, inconclusive otherwise or without values."""
    if not values:
        return Verdict("inconclusive", "min_value", "no seed ran")
    above = sum(v > floor for v in values)
    outcome = "supported" if above == len(values) else "not supported" if above == 0 else "inconclusive"
    return Verdict(outcome, "min_value", f"{above} of {len(values)} seeds above {floor:g}")


def summarize(config: ToyConfig, results: list[tuple[dict, dict]]) -> Summary:
    values = [m["v"] for _, m in results]
    verdict = cleared_floor(values, config.floor)
    row = Row(id=CLAIM.id, statement=CLAIM.short, setting={"objective": "none", "floor": config.floor},
              measured={"min_value": measured(min(values), n=len(values)), "value": measured(values)},
              verdict=verdict.outcome, headline=verdict.headline, evidence=TEST, reason=verdict.reason,
              conventions=("floor",),  # a test row names what its verdict depends on, re-judged over a range
              robustness={"floor": sweep(lambda f: cleared_floor(values, f), config.floor, [0.25, 0.5, 0.75])},
              criterion=f"supported if every seed's value > {config.floor:g}, not supported if none, else inconclusive")
    table = Table(("seed", "value"), title="Toy values per seed")
    for cell, m in results:
        table.add(cell["seed"], f"{m['v']:.3g}")
    return Summary(claims=[row], tables=[table], notes=["the toy's values are seed + 1"])


EXPERIMENT = Experiment(
    id="TOY", title="A toy claim", statement=CLAIM.short, presets={"quick": ToyConfig},
    cells=lambda config, seeds: [{"seed": s} for s in range(seeds)],
    run_cell=lambda config, cell: {"v": cell["seed"] + 1.0}, summarize=summarize, theory=True,
    claims=(CLAIM,), protocol=PaperProtocol({"floor": 0.25}))


@pytest.fixture
def toy():
    runner._load()
    register(EXPERIMENT)
    yield EXPERIMENT
    EXPERIMENTS.pop(EXPERIMENT.id, None)
    CLAIMS.pop(CLAIM.id, None)


def test_the_rule_on_built_values():
    assert cleared_floor([1.0, 2.0], 0.5) == ("supported", "min_value", "2 of 2 seeds above 0.5")
    assert cleared_floor([0.1, 0.2], 0.5).outcome == "not supported"
    assert cleared_floor([0.1, 2.0], 0.5).outcome == "inconclusive"
    assert cleared_floor([], 0.5).outcome == "inconclusive"


def test_a_toy_claim_comes_out_in_every_report(toy, tmp_path, capsys):
    out = tmp_path / "o"
    res = runner.run_experiments(["TOY"], out=out, progress=False)
    assert res["n_failed"] == 0
    (row,) = json.loads((out / "results.json").read_text())["claims"]
    assert (row["id"], row["verdict"], row["headline"], row["experiment"]) == ("C13", "supported", "min_value", "TOY")
    assert row["measured"]["min_value"]["value"] == 1.0 and row["source"] == "ours (quick)"
    md = (out / "report.md").read_text()
    # the summary says the declared gist and the paper's number; the details carry the row, the table, the note
    assert "| **C13** | a toy claim: every seed's value clears a floor | no number | tests: 1 supported" in md
    assert "## C13: a toy claim" in md and "#### Toy values per seed\n\n| seed | value |\n|---|---|\n| 0 | 1 |" in md
    assert "**min_value: 1 ± 0 (n=3)**" in md and "- the toy's values are seed + 1" in md
    html = (out / "report.html").read_text()
    assert 'data-claim="C13"' in html and "<th>seed</th><th>value</th>" in html
    short = format_claims_short(rows_of(res))
    assert short.splitlines()[:3] == ["C13  a toy claim: every seed's value clears a floor", "  ours: tests: 1 supported",
                                      "  [test] supported  min_value: 1 ± 0 (n=3); +1 more in report.md"]
    # its bottom line leads the report and is in results.json, derived from its one test row
    (line,) = json.loads((out / "results.json").read_text())["bottom_lines"]
    assert (line["claim"], line["conclusion"], [b["row"] for b in line["rows"]]) == ("C13", "holds", [0])
    assert md.index("## Bottom lines") < md.index(line["text"].replace("Holds: ", "**holds**: ")) < md.index("## Summary")
    # the dry run prints the toy's paper protocol beside its preset
    assert main(["theory", "--only", "TOY", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    dry = capsys.readouterr().out
    assert "| floor | 0.5 | 0.25 | the quick preset is scaled down (the paper preset follows the paper) |" in dry

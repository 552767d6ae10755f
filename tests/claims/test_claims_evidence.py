"""Evidence kinds of claim rows, on a fake experiment registered here (and removed afterwards).

The fake experiment's cells give v = seed + 1. Its summary builds one row of each kind, each made to
have that kind: a test (v > threshold in every seed: the config decides either way), an identity
(the mean of v equals sum(v) / n by construction; ``bug`` breaks it on purpose), a premise (at
least two seeds, which the theorem of the fake claim would need) and a diagnostic (v > 0, which the
cells' construction v = seed + 1 fixes).
"""
import dataclasses
import json

import pytest

from headgeom.claims.evidence import (EVIDENCE, KINDS, VERDICTS, EvidenceKind, check_kind, count_verdicts, counts_text,
                                      support_counts, verdict_text)
from headgeom.claims.row import Row
from headgeom.experiments import runner
from headgeom.experiments.registry import EXPERIMENTS, Experiment, Summary, measured
from headgeom.experiments.runner import run_experiments
from headgeom.report.markdown import claims_table, evidence_legend, rows_of
from headgeom.report.terminal import format_claims_short

FAKE = "FAKE_EVIDENCE"


@dataclasses.dataclass(frozen=True)
class Config:
    seeds: int = 2
    threshold: float = 0.5
    bug: bool = False


def _row(kind, verdict, statement, values=(0.0,)):
    return Row(id=FAKE, statement=statement, setting={"objective": "none"}, measured={"v": measured(list(values))},
               verdict=verdict, criterion="see the statement", evidence=kind, headline="v")


def _summarize(config, results):
    vals = [m["v"] for _, m in results]
    mean = measured(vals)["value"] + (1.0 if config.bug else 0.0)
    return Summary(claims=[
        _row("test", "supported" if min(vals) > config.threshold else "not supported", "v exceeds the threshold", vals),
        _row("identity", "supported" if mean == sum(vals) / len(vals) else "not supported", "mean = sum / n", vals),
        _row("premise", "supported" if len(vals) >= 2 else "not supported", "at least two seeds", vals),
        _row("diagnostic", "supported" if min(vals) > 0 else "not supported", "v > 0 (fixed by v = seed + 1)", vals),
    ])


@pytest.fixture
def fake():
    runner._load()
    EXPERIMENTS.pop(FAKE, None)

    def register(**kw):
        EXPERIMENTS[FAKE] = Experiment(
            id=FAKE, title="fake evidence", statement="fake", presets={"quick": lambda: Config(**kw)},
            cells=lambda config, seeds: [{"seed": s} for s in range(seeds)],
            run_cell=lambda config, cell: {"v": cell["seed"] + 1.0}, summarize=_summarize)

    yield register
    EXPERIMENTS.pop(FAKE, None)


def _run(tmp_path, name, **kw):
    res = run_experiments([FAKE], out=tmp_path / name, progress=False)
    return res, (tmp_path / name / "report.md").read_text()


def test_each_kind_holds_on_a_case_built_to_have_it(fake, tmp_path):
    fake()
    res, report = _run(tmp_path, "ok")
    kinds = {c.evidence: c for c in rows_of(res)}
    assert set(kinds) == set(EVIDENCE)
    assert [verdict_text(kinds[k]) for k in EVIDENCE] == ["supported", "identity holds", "premise holds",
                                                          "diagnostic: shows it (fixed by the reading)"]
    data = json.loads((tmp_path / "ok" / "results.json").read_text())
    assert [c["evidence"] for c in data["claims"]] == ["test", "identity", "premise", "diagnostic"]
    # a diagnostic is shown and never counted as support
    assert support_counts(rows_of(res)) == {"supported": 1, "not supported": 0, "inconclusive": 0}
    assert "| test | **supported** |" in report and "| identity | **identity holds** |" in report
    assert "| premise | **premise holds** |" in report


def test_failures_are_named_by_their_kind(fake, tmp_path, monkeypatch):
    fake(threshold=5.0, bug=True, seeds=1)  # v = 1 misses the threshold; the mean is broken; one seed
    res, report = _run(tmp_path, "bad")
    words = {c.evidence: verdict_text(c) for c in rows_of(res)}
    assert words == {"test": "not supported", "identity": "identity fails: a bug", "premise": "premise fails",
                     "diagnostic": "diagnostic: shows it (fixed by the reading)"}
    assert "| identity | **identity fails: a bug** |" in report and "| premise | **premise fails** |" in report
    # a failed premise or identity is never counted as "not supported"
    assert "tests: 1 not supported; identities: 1 fail (a bug); premises: 1 fail; diagnostics: 1 show it" in report


def test_counting_excludes_identity_and_premise_rows():
    rows = [_row("test", "supported", "a"), _row("test", "not supported", "b"), _row("identity", "supported", "c"),
            _row("identity", "not supported", "d"), _row("premise", "not supported", "e"),
            _row("premise", "supported", "f"), _row("test", "inconclusive", "g")]
    assert support_counts(rows) == {"supported": 1, "not supported": 1, "inconclusive": 1}
    counts = count_verdicts(rows)
    assert sum(sum(c.values()) for c in counts.values()) == len(rows)
    assert counts["identity"] == {"supported": 1, "not supported": 1, "inconclusive": 0}
    assert counts_text(rows) == ("tests: 1 supported, 1 not supported, 1 inconclusive; identities: 1 hold, "
                                 "1 fail (a bug); premises: 1 hold, 1 fail")
    table = claims_table(rows)
    assert "only `test` rows count as support" in table
    short = format_claims_short(rows, width=200).splitlines()
    assert short[-4:] == ["7 claim entries (only tests count as support):",
                          "  tests: 1 supported, 1 not supported, 1 inconclusive", "  identities: 1 hold, 1 fail (a bug)",
                          "  premises: 1 hold, 1 fail"]
    tags = [line.split("  ")[1] for line in short[2:9]]  # after the claim's line and its counts per source
    assert tags == ["[test] supported", "[test] not supported", "[identity] holds", "[identity] fails: a bug",
                    "[premise] fails", "[premise] holds", "[test] inconclusive"]


def test_a_row_without_evidence_is_rejected(fake, tmp_path):
    row = _row("test", "supported", "a").to_json()
    del row["evidence"]
    with pytest.raises(ValueError, match="lacks keys \\['evidence'\\]"):
        Row.from_json(row)
    with pytest.raises(ValueError, match="has no 'evidence'"):
        check_kind(None, "x")
    with pytest.raises(ValueError, match="evidence 'proof' is not one of"):
        Row.from_json(dict(row, evidence="proof"))
    assert all(Row.from_json(_row(k, v, "x").to_json()) for k in EVIDENCE for v in VERDICTS)

    # through the runner: a dict without its evidence is dropped and reported as a summary error
    fake()
    good = EXPERIMENTS[FAKE]
    EXPERIMENTS[FAKE] = dataclasses.replace(good, summarize=lambda config, results: Summary(claims=[row]))
    res = run_experiments([FAKE], out=tmp_path / "o", progress=False)
    assert res["claims"] == [] and res["n_failed"] == 1
    assert "lacks keys ['evidence']" in res["experiments"][FAKE]["errors"][0]


def test_a_kind_is_one_entry_of_the_table_and_every_count_reads_it(monkeypatch):
    """Adding a kind is one EvidenceKind: its rows are checked, counted apart from support and named in words."""
    shown = EvidenceKind("probe", "probes", "shown, never counted",
                         display={"supported": "probe: as built", "not supported": "probe: unexpected",
                                  "inconclusive": "probe: undecided"},
                         count_words={"supported": "as built", "not supported": "unexpected",
                                      "inconclusive": "undecided"})
    with pytest.raises(ValueError, match="evidence 'probe' is not one of"):
        _row("probe", "supported", "d")
    monkeypatch.setitem(KINDS, "probe", shown)
    rows = [_row("probe", "supported", "d"), _row("test", "supported", "t")]
    assert support_counts(rows) == {"supported": 1, "not supported": 0, "inconclusive": 0}
    assert count_verdicts(rows)["probe"] == {"supported": 1, "not supported": 0, "inconclusive": 0}
    assert counts_text(rows) == "tests: 1 supported; probes: 1 as built"
    assert verdict_text(rows[0]) == "probe: as built"
    assert "- `probe`: shown, never counted." in evidence_legend()
    assert "| probe | **probe: as built** |" in claims_table(rows)
    with pytest.raises(ValueError, match="must name every verdict"):
        EvidenceKind("half", "halves", "m", display={"supported": "x"}, count_words={})


def test_an_identity_without_data_is_not_checked_never_holds():
    nan_row = dict(id=FAKE, statement="M = 0", setting={"objective": "none"}, criterion="by construction",
                   evidence="identity", headline="m")
    with pytest.raises(ValueError, match="identity without data cannot hold"):
        Row(**nan_row, measured={"m": measured(float("nan"))}, verdict="supported")
    with pytest.raises(ValueError, match="identity without data cannot hold"):
        Row.from_json({**nan_row, "measured": {"m": None}, "verdict": "supported"})
    unchecked = Row(**nan_row, measured={"m": measured(float("nan"))}, verdict="inconclusive")
    assert verdict_text(unchecked) == "identity not checked"
    # the same row with data holds; a test row may have no data (it reads inconclusive by its own rule)
    assert verdict_text(Row(**nan_row, measured={"m": measured([0.0])}, verdict="supported")) == "identity holds"
    Row(**{**nan_row, "evidence": "test"}, measured={"m": measured(float("nan"))}, verdict="supported")

"""A claim's bottom line: what its ``test`` rows come to, by one stated rule (:data:`RULE`), never written by hand.

results.json holds one :class:`BottomLine` per claim under ``bottom_lines`` (the runner calls
:func:`bottom_lines` on the rows it writes); report.md, report.html, the terminal summary and the README/docs
results blocks lead with them. The rule, in words (docs/results.md quotes :data:`RULE`):

1. Only ``test`` rows decide. ``identity``, ``premise`` and ``diagnostic`` rows never do; an identity that fails
   (a bug in headgeom) is said in the text.
2. A test row *decides* when its verdict is "supported" or "not supported", that verdict is the same over the
   whole stated range of every convention swept (``robustness`` status "robust"), and it is not budget-limited
   (at least 25 % of the paper's images seen, :data:`headgeom.claims.budget.LIMITED_BELOW`; rows that train
   nothing have no budget). Any other test row is shown with why it does not decide: "inconclusive", "flips"
   (its verdict changes within a convention's stated range, so it cannot make a claim hold or not hold by
   itself) or "budget-limited" (it speaks for its budget only; what it shows is said in the text).
3. headgeom's own rows and the authors' released runs re-judged are one pool under the same rule: each decides by
   the same three conditions, and the text says which source a conclusion rests on.
4. The conclusion, over the deciding rows: **holds** when every test row decides and supports the claim;
   **does not hold** when some deciding row refutes it and none supports it (a claim is a statement about
   every setting it names, so one firm counterexample refutes it there); **holds in part** when some deciding
   row supports it and another refutes it or does not decide; **undecided** when no row decides (or the claim
   has no test row), with what would decide it: the rows' reasons, runs at the paper's budget, or a
   convention fixed in advance.

The text is one sentence that starts with the conclusion ("Holds in part: ..."), names the rows by what sets
them apart, the budget and the robustness; :meth:`BottomLine.rest` is the sentence after the conclusion.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headgeom.claims.budget import LIMITED_BELOW
from headgeom.claims.claim import natural_key
from headgeom.claims.evidence import DIAGNOSTIC, IDENTITY, PREMISE, TEST
from headgeom.claims.robustness import ROBUST
from headgeom.claims.row import NAME_KEYS, Row, row_name
from headgeom.claims.sources import is_authors
from headgeom.claims.verdict import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, check_verdict

__all__ = ["CONCLUSIONS", "DECIDES", "ROLES", "RULE", "Basis", "BottomLine", "bottom_line", "bottom_lines",
           "conclusion_of", "role_of"]

HOLDS, NOT_HOLD, IN_PART, UNDECIDED = "holds", "does not hold", "holds in part", "undecided"
CONCLUSIONS = (HOLDS, NOT_HOLD, IN_PART, UNDECIDED)

DECIDES, FLIPS, LIMITED = "decides", "flips", "budget-limited"
ROLES = (DECIDES, INCONCLUSIVE, FLIPS, LIMITED)
"""What a test row does for its claim's bottom line: it decides, or why it does not (the first that applies)."""

RULE = (
    "Only `test` rows decide a claim's bottom line (`identity`, `premise` and `diagnostic` rows never do; an "
    "identity that fails, a bug, is said in the text). A test row decides when its verdict is supported or not "
    "supported, that verdict stays the same over the stated range of every convention swept (robustness "
    "\"robust\"), and it is not budget-limited (at least "
    f"{LIMITED_BELOW:.0%} of the paper's images seen; rows that train nothing have no budget); otherwise it is "
    "shown with why not (inconclusive, flips with a convention, budget-limited). headgeom's own rows and the "
    "authors' runs re-judged are one pool under the same rule. The claim **holds** when every test row decides "
    "and supports it; **does not hold** when a deciding row refutes it and none supports it (a claim speaks of "
    "every setting it names, so one firm counterexample refutes it there); **holds in part** when a deciding "
    "row supports it and another refutes it or does not decide; **undecided** when no row decides, with what "
    "would decide it.")
"""The rule in words, as the docs and the report quote it (module docstring)."""


@dataclass(frozen=True)
class Basis:
    """One test row a bottom line rests on: ``row`` (its index in results.json's ``claims`` list, i.e. in the
    rows given to :func:`bottom_lines`), ``name`` (what sets it apart among the claim's rows), ``source``,
    ``verdict`` and ``role`` (one of :data:`ROLES`)."""

    row: int
    name: str
    source: str
    verdict: str
    role: str

    def __post_init__(self) -> None:
        if isinstance(self.row, bool) or not isinstance(self.row, int) or self.row < 0:
            raise ValueError(f"a bottom line's row is an index into the claims list (>= 0); got {self.row!r}")
        check_verdict(self.verdict, self.name)
        if self.role not in ROLES:
            raise ValueError(f"row {self.name}: role {self.role!r} is not one of {ROLES}")
        if (self.role == INCONCLUSIVE) != (self.verdict == INCONCLUSIVE):
            raise ValueError(f"row {self.name}: role {self.role!r} with verdict {self.verdict!r}; a row's role is "
                             "'inconclusive' exactly when its verdict is, and only a decided verdict decides")

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> Basis:
        if not isinstance(entry, Mapping) or set(entry) != {"row", "name", "source", "verdict", "role"}:
            raise ValueError(f"a bottom line's row is {{'row', 'name', 'source', 'verdict', 'role'}}; got {entry!r}")
        return cls(**entry)

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "name": self.name, "source": self.source, "verdict": self.verdict, "role": self.role}


def conclusion_of(rows: Sequence[Basis]) -> str:
    """The conclusion the rule (:data:`RULE`, point 4) gives over a claim's test rows."""
    deciding = [b.verdict for b in rows if b.role == DECIDES]
    if not deciding:
        return UNDECIDED
    if SUPPORTED not in deciding:
        return NOT_HOLD
    if NOT_SUPPORTED not in deciding and len(deciding) == len(rows):
        return HOLDS
    return IN_PART


@dataclass(frozen=True)
class BottomLine:
    """What a claim's test rows come to (module docstring): ``conclusion`` (one of :data:`CONCLUSIONS`, checked
    to follow from ``rows`` by :func:`conclusion_of`), ``text`` (one sentence starting with the conclusion) and
    ``rows`` (every test row of the claim, :class:`Basis`). JSON form: ``{"claim", "conclusion", "text",
    "rows": [{"row", "name", "source", "verdict", "role"}, ...]}``."""

    claim: str
    conclusion: str
    text: str
    rows: tuple[Basis, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(b if isinstance(b, Basis) else Basis.from_json(b) for b in self.rows))
        if self.conclusion not in CONCLUSIONS:
            raise ValueError(f"bottom line of {self.claim}: conclusion {self.conclusion!r} is not one of {CONCLUSIONS}")
        ruled = conclusion_of(self.rows)
        if self.conclusion != ruled:
            raise ValueError(f"bottom line of {self.claim}: conclusion {self.conclusion!r} does not follow from its "
                             f"rows; the rule gives {ruled!r} (headgeom.claims.bottom_line.RULE)")
        lead = self.conclusion.capitalize() + ": "
        if not isinstance(self.text, str) or not self.text.startswith(lead) or len(self.text) == len(lead):
            raise ValueError(f"bottom line of {self.claim} is one sentence starting with {lead!r}; got {self.text!r}")

    @property
    def rest(self) -> str:
        """The sentence after its leading conclusion."""
        return self.text[len(self.conclusion) + 2:]

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> BottomLine:
        if not isinstance(entry, Mapping) or set(entry) != {"claim", "conclusion", "text", "rows"}:
            raise ValueError(f"a bottom line is {{'claim', 'conclusion', 'text', 'rows'}}; got {entry!r}")
        return cls(entry["claim"], entry["conclusion"], entry["text"], tuple(entry["rows"]))

    def to_json(self) -> dict[str, Any]:
        return {"claim": self.claim, "conclusion": self.conclusion, "text": self.text,
                "rows": [b.to_json() for b in self.rows]}


# ----------------------------------------------------------------------------- the rule
def flipping(row: Row) -> list[str]:
    """"<convention> flips at <values>" for each convention swept whose verdict changes within its range."""
    return [f"{name} {r.status}" for name, r in row.robustness.items() if r.status != ROBUST]


def role_of(row: Row) -> str:
    """What a test row does for its claim (:data:`RULE`, point 2): "decides", else the first reason it does not."""
    if row.verdict == INCONCLUSIVE:
        return INCONCLUSIVE
    if flipping(row):
        return FLIPS
    if row.budget is not None and row.budget.limited:
        return LIMITED
    return DECIDES


LABEL_KEYS = NAME_KEYS + ("data", "backbone", "head_input", "method", "family", "activation", "head")
"""The setting keys a row is named by in a bottom line, when their values differ among the claim's test rows of
its source."""
SHORT = 48  # a setting value longer than this names no row in a sentence (it stays in the report)
MOST_KEYS = 3  # a sentence names rows by at most this many setting keys


def told_keys(rows: Sequence[Row]) -> list[str]:
    """The keys of :data:`LABEL_KEYS` (at most :data:`MOST_KEYS`) whose short values tell ``rows`` apart."""
    keys = [k for k in LABEL_KEYS if len({repr(r.setting.get(k)) for r in rows}) > 1
            and all(len(str(r.setting.get(k, ""))) <= SHORT for r in rows)]
    return keys[:MOST_KEYS]


def row_label(row: Row, among: Sequence[Row]) -> str:
    """What sets ``row`` apart among the claim's test rows of its source (``among``), e.g. "reading ambient,
    objective mse"; its :func:`row_name` when nothing does."""
    keys = told_keys([r for r in among if is_authors(r) == is_authors(row)])
    told = ", ".join(f"{k} {row.setting[k]}" for k in keys if row.setting.get(k) not in (None, ""))
    return told or row_name(row.id, row.setting)


def _percent(fraction: float) -> str:
    v = 100.0 * fraction
    return f"{v:.0f}%" if v >= 10 else f"{v:.2g}%"


def _listed(names: Sequence[str], most: int = 4) -> str:
    """Distinct ``names`` joined by "; ", at most ``most`` of them, then how many more."""
    names = [n for n in dict.fromkeys(names) if n]
    if len(names) > most:
        return "; ".join(names[:most]) + f"; and {len(names) - most} more"
    return "; ".join(names)


def _source_words(authors: bool, n: int) -> str:
    return f"{n} test row{'' if n == 1 else 's'} of the authors' runs re-judged" if authors else f"{n} of our test rows"


def _rows_phrase(rows: Sequence[Row], among: Sequence[Row]) -> str:
    """``rows`` per source in words: how many, the values of the keys that tell the source's rows apart (e.g.
    "reading ambient / tangential"), and their training budget, e.g. "3 of our test rows (reading ambient /
    tangential; at 0.064% of the paper's training budget)"."""
    parts = []
    for authors in (False, True):
        pick = [r for r in rows if is_authors(r) == authors]
        if not pick:
            continue
        keys = told_keys([r for r in among if is_authors(r) == authors])
        told = ["{} {}".format(k, " / ".join(dict.fromkeys(str(r.setting[k]) for r in pick if r.setting.get(k)
                                                            not in (None, "")))) for k in keys
                if any(r.setting.get(k) not in (None, "") for r in pick)]
        budgets = [r.budget.fraction for r in pick if r.budget is not None]
        if budgets:
            low, high = _percent(min(budgets)), _percent(max(budgets))
            told.append(f"at {low}{'' if low == high else '-' + high} of the paper's training budget")
        parts.append(_source_words(authors, len(pick)) + (f" ({'; '.join(told)})" if told else ""))
    return " and ".join(parts)


def _robustness_phrase(rows: Sequence[Row]) -> str:
    """How far the deciding rows' verdicts were shown robust."""
    named = sorted({c for r in rows for c in r.conventions})
    unswept = [r for r in rows if not r.conventions or r.unswept]
    if not unswept:
        return f"robust over {', '.join(named)}"
    if len(unswept) == len(rows):
        return "robustness to the rows' conventions not swept"
    return f"robustness not swept for {len(unswept)} of these {len(rows)} rows"


def _verdict_counts(rows: Sequence[Row]) -> str:
    parts = [f"{sum(r.verdict == v for r in rows)} {w}" for v, w in
             ((SUPPORTED, "support it"), (NOT_SUPPORTED, "do not support it"), (INCONCLUSIVE, "are inconclusive"))
             if any(r.verdict == v for r in rows)]
    return ", ".join(parts)


def _undecided_phrase(rows: Sequence[Row], roles: Sequence[str], among: Sequence[Row]) -> tuple[str, list[str]]:
    """(what the rows that do not decide show, what would decide them)."""
    parts: list[str] = []
    needs: list[str] = []
    inconclusive = [i for i, role in enumerate(roles) if role == INCONCLUSIVE]
    flips = [i for i, role in enumerate(roles) if role == FLIPS]
    limited = [i for i, role in enumerate(roles) if role == LIMITED]
    if inconclusive:
        pick = [rows[i] for i in inconclusive]
        parts.append(_rows_phrase(pick, among) + " inconclusive")
        needs += [r.reason for r in pick if r.reason]
        if any(not r.reason for r in pick):
            needs.append("what the inconclusive rows' criteria ask for")
        if any(r.budget is not None and r.budget.limited for r in pick):
            needs.append(f"runs at {LIMITED_BELOW:.0%} or more of the paper's training budget")
    if flips:
        pick = [rows[i] for i in flips]
        swept = _listed([f for r in pick for f in flipping(r)])
        parts.append(_rows_phrase(pick, among)
                     + f" whose verdict changes within a convention's stated range ({swept})")
        needs.append("the convention fixed by the theorem or measured, not chosen")
    if limited:
        pick = [rows[i] for i in limited]
        parts.append(_rows_phrase(pick, among) + f", budget-limited: {_verdict_counts(pick)} at that budget")
        needs.append(f"runs at {LIMITED_BELOW:.0%} or more of the paper's training budget")
    return "; ".join(parts), list(dict.fromkeys(needs))


KIND_WORDS = {IDENTITY: "check headgeom's code", PREMISE: "check a theorem's premise",
              DIAGNOSTIC: "show what a reading fixes"}
"""What the rows of the kinds that never decide show, for a claim without a test row."""


def bottom_line(claim: str, rows: Sequence[tuple[int, Row]]) -> BottomLine:
    """The bottom line of ``claim`` over its rows, each with its index in the claims list (:data:`RULE`)."""
    mine = [(i, r) for i, r in rows if r.id == claim]
    tests = [(i, r) for i, r in mine if r.evidence == TEST]
    bugs = [r for _, r in mine if r.evidence == IDENTITY and r.verdict == NOT_SUPPORTED]
    test_rows = [r for _, r in tests]
    roles = [role_of(r) for r in test_rows]
    basis = tuple(Basis(i, row_label(r, test_rows), r.source or "", r.verdict, roles[k])
                  for k, (i, r) in enumerate(tests))
    conclusion = conclusion_of(basis)
    decide = [k for k, role in enumerate(roles) if role == DECIDES]
    rest = [k for k, role in enumerate(roles) if role != DECIDES]
    pro = [k for k in decide if test_rows[k].verdict == SUPPORTED]
    con = [k for k in decide if test_rows[k].verdict == NOT_SUPPORTED]
    undecided, needs = _undecided_phrase([test_rows[k] for k in rest], [roles[k] for k in rest], test_rows)

    def phrase(ks: list[int]) -> str:
        return _rows_phrase([test_rows[k] for k in ks], test_rows)

    if not test_rows:
        kinds = [KIND_WORDS[k] for k in KIND_WORDS if any(r.evidence == k for _, r in mine)]
        sentence = ("no test row measures it" + (f" (its rows {', '.join(kinds)}, never the claim)" if kinds else "")
                    + "; what would decide it: a measurement that could come out either way under the claim's "
                    "premises")
    elif conclusion == UNDECIDED:
        sentence = f"no test row decides it: {undecided}; what would decide it: {'; '.join(needs)}"
    else:
        told = []
        if pro:
            told.append(f"{phrase(pro)} {'supports' if len(pro) == 1 else 'support'} it")
        if con:
            told.append(f"{phrase(con)} {'refutes' if len(con) == 1 else 'refute'} it")
        sentence = " and ".join(told) + f", {_robustness_phrase([test_rows[k] for k in decide])}"
        if undecided:
            sentence += f"; not deciding: {undecided} (what would decide them: {'; '.join(needs)})"
    if bugs:
        sentence += (f"; note: {len(bugs)} identity check{'s' if len(bugs) > 1 else ''} of it "
                     f"{'fail' if len(bugs) > 1 else 'fails'} "
                     f"({_listed([row_name(r.id, r.setting) for r in bugs])}), a bug in headgeom that makes "
                     "this line suspect until it is fixed")
    return BottomLine(claim, conclusion, f"{conclusion.capitalize()}: {sentence}.", basis)


def bottom_lines(rows: Iterable[Row]) -> list[BottomLine]:
    """One bottom line per claim id among ``rows``, ids in natural order (C2 before C10); each :class:`Basis`
    names its row by its index in ``rows`` (results.json's ``claims`` order)."""
    indexed = list(enumerate(rows))
    return [bottom_line(cid, indexed) for cid in sorted({r.id for _, r in indexed}, key=natural_key)]

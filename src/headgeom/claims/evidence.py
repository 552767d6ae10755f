"""What a claim row's verdict is evidence of: the one table of evidence kinds, their counting rules and
their display words (docs/paper.md §2).

Every claim row carries ``evidence``, the name of one :class:`EvidenceKind` of :data:`KINDS`:

- ``test``: the measurement could have come out either way. Only these rows count as support or
  refutation of the paper's claims.
- ``identity``: the row holds by construction (a mathematical fact, or a property of the code's
  own construction, e.g. WᵀAW = BBᵀ): a check of the code, never counted as support. An identity
  that fails is a bug in headgeom, and is displayed as one.
- ``premise``: the row checks whether a theorem's premise holds in the setting. A premise that
  fails says the theorem does not apply there, not that it is wrong: it is displayed as
  "premise fails", never as "not supported".

A new kind is one :class:`EvidenceKind` in :data:`KINDS` (its words for each verdict, its plural, what it
means, whether it counts): the checks, counts and both renderers read this table. The verdict words
themselves are :data:`headgeom.claims.verdict.VERDICTS`. This module imports nothing heavy, so reports can
be rendered without torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Mapping

from headgeom.claims.verdict import VERDICTS

if TYPE_CHECKING:  # the row type imports this module (its evidence check); only its name is needed here
    from headgeom.claims.row import Row

__all__ = ["EVIDENCE", "IDENTITY", "KINDS", "PREMISE", "TEST", "VERDICTS", "EvidenceKind", "check_kind",
           "count_verdicts", "counts_text", "support_counts", "tagged_verdict", "verdict_text"]

TEST, IDENTITY, PREMISE = "test", "identity", "premise"


@dataclass(frozen=True)
class EvidenceKind:
    """One evidence kind: what its verdicts are called in the report (``display``, one entry per verdict) and
    in counts (``count_words``), its plural, what it means, and whether its rows count as support."""

    name: str
    plural: str
    meaning: str
    display: Mapping[str, str]
    count_words: Mapping[str, str]
    counts_as_support: bool = False

    def __post_init__(self) -> None:
        for what, words in (("display", self.display), ("count_words", self.count_words)):
            if set(words) != set(VERDICTS):
                raise ValueError(f"evidence kind {self.name!r}: {what} must name every verdict {VERDICTS}; "
                                 f"it names {sorted(words)}")


KINDS: dict[str, EvidenceKind] = {k.name: k for k in (
    EvidenceKind(TEST, "tests", "the measurement could have come out either way; only these rows count as support",
                 display={v: v for v in VERDICTS}, count_words={v: v for v in VERDICTS}, counts_as_support=True),
    EvidenceKind(IDENTITY, "identities",
                 "holds by construction: a check of the code, never counted as support; a failure is a bug",
                 display={"supported": "identity holds", "not supported": "identity fails: a bug",
                          "inconclusive": "identity not checked"},
                 count_words={"supported": "hold", "not supported": "fail (a bug)", "inconclusive": "not checked"}),
    EvidenceKind(PREMISE, "premises",
                 "checks whether a theorem's premise holds in the setting; a failure means the theorem does not apply",
                 display={"supported": "premise holds", "not supported": "premise fails",
                          "inconclusive": "premise undecided"},
                 count_words={"supported": "hold", "not supported": "fail", "inconclusive": "undecided"}),
)}
"""Every evidence kind by name, in the order the report lists them; every check, count and rendering reads it."""

EVIDENCE = tuple(KINDS)  # the kinds' names


def check_kind(kind: object, row_name: str = "?") -> str:
    """``kind`` when it names an evidence kind; ValueError (naming the row and the kinds) otherwise."""
    if kind is None:
        raise ValueError(f"claim row {row_name} has no 'evidence'; give it one of {tuple(KINDS)} "
                         f"({'; '.join(f'{k.name}: {k.meaning}' for k in KINDS.values())})")
    if kind not in KINDS:
        raise ValueError(f"claim row {row_name}: evidence {kind!r} is not one of {tuple(KINDS)}")
    return str(kind)


def verdict_text(row: Row) -> str:
    """The verdict as the report says it: e.g. "supported", "premise fails", "identity fails: a bug"."""
    return KINDS[row.evidence].display[row.verdict]


def tagged_verdict(row: Row) -> str:
    """``[kind] words`` for a terminal line, the kind said once: "[test] supported", "[identity] holds",
    "[identity] fails: a bug", "[premise] fails"."""
    words = KINDS[row.evidence].display[row.verdict]
    return f"[{row.evidence}] " + words.removeprefix(row.evidence + " ")


def count_verdicts(rows: Iterable[Row]) -> dict[str, dict[str, int]]:
    """{kind: {verdict: number of rows}} over every kind and verdict (zeros included)."""
    counts = {k: {v: 0 for v in VERDICTS} for k in KINDS}
    for r in rows:
        counts[r.evidence][r.verdict] += 1
    return counts


def support_counts(rows: Iterable[Row]) -> dict[str, int]:
    """{verdict: number of rows of the kinds that count as support}: the only rows that count as support or
    refutation (today the ``test`` rows)."""
    counts = count_verdicts(rows)
    return {v: sum(counts[k.name][v] for k in KINDS.values() if k.counts_as_support) for v in VERDICTS}


def counts_text(rows: Iterable[Row]) -> str:
    """One phrase per kind present, e.g. "tests: 2 supported, 1 not supported; identities: 3 hold;
    premises: 1 fail" (kinds and verdicts with no row left out)."""
    counts = count_verdicts(rows)
    parts = []
    for kind in KINDS.values():
        words = [f"{n} {kind.count_words[v]}" for v, n in counts[kind.name].items() if n]
        if words:
            parts.append(f"{kind.plural}: " + ", ".join(words))
    return "; ".join(parts) or "no rows"

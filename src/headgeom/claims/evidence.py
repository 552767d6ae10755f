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
- ``diagnostic``: the reading or the construction fixes the outcome (e.g. the ambient cosine Hessian is
  indefinite for every head, linear included, so a "negative curvature" row under it cannot come out the
  other way). Shown, with the reason in its criterion, and never counted.

An ``identity`` needs data: a row that would read "identity holds" while its headline has no finite
value is "not checked" (:func:`check_identity_data`, called by the row's own check).

A new kind is one :class:`EvidenceKind` in :data:`KINDS` (its words for each verdict, its plural, what it
means, whether it counts): the checks, counts and both renderers read this table. The verdict words
themselves are :data:`headgeom.claims.verdict.VERDICTS`. This module imports nothing heavy, so reports can
be rendered without torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from headgeom.claims.verdict import VERDICTS

if TYPE_CHECKING:  # the row type imports this module (its evidence check); only its name is needed here
    from headgeom.claims.row import Row

__all__ = ["DIAGNOSTIC", "EVIDENCE", "IDENTITY", "KINDS", "PREMISE", "TEST", "VERDICTS", "EvidenceKind",
           "check_identity_data", "check_kind",
           "count_verdicts", "counts_text", "support_counts", "tagged_verdict", "verdict_text"]

TEST, IDENTITY, PREMISE, DIAGNOSTIC = "test", "identity", "premise", "diagnostic"


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
    EvidenceKind(DIAGNOSTIC, "diagnostics",
                 "the reading or the construction fixes the outcome, so it could not have come out the other way: "
                 "shown and explained, never counted",
                 display={"supported": "diagnostic: shows it (fixed by the reading)",
                          "not supported": "diagnostic: does not show it (fixed by the reading)",
                          "inconclusive": "diagnostic: undecided"},
                 count_words={"supported": "show it", "not supported": "do not show it", "inconclusive": "undecided"}),
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


def has_data(entry: object) -> bool:
    """Whether a measured entry (a Measured, its JSON form, or a plain value) holds a finite value."""
    value = entry.get("value") if isinstance(entry, Mapping) else getattr(entry, "value", entry)
    if isinstance(value, bool):
        return True
    return isinstance(value, (int, float)) and math.isfinite(value)


def check_identity_data(kind: str, verdict: str, headline_entry: object, row_name: str = "?") -> None:
    """ValueError when an ``identity`` row reads "holds" (verdict "supported") while its headline has no finite
    value: an identity checked on no data is "not checked" (verdict "inconclusive"), never "holds"."""
    if kind == IDENTITY and verdict == "supported" and not has_data(headline_entry):
        raise ValueError(f"claim row {row_name}: an identity without data cannot hold (its headline has no finite "
                         f"value: {headline_entry!r}); give it the verdict 'inconclusive' (identity not checked) "
                         "and say in its criterion what is missing")


def verdict_text(row: Row) -> str:
    """The verdict as the report says it: e.g. "supported", "premise fails", "identity fails: a bug"."""
    return KINDS[row.evidence].display[row.verdict]


def tagged_verdict(row: Row) -> str:
    """``[kind] words`` for a terminal line, the kind said once: "[test] supported", "[identity] holds",
    "[identity] fails: a bug", "[premise] fails", "[diagnostic] shows it (fixed by the reading)"."""
    words = KINDS[row.evidence].display[row.verdict]
    return f"[{row.evidence}] " + words.removeprefix(row.evidence + ": ").removeprefix(row.evidence + " ")


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

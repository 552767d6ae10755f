"""What a claim row's verdict is evidence of: the one vocabulary of evidence kinds, their counting
rules and their display words (docs/paper.md §2).

Every claim row carries ``evidence``, one of :data:`EVIDENCE`:

- ``test``: the measurement could have come out either way. Only these rows count as support or
  refutation of the paper's claims.
- ``identity``: the row holds by construction (a mathematical fact, or a property of the code's
  own construction, e.g. WᵀAW = BBᵀ): a check of the code, never counted as support. An identity
  that fails is a bug in headgeom, and is displayed as one.
- ``premise``: the row checks whether a theorem's premise holds in the setting. A premise that
  fails says the theorem does not apply there, not that it is wrong: it is displayed as
  "premise fails", never as "not supported".

The verdict words themselves (:data:`VERDICTS`) live here too; ``headgeom.experiments.registry``
re-exports them. This module imports nothing heavy, so reports can be rendered without torch.
"""
from __future__ import annotations

from typing import Any, Iterable

VERDICTS = ("supported", "not supported", "inconclusive")
TEST, IDENTITY, PREMISE = "test", "identity", "premise"
EVIDENCE = (TEST, IDENTITY, PREMISE)

# what each (kind, verdict) is called in report.md and on the terminal
DISPLAY: dict[tuple[str, str], str] = {
    (TEST, "supported"): "supported",
    (TEST, "not supported"): "not supported",
    (TEST, "inconclusive"): "inconclusive",
    (IDENTITY, "supported"): "identity holds",
    (IDENTITY, "not supported"): "identity fails: a bug",
    (IDENTITY, "inconclusive"): "identity not checked",
    (PREMISE, "supported"): "premise holds",
    (PREMISE, "not supported"): "premise fails",
    (PREMISE, "inconclusive"): "premise undecided",
}
# the same in counts ("identities: 8 hold, 1 fail (a bug)") and after a "[kind]" tag on the terminal
COUNT_WORDS: dict[tuple[str, str], str] = {
    **{(TEST, v): v for v in VERDICTS},
    (IDENTITY, "supported"): "hold", (IDENTITY, "not supported"): "fail (a bug)",
    (IDENTITY, "inconclusive"): "not checked",
    (PREMISE, "supported"): "hold", (PREMISE, "not supported"): "fail", (PREMISE, "inconclusive"): "undecided",
}
PLURAL = {TEST: "tests", IDENTITY: "identities", PREMISE: "premises"}
MEANING = {
    TEST: "the measurement could have come out either way; only these rows count as support",
    IDENTITY: "holds by construction: a check of the code, never counted as support; a failure is a bug",
    PREMISE: "checks whether a theorem's premise holds in the setting; a failure means the theorem does not apply",
}


def check_evidence(claim: dict[str, Any]) -> str:
    """The row's evidence kind; ValueError when it is missing or not one of :data:`EVIDENCE`."""
    kind = claim.get("evidence")
    if kind is None:
        raise ValueError(f"claim row {claim.get('id', '?')} has no 'evidence'; give it one of {EVIDENCE} "
                         f"({'; '.join(f'{k}: {m}' for k, m in MEANING.items())})")
    if kind not in EVIDENCE:
        raise ValueError(f"claim row {claim.get('id', '?')}: evidence {kind!r} is not one of {EVIDENCE}")
    return kind


def verdict_text(claim: dict[str, Any]) -> str:
    """The verdict as the report says it: e.g. "supported", "premise fails", "identity fails: a bug"."""
    return DISPLAY[(check_evidence(claim), claim["verdict"])]


def tagged_verdict(claim: dict[str, Any]) -> str:
    """``[kind] words`` for a terminal line, the kind said once: "[test] supported", "[identity] holds",
    "[identity] fails: a bug", "[premise] fails"."""
    kind = check_evidence(claim)
    words = DISPLAY[(kind, claim["verdict"])]
    return f"[{kind}] " + words.removeprefix(kind + " ")


def count_verdicts(claims: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """{kind: {verdict: number of rows}} over every kind and verdict (zeros included)."""
    counts = {k: {v: 0 for v in VERDICTS} for k in EVIDENCE}
    for c in claims:
        counts[check_evidence(c)][c["verdict"]] += 1
    return counts


def support_counts(claims: Iterable[dict[str, Any]]) -> dict[str, int]:
    """{verdict: number of ``test`` rows}: the only rows that count as support or refutation."""
    return count_verdicts(claims)[TEST]


def counts_text(claims: Iterable[dict[str, Any]]) -> str:
    """One phrase per kind present, e.g. "tests: 2 supported, 1 not supported; identities: 3 hold;
    premises: 1 fail" (kinds and verdicts with no row left out)."""
    counts = count_verdicts(claims)
    parts = []
    for kind in EVIDENCE:
        words = [f"{n} {COUNT_WORDS[(kind, v)]}" for v, n in counts[kind].items() if n]
        if words:
            parts.append(f"{PLURAL[kind]}: " + ", ".join(words))
    return "; ".join(parts) or "no rows"

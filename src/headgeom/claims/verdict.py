"""What a verdict rule returns: the verdict word, the measured entry that decided it, and why.

Every rule of ``headgeom.claims`` is a pure function of measured values that returns a :class:`Verdict`;
the row built from it quotes ``outcome`` as its ``verdict`` and ``headline`` as its headline (the key of
its ``measured`` entry the report quotes first). A Verdict unpacks as ``outcome, headline, reason``, so a
rule can be re-run on other settings of a convention and compared (the robustness of a verdict).
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["SUPPORTED", "NOT_SUPPORTED", "INCONCLUSIVE", "VERDICTS", "Verdict", "check_verdict"]

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE)


def check_verdict(word: object, row_name: str = "?") -> str:
    """``word`` when it is one of :data:`VERDICTS`; ValueError otherwise."""
    if word not in VERDICTS:
        raise ValueError(f"claim {row_name}: verdict {word!r} is not one of {VERDICTS}")
    return str(word)


class _Fields(NamedTuple):
    outcome: str
    headline: str
    reason: str


class Verdict(_Fields):
    """(outcome, headline, reason): ``outcome`` one of :data:`VERDICTS`; ``headline`` the measured key whose
    value decided it; ``reason`` the outcome in words ("" when the criterion says it all)."""

    __slots__ = ()

    def __new__(cls, outcome: str, headline: str, reason: str = "") -> Verdict:
        check_verdict(outcome, "rule")
        if not isinstance(headline, str) or not headline:
            raise ValueError(f"a verdict names the measured key that decided it; got headline {headline!r}")
        return super().__new__(cls, outcome, headline, str(reason))

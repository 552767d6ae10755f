"""C10's rule (§6.3: DINO heads compress augmentation orbits, VICReg and Barlow Twins heads expand them;
docs/paper.md §2 C10), pure functions of the bootstrap estimates headgeom.experiments.c10_pretrained
measures on the official checkpoints.

For each checkpoint × family the ratio z / h(z) of a metric *compresses* when its bootstrap CI lies above 1
and *expands* when it lies below 1 (:func:`direction`). A method's claim is supported when every pair goes the
stated way, not supported when any pair goes the opposite way, inconclusive otherwise
(:func:`direction_verdict`); the dichotomy is supported when all three method claims are, not supported when
any is not, and inconclusive while a checkpoint is missing (:func:`dichotomy_verdict`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from headgeom.claims.verdict import Verdict
from headgeom.io import json_number

__all__ = ["OPPOSITE", "dichotomy_verdict", "direction", "direction_verdict"]

OPPOSITE = {"compress": "expand", "expand": "compress"}


def direction(est: Mapping[str, Any]) -> str:
    """"compress" (CI above 1), "expand" (CI below 1), "neither" (CI holds 1) or "undefined"."""
    lo, hi = (json_number(c) for c in (est.get("ci") or [None, None]))
    if math.isnan(lo) or math.isnan(hi):
        return "undefined"
    return "compress" if lo > 1 else "expand" if hi < 1 else "neither"


def direction_verdict(directions: Mapping[str, str], want: str, lead: str | None = None,
                      complete: bool = True) -> Verdict:
    """One method's claim from the direction of each of its pairs (measured key -> direction), ``want`` the stated
    one. The headline is the pair that decided: the first going the opposite way (not supported) or not the
    stated way (inconclusive); when every pair goes the stated way, ``lead`` (else the first pair). A method with
    a checkpoint not measured (``complete`` False) is inconclusive, decided by ``checkpoints_measured``."""
    if not complete:
        return Verdict("inconclusive", "checkpoints_measured")
    if not directions:
        raise ValueError("a direction verdict needs at least one checkpoint × family pair")
    if all(d == want for d in directions.values()):
        return Verdict("supported", lead if lead in directions else next(iter(directions)))
    bad = [k for k, d in directions.items() if d == OPPOSITE[want]]
    if bad:
        return Verdict("not supported", bad[0])
    return Verdict("inconclusive", next(k for k, d in directions.items() if d != want))


def dichotomy_verdict(verdicts: Mapping[str, str], complete: bool) -> Verdict:
    """The dichotomy from the method claims' verdicts (``complete``: every checkpoint was measured)."""
    if not complete:
        outcome = "inconclusive"
    elif all(v == "supported" for v in verdicts.values()):
        outcome = "supported"
    elif any(v == "not supported" for v in verdicts.values()):
        outcome = "not supported"
    else:
        outcome = "inconclusive"
    return Verdict(outcome, "methods_not_supported" if outcome == "not supported" else "methods_supported")

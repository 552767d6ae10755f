"""C12's rule, "the backbone output beats the head on downstream probes" (docs/paper.md §2 C12),
written once for headgeom's own runs (headgeom.experiments.c12_guillotine) and the authors' released
probe accuracies (headgeom.experiments.released_results).

Per seed: gap = acc(z) − acc(h(z)) on the probe's test examples, against a tie band t = the larger
of ``margin`` and two standard errors of a difference of two proportions (:func:`tie_band`);
supported if gap > t in >= ``majority`` of the seeds, not supported if gap < −t in >= ``majority``,
inconclusive otherwise (:func:`gap_verdict`). Pure functions of accuracies.
"""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["MARGIN", "gap_verdict", "smallest_deciding_n", "tie_band"]

MARGIN = 0.01  # accuracy difference (fraction) below which z and h(z) count as tied


def tie_band(acc_a: float, acc_b: float, n: int | None, margin: float) -> float:
    """Half-width of the band where two test accuracies on n examples count as tied: the larger of
    ``margin`` and two standard errors of an (unpaired, so conservative) difference of proportions,
    2·sqrt(2 p(1−p)/n) with p their mean. ``n`` None (a test-set size the source does not state):
    ``margin`` alone, the band of an unbounded test set (see :func:`smallest_deciding_n`)."""
    if n is None:
        return margin
    p = 0.5 * (acc_a + acc_b)
    return max(margin, 2.0 * math.sqrt(2.0 * p * (1.0 - p) / max(n, 1)))


def smallest_deciding_n(acc_a: float, acc_b: float) -> int | None:
    """The smallest test-set size n at which the two standard errors of :func:`tie_band` fall below
    |acc_a − acc_b|: with fewer test examples the gap would be a tie; None for equal accuracies."""
    gap = abs(acc_a - acc_b)
    if gap == 0:
        return None
    p = 0.5 * (acc_a + acc_b)
    return math.floor(8.0 * p * (1.0 - p) / gap ** 2) + 1


def gap_verdict(gaps: Sequence[float], bands: Sequence[float], majority: float) -> tuple[str, float, float]:
    """(verdict, fraction of seeds with gap above its band, fraction below minus it)."""
    n = len(gaps)
    if n == 0:
        return "inconclusive", 0.0, 0.0
    above = sum(g > b for g, b in zip(gaps, bands)) / n
    below = sum(g < -b for g, b in zip(gaps, bands)) / n
    verdict = "supported" if above >= majority else "not supported" if below >= majority else "inconclusive"
    return verdict, above, below

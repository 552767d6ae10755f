"""The out-of-distribution flag of a claim row: the head was evaluated on inputs it was not
trained on (docs/paper.md §4 pitfall 5).

Every head headgeom trains or loads was trained on raw backbone features z. The paper's orbit
protocol feeds it z/‖z‖ instead: its first layer and its BatchNorm running statistics then see
inputs at another scale, and a BN head can map every input near one point (mean pairwise cosine
near 1 at the head). A verdict read there is a verdict on a head out of distribution, and
report.md says so beside it. A claim row that read such a head carries

    out_of_distribution = {"why": str, "mean_pairwise_cosine_h": measured entry}

(``measured entry``: {"value", "n", "spread", ...} as ``headgeom.claims.estimates.measured``
returns), built by :func:`ood_flag`; a row on heads fed raw z carries none. The measurement side
is ``headgeom.orbits.analyze.out_of_distribution``; this module only says it. It imports nothing
heavy, so reports can be rendered without torch.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["L2_INPUT_WHY", "check_ood", "ood_flag", "ood_text"]

L2_INPUT_WHY = ("head trained on raw z but fed z/‖z‖ here (the paper's protocol): its first layer and BatchNorm "
                "running statistics see inputs at another scale")


def ood_flag(mean_pairwise_cosine_h: dict[str, Any], why: str = L2_INPUT_WHY) -> dict[str, Any]:
    """The ``out_of_distribution`` entry of a claim row (module docstring)."""
    if not isinstance(mean_pairwise_cosine_h, dict) or "value" not in mean_pairwise_cosine_h:
        raise ValueError("an out-of-distribution flag needs the measured mean pairwise cosine at the head as a "
                         f"measured entry {{'value', 'n', 'spread'}}; got {mean_pairwise_cosine_h!r}")
    return {"why": why, "mean_pairwise_cosine_h": mean_pairwise_cosine_h}


def check_ood(claim: dict[str, Any]) -> None:
    """ValueError when a row's optional ``out_of_distribution`` is not what :func:`ood_flag` builds."""
    flag = claim.get("out_of_distribution")
    if flag is None:
        return
    if not isinstance(flag, dict) or not isinstance(flag.get("why"), str) \
            or not isinstance(flag.get("mean_pairwise_cosine_h"), dict):
        raise ValueError(f"claim row {claim.get('id', '?')}: out_of_distribution {flag!r} must be "
                         "{'why': str, 'mean_pairwise_cosine_h': measured entry}; build it with "
                         "headgeom.report.ood.ood_flag")


def ood_text(flag: dict[str, Any] | None, format_measured: Callable[[Any], str]) -> str:
    """"out of distribution: <why>; mean pairwise cosine at the head 0.994 ± 0.002 (n=2)", "" for None."""
    if not flag:
        return ""
    return (f"out of distribution: {flag['why']}; mean pairwise cosine at the head "
            f"{format_measured(flag['mean_pairwise_cosine_h'])} (near 1: every input maps near one direction)")

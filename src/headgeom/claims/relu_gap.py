"""C5's theory rule (docs/paper.md §2 C5: ReLU heads have M = 0, so they escape collapse only through finite
step size and BatchNorm, not under gradient flow), a pure function of the escape outcomes
headgeom.experiments.c5_relu_gap measures on its constructed system.

Supported when the ReLU head (no BN) has M = 0 along the flow, its flow reaches the horizon, neither escapes
nor is dead in most seeds, ReLU escapes under some finite step size or with BN, and a smooth head escapes
under the flow in at least half of its seeds; not supported when the ReLU flow escapes in more than half of
the seeds or its M is not zero; inconclusive otherwise. The headline is the measured key of the first
condition that failed, or the ReLU flow's alive-and-stuck fraction when all hold.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["SMOOTH_ESCAPES", "relu_gap_verdict", "smooth_key"]

SMOOTH_ESCAPES = 0.5  # a smooth head "escapes under the flow" in at least this fraction of its seeds


def smooth_key(smooth_fractions: Mapping[str, float]) -> str:
    """The measured key the smooth condition reads: the smooth head that escaped most (NaN: not run), else
    ``smooth_flow_escape_fraction`` (no smooth head ran)."""
    ran = {h: f for h, f in smooth_fractions.items() if math.isfinite(f)}
    return f"{max(ran, key=ran.get)}_flow_escape_fraction" if ran else "smooth_flow_escape_fraction"


def relu_gap_verdict(flow_escaped: Sequence[bool], alive_and_stuck: Sequence[bool], other_route: bool,
                     m_zero: bool, smooth_fractions: Mapping[str, float], support_fraction: float,
                     smooth_escapes: float = SMOOTH_ESCAPES) -> Verdict:
    """``flow_escaped``, ``alive_and_stuck``: per ReLU seed (no BN), whether its flow escaped, and whether it did
    not escape while alive and complete; ``other_route``: ReLU escaped under some GD step size or with BN;
    ``m_zero``: ReLU's M/H ≤ 1e-10 along every flow; ``smooth_fractions``: per smooth head (no BN), the fraction
    of seeds whose flow escaped (NaN: not run); ``smooth_escapes``: the share of its seeds a smooth head must
    escape in."""
    n = len(flow_escaped)
    if not n:
        return Verdict("inconclusive", "relu_flow_escape_fraction")
    if sum(flow_escaped) / n > 0.5 or not m_zero:
        return Verdict("not supported", "relu_flow_escape_fraction" if sum(flow_escaped) / n > 0.5
                       else "relu_max_M_over_H_along_flow")
    kept = sum(alive_and_stuck) / n
    smooth_ok = any(f >= smooth_escapes for f in smooth_fractions.values() if math.isfinite(f))
    if kept >= support_fraction and other_route and smooth_ok:
        return Verdict("supported", "relu_flow_alive_and_not_escaped_fraction")
    return Verdict("inconclusive", "relu_flow_alive_and_not_escaped_fraction" if kept < support_fraction
                   else "relu_other_route_escaped" if not other_route else smooth_key(smooth_fractions))

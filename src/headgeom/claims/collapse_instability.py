"""C4's rules at the constructed states (Thm 4.1; docs/paper.md §2 C4), pure functions of what
headgeom.experiments.c4_collapse measures per activation and seed:

- :func:`past_threshold_verdict` (a test): at the state training starts from, is every smooth activation past
  its own threshold (λ_min(H_eff) < −floor with G ⪰ 0, so the negative curvature is M's) in most seeds?
- :func:`construction_verdict` (an identity): a property that holds by construction holds in every seed; a
  failure names what broke (a bug).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["construction_verdict", "past_threshold_verdict"]


def past_threshold_verdict(fractions: Mapping[str, float | None], majority: float, headline: str) -> Verdict:
    """``fractions``: per smooth activation, the fraction of its usable seeds (G PSD) past the threshold, None
    when it has no usable seed. Not supported if one is past in none; supported if every one is defined and past
    in >= ``majority``; inconclusive otherwise."""
    defined = {a: f for a, f in fractions.items() if f is not None}
    if any(f == 0 for f in defined.values()):
        return Verdict("not supported", headline)
    if len(defined) == len(fractions) and all(f >= majority for f in defined.values()):
        return Verdict("supported", headline)
    return Verdict("inconclusive", headline)


def construction_verdict(broken: Sequence[str], headline: str) -> Verdict:
    """An identity: supported when nothing broke, else not supported (a bug), the breaks as the reason."""
    return Verdict("not supported" if broken else "supported", headline, "; ".join(broken))

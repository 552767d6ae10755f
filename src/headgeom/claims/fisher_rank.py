"""C7's rule (Thm 5.3: rank(I_h) ≤ rank(I_z) − dim V_aug for Fisher information; docs/paper.md §2 C7), a pure
function of the per-seed flags headgeom.experiments.c7_fisher measures after training.

Per seed: the premise (h∘f invariant, f still varying along the orbits, the manifold Jacobian of full rank at
most points) and whether the rank bound holds at most points. Supported when most seeds meet the premise and
hold; not supported when most meet it and none of them holds; inconclusive otherwise. The headline is the
fraction of seeds that decided.
"""
from __future__ import annotations

from collections.abc import Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["rank_bound_verdict"]


def rank_bound_verdict(premise: Sequence[bool], holds: Sequence[bool], majority: float) -> Verdict:
    """``premise``, ``holds``: per seed (module docstring)."""
    n = len(premise)
    both = [p and h for p, h in zip(premise, holds)]
    if sum(premise) >= majority * n and sum(both) >= majority * n:
        return Verdict("supported", "seeds_premise_and_holding")
    if sum(premise) >= majority * n and not any(both):
        return Verdict("not supported", "seeds_premise_and_holding")
    return Verdict("inconclusive", "seeds_premise_met" if sum(premise) < majority * n else "seeds_premise_and_holding")

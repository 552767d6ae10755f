"""C6's rules (Prop 5.2: invariance forces vᵀGv = 0 on augmentation tangents; docs/paper.md §2 C6), pure
functions of the per-seed values headgeom.experiments.c6_invariance measures after training:

- :func:`degeneracy_verdict`: per seed, the premise (h∘f invariant while f still moves along the orbits) and
  the ratio of the head's metric on tangents to the same on random directions; supported when most seeds meet
  the premise with the metric degenerate (ratio ≤ ratio_max), not supported when most meet it with at most 2×
  suppression (ratio ≥ ratio_none), inconclusive otherwise;
- :func:`lowpass_verdict`: the reading "the head, not the backbone, carries the degeneracy on V_aug".

The headline is the fraction of seeds whose comparison with the majority decided.
"""
from __future__ import annotations

from collections.abc import Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["degeneracy_verdict", "lowpass_verdict"]


def degeneracy_verdict(premise: Sequence[bool], ratio: Sequence[float], *, ratio_max: float, ratio_none: float,
                       majority: float) -> Verdict:
    """``premise``, ``ratio``: per seed (module docstring)."""
    n = len(premise)
    n_premise = sum(premise)
    degenerate = sum(p and r <= ratio_max for p, r in zip(premise, ratio))
    not_degenerate = sum(p and r >= ratio_none for p, r in zip(premise, ratio))
    if n_premise >= majority * n and degenerate >= majority * n:
        return Verdict("supported", "seeds_premise_and_degenerate")
    if n_premise >= majority * n and not_degenerate >= majority * n:
        return Verdict("not supported", "seeds_premise_and_not_degenerate")
    return Verdict("inconclusive", "seeds_premise_met" if n_premise < majority * n else "seeds_premise_and_degenerate")


def lowpass_verdict(head_only: Sequence[bool], backbone: Sequence[bool], head_none: Sequence[bool], *,
                    majority: float) -> Verdict:
    """Per seed: the head's G degenerate on V_aug while the backbone's is not (``head_only``), the backbone's
    degenerate (``backbone``), the head's at most 2× suppressed (``head_none``). Supported when most seeds are
    head-only; not supported when the backbone is degenerate in most (the invariance is already in f) or the head
    is not in most; inconclusive otherwise."""
    n = len(head_only)
    if sum(head_only) >= majority * n:
        return Verdict("supported", "seeds_head_degenerate_backbone_not")
    if sum(backbone) >= majority * n or sum(head_none) >= majority * n:
        return Verdict("not supported", "seeds_backbone_degenerate" if sum(backbone) >= majority * n
                       else "seeds_head_not_degenerate")
    return Verdict("inconclusive", "seeds_head_degenerate_backbone_not")

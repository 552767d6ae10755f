"""C3's rule (Thm 3.2 with depth; docs/paper.md §2 C3), a pure function of the fractions
headgeom.experiments.c3_depth measures on heads fitted along a curve: is H_eff made ε-isotropic by a deep
enough smooth head, and does depth lower ε?

Judged only when most fits converged (else ε against depth reflects the optimisation budget): supported
when the deepest heads reach the threshold in a majority of seeds (a witness head) and ε falls with depth
in a majority of (width, seed, consecutive depth) pairs; not supported otherwise. The headline is the
measured fraction whose comparison with the majority decided.
"""
from __future__ import annotations

from headgeom.claims.verdict import Verdict

__all__ = ["depth_isotropy_verdict"]


def depth_isotropy_verdict(*, n_fits: int, converged: float, frac_deep: float, wins: int, total: int,
                           majority: float) -> Verdict:
    """``n_fits``: MLP fits run; ``converged``: the fraction of them that converged; ``frac_deep``: the fraction of
    seeds whose best width at the deepest depth reaches the threshold; ``wins`` of ``total`` pairs where ε falls
    from depth D to D+1."""
    witness = frac_deep >= majority
    frac_pairs = wins / total if total else float("nan")
    if not n_fits or total == 0:
        return Verdict("inconclusive", "frac_depth_pairs_decreasing", "no MLP cells or no pair of depths to compare")
    if converged < majority:
        return Verdict("inconclusive", "frac_fits_converged", (
            f"only {converged:.0%} of MLP fits converged, so ε vs depth reflects the optimisation budget, not "
            f"capacity (at equal budget the deepest heads {'do' if witness else 'do not'} reach the "
            f"threshold and ε falls with depth in {wins}/{total} pairs)"))
    if witness and frac_pairs >= majority:  # the witness of Thm 3.2 decides (the pairs also pass)
        return Verdict("supported", "frac_seeds_deepest_below_threshold",
                       "the deepest heads reach the threshold and depth lowers ε in most pairs")
    if not witness:
        return Verdict("not supported", "frac_seeds_deepest_below_threshold", "the deepest heads miss the threshold")
    return Verdict("not supported", "frac_depth_pairs_decreasing", "depth does not lower ε in most pairs")

"""C4's rules at the constructed states (Thm 4.1; docs/paper.md §2 C4), pure functions of what
headgeom.experiments.c4_collapse measures per activation and seed:

- :func:`past_threshold_verdict` (a test): at the state training starts from, is every smooth activation past
  its own threshold (λ_min(H_eff) < −floor with G ⪰ 0, so the negative curvature is M's) in most seeds?
- :func:`construction_verdict` (an identity): a property that holds by construction holds in every seed; a
  failure names what broke (a bug).

A state is judged from what its cell stored, so that a convention can be re-read without recomputing
(:mod:`headgeom.claims.robustness`): :func:`state_flag` re-reads one state at another sign floor or with fewer of
its blocks, :func:`flags_verdict` turns per-seed flags into the verdict at a majority.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from headgeom.claims.verdict import Verdict

__all__ = ["AMBIENT_G", "FLOORS", "MAJORITIES", "construction_verdict", "flags_verdict", "past_fractions", "past_threshold_verdict", "state_flag"]

AMBIENT_G = ("under the ambient reading G = J^T (Hessian of -cos) J has a negative direction whenever u is not "
             "parallel to its target and range(J) contains u (and, generically, a direction with a component along "
             "the target's): the Hessian of -cos(u, c) is (1/|u|^2)[cos(theta) (I - "
             "3 u^ u^T) + u^ c^T + c^ u^T], whose quadratic form vanishes on u^ and is negative on u^ + eps e (e the "
             "target's direction off u, eps small of the right sign); a bias-free ReLU or linear head has h(z) = Jz, so "
             "u = Jz lies in range(J) exactly (G indefinite by construction), a smooth head at the pseudo-collapse's "
             "small weights nearly so")
"""Why the ambient reading's G is indefinite at a non-equilibrium two-view state: the reason a row judged under it
is a diagnostic (C4 at the init, C4 at training's collapsed points)."""


FLOORS = (1e-12, 1e-10, 1e-8, 1e-6)
"""The relative sign floor's range every C4 test row (at the init, at training's collapsed points) is re-read over."""
MAJORITIES = (0.5, 0.6, 0.8, 1.0)
"""The majority's range every C4 test row is re-read over."""


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


def state_flag(per_block: Mapping[str, Sequence[float]], operand_scale: float | None, rel_floor: float,
               n: int | None = None) -> bool | None:
    """Whether the state made of the first ``n`` blocks (all when None) is past its own threshold: True when
    λ_min(H_eff) < −floor with G PSD, False when G is PSD and H_eff is not below −floor, None when G has an
    eigenvalue below −floor (the negative curvature cannot be M's: not usable). Each floor is rel_floor ·
    max(max|λ| over the blocks, operand_scale), as :func:`headgeom.geometry.spectrum` draws it; ``per_block``
    holds the per-block ``H_lambda_min``, ``H_lambda_max``, ``G_lambda_min``, ``G_lambda_max``."""
    if not 0 <= rel_floor < 1:
        raise ValueError(f"rel_floor must lie in [0, 1); got {rel_floor!r}")
    blocks = len(per_block["H_lambda_min"])
    n = blocks if n is None else n
    if not 1 <= n <= blocks:
        raise ValueError(f"n must lie in [1, {blocks}] (the state's blocks); got {n!r}")

    def floor_and_min(part: str) -> tuple[float, float]:
        lo, hi = per_block[f"{part}_lambda_min"][:n], per_block[f"{part}_lambda_max"][:n]
        top = max(max(abs(x) for x in lo), max(abs(x) for x in hi), operand_scale or 0.0)
        return rel_floor * top, min(lo)

    floor_g, min_g = floor_and_min("G")
    if min_g < -floor_g:
        return None
    floor_h, min_h = floor_and_min("H")
    return min_h < -floor_h


def past_fractions(flags: Mapping[str, Sequence[bool | None]]) -> dict[str, float | None]:
    """Per activation, the fraction of its usable seeds (flag not None) past the threshold; None without any."""
    out: dict[str, float | None] = {}
    for act, fs in flags.items():
        usable = [f for f in fs if f is not None]
        out[act] = sum(usable) / len(usable) if usable else None
    return out


def flags_verdict(flags: Mapping[str, Sequence[bool | None]], majority: float, headline: str) -> Verdict:
    """:func:`past_threshold_verdict` of per-seed flags (True past, False not, None not usable) per smooth
    activation."""
    return past_threshold_verdict(past_fractions(flags), majority, headline)

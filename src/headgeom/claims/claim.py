"""The claims themselves (docs/paper.md §2): what the summary says of each besides its rows.

A :class:`Claim` is a claim id with its gist and the paper's own number ("proof" for a theorem, which the
paper proves rather than measures). :data:`CLAIMS` holds the paper's twelve; an experiment that judges a
claim of its own declares it (``Experiment(claims=(Claim(...),))``, registered with the experiment), so a new
claim is one experiment module. A claim the registry does not know is told by its first row's statement.

What a claim's rows come to, its bottom line, is :mod:`headgeom.claims.bottom_line`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["CLAIMS", "Claim", "claim_of", "declare", "natural_key"]


def natural_key(text: str) -> list[Any]:
    """"C2" before "C10"."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", text)]


@dataclass(frozen=True)
class Claim:
    """A claim: its id, its gist (the summary's statement) and the paper's number (ours is the headline its
    rows name)."""

    id: str
    short: str
    paper: str = "-"

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or not isinstance(self.short, str) or not self.short:
            raise ValueError(f"a claim needs an id and its gist in words; got id={self.id!r}, short={self.short!r}")


CLAIMS: dict[str, Claim] = {c.id: c for c in (
    Claim("C1", "a linear head whitens any r-dim subspace at a fixed point (Thm 3.1)", "proof"),
    Claim("C2", "a curved loss metric cannot be made isotropic by a constant W (Prop 3.3)", "proof"),
    Claim("C3", "deeper smooth heads make H_eff ε-isotropic along a trajectory (Thm 3.2)", "proof"),
    Claim("C4", "smooth heads make collapsed equilibria saddles through M (Thm 4.1)", "proof"),
    Claim("C5", "ReLU heads escape collapse only via step size or BN, not gradient flow", "14-run grid, no number"),
    Claim("C6", "invariance forces vᵀGv = 0 on augmentation tangents (Prop 5.2)", "proof"),
    Claim("C7", "rank(I_h) ≤ rank(I_z) − dim V_aug for Fisher information (Thm 5.3)", "proof"),
    Claim("C8", "smooth heads show negative curvature in training and escape; ReLU/linear do not (Fig. 3)",
          "normal Swish λ_min < 0 in 69/100 epochs (min −6.35e-6); collapsed ReLU λ_min = 0"),
    Claim("C9", "the head compresses augmentation orbits while keeping classes apart (Tables 1, 5)",
          "compression 21.85× (ResNet-18), 4015× (ViT-Tiny)"),
    Claim("C10", "DINO heads compress orbits, VICReg and Barlow Twins heads expand them (§6.3)",
          "per-dim ratio DINO ViT-S 1284, DINO R50 176, VICReg 1.43, Barlow 2.63"),
    Claim("C11", "deeper heads compress more and protect the backbone better (depth ablation)",
          "compression 49.1 / 57.2 / 78.5× at depth 1 / 2 / 3"),
    Claim("C12", "the backbone beats the head on downstream probes (guillotine)",
          "rotation probe 52.27 (z) vs 37.55 (head), CIFAR-10 ResNet-18"),
)}
"""The paper's claims (docs/paper.md §2) and those the registered experiments declare, by id."""


def declare(claim: Claim) -> Claim:
    """Register a claim an experiment judges (``Experiment.claims``); the same id twice must be the same claim."""
    known = CLAIMS.get(claim.id)
    if known is not None and known != claim:
        raise ValueError(f"claim {claim.id} is declared twice with different words: {known} and {claim}")
    CLAIMS[claim.id] = claim
    return claim


def claim_of(cid: str, statement: str = "") -> Claim:
    """The claim ``cid``; one the registry does not know is told by ``statement`` (its first row's)."""
    return CLAIMS.get(cid) or Claim(cid, statement or cid, "-")

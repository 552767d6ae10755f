"""C4 thresholds: the residual size at which H_eff at a collapsed equilibrium first turns indefinite.

At a collapsed equilibrium (:func:`headgeom.theory.collapse.collapsed_equilibrium`) the per-sample
block is H_eff = Jᵀ(∇²_u L)J + Σ_k ρ_k ∇²h_k = G + M. With full-rank J, G ≻ 0, and M is linear
in ρ, so a smooth head turns H_eff indefinite only once ‖ρ‖ passes a threshold; a linear head
(M ≡ 0) has none under the MSE premise. The sweep variable (the *magnitude*) is the design
parameter of the equilibrium: ``residual`` = ‖u − c_i‖ under the MSE loss (read ambient; ρ_i = (u − c_i)/N),
``angle`` = ∠(u, c_i) in radians under the cosine readings (‖ρ_i‖ = sin θ / (N‖u‖)).

The null directions ρ_i/‖ρ_i‖ are drawn from one generator seed for every magnitude, so a sweep
moves along one ray of residuals. Along that ray H_eff is exactly a two-term family, so a sweep
needs only two exact H_eff evaluations (at the ``ANCHORS``) and then one batched eigh per magnitude:

- MSE: G = JᵀJ/N does not depend on the residual t and M is linear in ρ_i = t r_i/N, so the
  blocks are H(t) = A + t B.
- cosine: −cos(u, c) = −uᵀc/‖u‖ is linear in the unit target c = cos θ û + sin θ r_i, so the loss,
  its Hessian in u, ρ, and hence G and M are all linear in c: H(θ) = cos θ A + sin θ B.

A and B are solved from the two anchors; :func:`lambda_min_at` evaluates one magnitude directly,
the cross-check of the two-term form in the tests. "Negative" is the engine's rule: λ_min < −floor, floor =
rel_floor · max|λ| of the whole block-diagonal H_eff (:func:`headgeom.geometry.spectrum`).

The threshold is given in closed form (:func:`headgeom.geometry.linalg.threshold.crossing`): with A ≻ 0 the
first t at which λ_min(A + tB) reaches 0 is t* = 1/λ_max(−A^{-1/2} B A^{-1/2}) per block, the minimum over
blocks for the batch; under MSE that is the residual, under the cosine readings cos θ A + sin θ B turns
indefinite at tan θ* = t*, so θ* = arctan t* (below π/2 by construction). No grid and no range decide it.
``threshold_closed_form`` holds it (None when no block crosses; status ``A singular`` when A is not
positive definite, where the form does not apply and the sweep's value stands).

The sweep stays as the cross-check the tests compare with: the first grid point whose λ_min is
negative, refined by bisection in log magnitude between it and the grid point before it until hi/lo ≤ 1 + ``rel_tol``; the returned
threshold is the upper end of the final bracket (negative there), so it lies within a factor
1 + rel_tol above the crossing. Status ``below range``: the first grid point is already negative;
``none in range``: no grid point is.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor, nn

from headgeom.geometry import effective_hessian, spectrum
from headgeom.geometry.linalg.threshold import crossing
from headgeom.theory.collapse import collapsed_equilibrium

# C4's analyses, each a loss and a reading of its Hessian (headgeom.geometry.engine.readings): "mse" is the
# collapse theorem's premise as a loss, ½‖u − c‖² read ambient (its exact Hessian is I/N)
OBJECTIVE_OF_READING = {"ambient": "negative_cosine", "tangential": "negative_cosine", "mse": "mse"}
ENGINE_READING = {"ambient": "ambient", "tangential": "tangential", "mse": "ambient"}
MAGNITUDE_OF_READING = {"ambient": "angle", "tangential": "angle", "mse": "residual"}
BRACKETED, BELOW_RANGE, NONE_IN_RANGE = "bracketed", "below range", "none in range"
CLOSED, NO_CROSSING, A_SINGULAR = "closed form", "no crossing", "A singular"
ANCHORS = {"residual": (1.0, 2.0), "angle": (math.pi / 6, math.pi / 3)}  # exact evaluations of a sweep

__all__ = ["OBJECTIVE_OF_READING", "ENGINE_READING", "MAGNITUDE_OF_READING", "BRACKETED", "BELOW_RANGE",
           "NONE_IN_RANGE", "CLOSED", "NO_CROSSING", "A_SINGULAR", "closed_form_threshold", "log_grid", "lambda_min_at", "first_negative", "threshold_sweep"]


def log_grid(lo: float, hi: float, n: int) -> list[float]:
    """n points from lo to hi, evenly spaced in log."""
    if not (0 < lo < hi and math.isfinite(hi)) or n < 2:
        raise ValueError(f"a log grid needs 0 < lo < hi < inf and n >= 2; got lo={lo!r}, hi={hi!r}, n={n!r}")
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def _blocks_at(head: nn.Module | Callable[[Tensor], Tensor], z_point: Tensor, n: int, reading: str,
               magnitude: float, seed: int) -> Tensor:
    """(N, d, d) blocks of H_eff at the collapsed equilibrium with the given magnitude."""
    if reading not in OBJECTIVE_OF_READING:
        raise ValueError(f"reading must be one of {tuple(OBJECTIVE_OF_READING)}; got {reading!r}")
    objective = OBJECTIVE_OF_READING[reading]
    gen = torch.Generator().manual_seed(seed)
    design = {"residual": magnitude} if objective == "mse" else {"angle": magnitude}
    point = collapsed_equilibrium(head, z_point, n, objective, generator=gen, **design)
    return effective_hessian(head, point.loss(), point.z, reading=ENGINE_READING[reading], max_dense=1).blocks()


def _basis(magnitude: str, x: float) -> tuple[float, float]:
    return (1.0, x) if magnitude == "residual" else (math.cos(x), math.sin(x))


def _negative(blocks: Tensor, rel_floor: float) -> dict[str, float | bool]:
    s = spectrum(blocks, rel_floor)
    return {"lambda_min": s.lambda_min, "floor": s.floor, "negative": s.n_negative > 0}


def lambda_min_at(head: nn.Module | Callable[[Tensor], Tensor], z_point: Tensor, n: int, reading: str,
                  magnitude: float, *, seed: int, rel_floor: float) -> dict[str, float | bool]:
    """λ_min and floor of H_eff at the collapsed equilibrium at z̄ with the given magnitude
    (residual for ``mse``, angle for the cosine readings); null directions from ``seed``. Direct:
    one exact evaluation, the cross-check of the two-term form :func:`threshold_sweep` uses."""
    return _negative(_blocks_at(head, z_point, n, reading, magnitude, seed), rel_floor)


def first_negative(is_negative: Callable[[float], bool], grid: list[float], rel_tol: float
                   ) -> tuple[float | None, str, list[bool]]:
    """(threshold, status, negative flag per grid point) for a predicate on magnitudes (module docstring)."""
    if not rel_tol > 0:
        raise ValueError(f"rel_tol must be > 0; got {rel_tol!r}")
    flags = [bool(is_negative(x)) for x in grid]
    if not any(flags):
        return None, NONE_IN_RANGE, flags
    i = flags.index(True)
    if i == 0:
        return grid[0], BELOW_RANGE, flags
    lo, hi = grid[i - 1], grid[i]
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        if is_negative(mid):
            hi = mid
        else:
            lo = mid
    return hi, BRACKETED, flags


def closed_form_threshold(a: Tensor, b: Tensor, magnitude: str) -> tuple[float | None, str]:
    """(threshold, status) of the family A + t·B (``residual``) or cos θ·A + sin θ·B (``angle``) from its
    two terms (module docstring): the smallest per-block crossing, as a residual or as θ* = arctan t*;
    (None, ``no crossing``) when no block turns indefinite at any magnitude, (None, ``A singular``) when
    some block of A is not positive definite."""
    t = crossing(a, b)
    if bool(t.isnan().any()):
        return None, A_SINGULAR
    first = float(t.min())
    if not math.isfinite(first):
        return None, NO_CROSSING
    return (first if magnitude == "residual" else math.atan(first)), CLOSED


def threshold_sweep(head: nn.Module | Callable[[Tensor], Tensor], z_point: Tensor, n: int, reading: str,
                    grid: list[float], *, seed: int, rel_floor: float, rel_tol: float) -> dict[str, Any]:
    """λ_min(H_eff) over the grid and the threshold where it first drops below −floor (two exact
    evaluations at the anchors, then the two-term form of the module docstring)."""
    magnitude = MAGNITUDE_OF_READING.get(reading)
    if magnitude is None:
        raise ValueError(f"reading must be one of {tuple(OBJECTIVE_OF_READING)}; got {reading!r}")
    x1, x2 = ANCHORS[magnitude]
    h1, h2 = (_blocks_at(head, z_point, n, reading, x, seed) for x in (x1, x2))
    basis = torch.tensor([_basis(magnitude, x1), _basis(magnitude, x2)], dtype=h1.dtype)
    a, b = torch.linalg.solve(basis, torch.stack([h1.reshape(-1), h2.reshape(-1)])).reshape(2, *h1.shape)
    a, b = (0.5 * (x + x.transpose(-1, -2)) for x in (a, b))  # symmetric in exact arithmetic; drop round-off

    def at(x: float) -> dict[str, float | bool]:
        f1, f2 = _basis(magnitude, x)
        return _negative(f1 * a + f2 * b, rel_floor)

    curve = [at(x) for x in grid]
    cache = {x: c["negative"] for x, c in zip(grid, curve)}

    def is_negative(x: float) -> bool:
        if x not in cache:
            cache[x] = bool(at(x)["negative"])
        return cache[x]

    thr, status, _ = first_negative(is_negative, grid, rel_tol)
    closed, closed_status = closed_form_threshold(a, b, magnitude)
    return {"magnitude": MAGNITUDE_OF_READING[reading], "grid": list(grid),
            "threshold_closed_form": closed, "closed_form_status": closed_status,
            "lambda_min": [c["lambda_min"] for c in curve], "floor": [c["floor"] for c in curve],
            "threshold": thr, "status": status, "rel_tol": rel_tol}

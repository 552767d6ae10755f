"""C4 thresholds: the residual size at which H_eff at a collapsed equilibrium first turns indefinite.

At a collapsed equilibrium (:func:`headgeom.theory.collapse.collapsed_equilibrium`) the per-sample
block is H_eff = Jᵀ(∇²_u L)J + Σ_k ρ_k ∇²h_k = G + M. With full-rank J, G ≻ 0, and M is linear
in ρ, so a smooth head turns H_eff indefinite only once ‖ρ‖ passes a threshold; a linear head
(M ≡ 0) has none under the MSE premise. The sweep variable (the *magnitude*) is the design
parameter of the equilibrium: ``residual`` = ‖u − c_i‖ under the MSE reading (ρ_i = (u − c_i)/N),
``angle`` = ∠(u, c_i) in radians under the cosine readings (‖ρ_i‖ = sin θ / (N‖u‖)).

The null directions ρ_i/‖ρ_i‖ are drawn from one generator seed for every magnitude, so a sweep
moves along one ray of residuals. "Negative" is the engine's rule: λ_min < −floor, floor =
rel_floor · max|λ| of the whole block-diagonal H_eff (:func:`headgeom.geometry.spectrum`).

The threshold is the first grid point whose λ_min is negative, refined by bisection in log
magnitude between it and the grid point before it until hi/lo ≤ 1 + ``rel_tol``; the returned
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
from headgeom.theory.collapse import collapsed_equilibrium

OBJECTIVE_OF_READING = {"ambient": "negative_cosine", "tangential": "negative_cosine", "mse": "mse"}
MAGNITUDE_OF_READING = {"ambient": "angle", "tangential": "angle", "mse": "residual"}
BRACKETED, BELOW_RANGE, NONE_IN_RANGE = "bracketed", "below range", "none in range"

__all__ = ["OBJECTIVE_OF_READING", "MAGNITUDE_OF_READING", "BRACKETED", "BELOW_RANGE", "NONE_IN_RANGE",
           "log_grid", "lambda_min_at", "first_negative", "threshold_sweep"]


def log_grid(lo: float, hi: float, n: int) -> list[float]:
    """n points from lo to hi, evenly spaced in log."""
    if not (0 < lo < hi and math.isfinite(hi)) or n < 2:
        raise ValueError(f"a log grid needs 0 < lo < hi < inf and n >= 2; got lo={lo!r}, hi={hi!r}, n={n!r}")
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def lambda_min_at(head: nn.Module | Callable[[Tensor], Tensor], z_point: Tensor, n: int, reading: str,
                  magnitude: float, *, seed: int, rel_floor: float) -> dict[str, float | bool]:
    """λ_min and floor of H_eff at the collapsed equilibrium at z̄ with the given magnitude
    (residual for ``mse``, angle for the cosine readings); null directions from ``seed``."""
    if reading not in OBJECTIVE_OF_READING:
        raise ValueError(f"reading must be one of {tuple(OBJECTIVE_OF_READING)}; got {reading!r}")
    objective = OBJECTIVE_OF_READING[reading]
    gen = torch.Generator().manual_seed(seed)
    design = {"residual": magnitude} if objective == "mse" else {"angle": magnitude}
    point = collapsed_equilibrium(head, z_point, n, objective, generator=gen, **design)
    eh = effective_hessian(head, point.loss(), point.z, reading=reading, max_dense=1)
    s = spectrum(eh.blocks(), rel_floor)
    return {"lambda_min": s.lambda_min, "floor": s.floor, "negative": s.n_negative > 0}


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


def threshold_sweep(head: nn.Module | Callable[[Tensor], Tensor], z_point: Tensor, n: int, reading: str,
                    grid: list[float], *, seed: int, rel_floor: float, rel_tol: float) -> dict[str, Any]:
    """λ_min(H_eff) over the grid and the threshold where it first drops below −floor."""
    curve = [lambda_min_at(head, z_point, n, reading, x, seed=seed, rel_floor=rel_floor) for x in grid]
    cache = {x: c["negative"] for x, c in zip(grid, curve)}

    def is_negative(x: float) -> bool:
        if x not in cache:
            cache[x] = bool(lambda_min_at(head, z_point, n, reading, x, seed=seed, rel_floor=rel_floor)["negative"])
        return cache[x]

    thr, status, _ = first_negative(is_negative, grid, rel_tol)
    return {"magnitude": MAGNITUDE_OF_READING[reading], "grid": list(grid),
            "lambda_min": [c["lambda_min"] for c in curve], "floor": [c["floor"] for c in curve],
            "threshold": thr, "status": status, "rel_tol": rel_tol}

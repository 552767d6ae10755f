"""The gap between two views at a head's output, and where a two-view state sits against its own threshold
as that gap varies (C4, Thm 4.1; docs/paper.md §2 C4).

The *view gap* of a sample is the angle ∠(u1_i, u2_i) between the head's outputs on its two views
(:func:`view_angles`). At a two-view state (:func:`headgeom.theory.collapse.two_view_point`: z = the first
views' representations, targets c_i = h(z2_i)) it sets the residual ρ = ∇_u L, hence M, hence whether the
state is past the threshold of its own ray G + t·M (:mod:`headgeom.geometry.linalg.threshold`).

:func:`gap_sweep` measures that state with the gap scaled by a multiplier s, everything else held (the same
z, the same head, the same direction of each target):

- cosine loss (readings ``ambient``, ``tangential``): −cos(u, c) is linear in the unit target ĉ, so with
  ĉ_i(s) = cos(sθ_i) û_i + sin(sθ_i) ê_i (θ_i the measured angle, ê_i the unit direction of c_i off u_i) every
  per-sample block is H_i(s) = cos(sθ_i) A_i + sin(sθ_i) B_i, and the same for G and M apart. A and B are solved
  from two exact evaluations with every target at the angles of ``ANCHORS["angle"]`` (π/6 and π/3, as the
  threshold sweeps'); they serve every s, and s = 1 is the state itself;
- MSE (reading ``mse``, ½‖u − c‖²): the target c_i(s) = u_i − s(u_i − c_i) scales ρ by s and leaves G = JᵀJ/N,
  so G(s) = G and M(s) = s·M: one evaluation.

At each s: λ_min of H_eff and of G against the sign floor rel_floor · max(max|λ|, S) (S the operand scale of
the measured state, :mod:`headgeom.geometry.engine.operand_scale`), the state's threshold ratio (max over blocks,
None where a G block is not positive definite beyond its floor) and whether the state is past its threshold
(λ_min(H_eff) < −floor with G PSD: the negative curvature is M's). Angles are radians; the gap of a state is
the mean of its samples' angles.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from headgeom.geometry import effective_hessian, spectrum
from headgeom.objectives import analysis_loss
from headgeom.theory.collapse import CollapsedPoint
from headgeom.theory.collapse_threshold import ANCHORS, ENGINE_READING, OBJECTIVE_OF_READING, state_ratio

__all__ = ["view_angles", "target_directions", "gap_sweep", "state_at"]


def view_angles(u1: Tensor, u2: Tensor) -> Tensor:
    """∠(u1_i, u2_i) in radians, (N,) float64, for head outputs u1, u2 of shape (N, k) (the two views of
    each sample); ValueError for shapes that differ or rows of zero norm (no direction, no angle)."""
    if not isinstance(u1, Tensor) or not isinstance(u2, Tensor) or u1.ndim != 2 or u1.shape != u2.shape:
        raise ValueError(f"u1 and u2 must be (N, k) tensors of one shape; got {getattr(u1, 'shape', u1)!r} and "
                         f"{getattr(u2, 'shape', u2)!r}")
    a, b = u1.detach().to(torch.float64), u2.detach().to(torch.float64)
    na, nb = a.norm(dim=1), b.norm(dim=1)
    if bool((na == 0).any() or (nb == 0).any()):
        raise ValueError("a head output of norm 0 has no direction: the angle between the views is undefined there")
    cos = ((a * b).sum(dim=1) / (na * nb)).clamp(-1.0, 1.0)
    # atan2 of (|a x b|, a.b) is accurate at small angles, where arccos of a cosine near 1 is not
    sin = (a / na[:, None] - cos[:, None] * b / nb[:, None]).norm(dim=1)
    return torch.atan2(sin, cos)


def target_directions(u: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(û, ê, θ): the unit outputs û_i, the unit direction ê_i of c_i off u_i (orthogonal to û_i) and the
    angles θ_i = ∠(u_i, c_i), so that ĉ_i = cos θ_i û_i + sin θ_i ê_i. Where c_i is parallel to u_i (θ_i = 0)
    ê_i is any unit vector orthogonal to û_i (the axis least aligned with û_i, projected): sin θ_i = 0 there."""
    u, c = u.detach().to(torch.float64), c.detach().to(torch.float64)
    theta = view_angles(u, c)
    u_hat = u / u.norm(dim=1, keepdim=True)
    c_hat = c / c.norm(dim=1, keepdim=True)
    off = c_hat - (c_hat * u_hat).sum(dim=1, keepdim=True) * u_hat
    small = off.norm(dim=1) <= 1e-12
    if bool(small.any()):
        axis = torch.zeros_like(u_hat)
        axis[torch.arange(u.shape[0]), u_hat.abs().argmin(dim=1)] = 1.0
        axis = axis - (axis * u_hat).sum(dim=1, keepdim=True) * u_hat
        off = torch.where(small[:, None], axis, off)
    return u_hat, off / off.norm(dim=1, keepdim=True), theta


def _parts(head: nn.Module | Callable[[Tensor], Tensor], z: Tensor, objective: str, target: Tensor,
           reading: str, scale: bool = False) -> tuple[Tensor, Tensor, float | None]:
    """(G, M) blocks (N, d, d) of the loss ``objective`` with ``target`` at z, and with ``scale`` the operand
    scale S (power steps: only where asked)."""
    eh = effective_hessian(head, analysis_loss(objective, target), z, reading=ENGINE_READING[reading], max_dense=1)
    _, g, m = eh.decomposed_blocks()
    return g, m, float(eh.operand_scale().value) if scale else None


def state_at(g: Tensor, m: Tensor, rel_floor: float, scale: float) -> dict[str, Any]:
    """What C4 judges at one state of blocks H = G + M: λ_min, floor and negative count of H and G, the state's
    threshold ratio (None where a G block is not PD beyond its floor) and ``past`` (λ_min(H) < −floor with G
    PSD); the per-block λ_min and max|λ| of H and of G, so that a judge can re-read the state at another floor
    or with fewer blocks."""
    s_h, s_g = spectrum(g + m, rel_floor, scale=scale), spectrum(g, rel_floor, scale=scale)
    per = {f"{name}_{key}": [float(v) for v in sp.per_block[key]]
           for name, sp in (("H", s_h), ("G", s_g)) for key in ("lambda_min", "lambda_max")}
    return {"lambda_min_H": s_h.lambda_min, "lambda_max_H": s_h.lambda_max, "floor": s_h.floor,
            "n_negative_H": s_h.n_negative, "lambda_min_G": s_g.lambda_min, "floor_G": s_g.floor,
            "n_negative_G": s_g.n_negative, "ratio": state_ratio(g, m, s_g.floor),
            "past": bool(s_h.n_negative > 0 and s_g.n_negative == 0), "operand_scale": scale, "per_block": per}


def gap_sweep(head: nn.Module | Callable[[Tensor], Tensor], point: CollapsedPoint, reading: str,
              multipliers: Sequence[float], *, rel_floor: float, operand_scale: float | None = None
              ) -> list[dict[str, Any]]:
    """The state ``point`` (a two-view state of ``reading``'s loss) with its view gap scaled by each of
    ``multipliers`` (module docstring): per multiplier s, :func:`state_at` of the blocks plus ``multiplier``
    and ``gap`` (the mean angle ∠(u_i, c_i(s)), radians). ``operand_scale``: S of the measured state when the
    caller has it (else computed here)."""
    if reading not in OBJECTIVE_OF_READING:
        raise ValueError(f"reading must be one of {tuple(OBJECTIVE_OF_READING)}; got {reading!r}")
    if OBJECTIVE_OF_READING[reading] != point.objective:
        raise ValueError(f"the point was built for the {point.objective!r} loss; reading {reading!r} reads the "
                         f"{OBJECTIVE_OF_READING[reading]!r} loss")
    if not multipliers or any(not (s >= 0 and math.isfinite(s)) for s in multipliers):
        raise ValueError(f"multipliers must be finite numbers >= 0 (1 = the measured gap); got {list(multipliers)!r}")
    z, u = point.z, point.u.detach().to(torch.float64)
    out = []
    if point.objective == "mse":
        g, m, own = _parts(head, z, "mse", point.target, reading, scale=operand_scale is None)
        scale = own if operand_scale is None else operand_scale
        residual = u - point.target.detach().to(torch.float64)
        for s in multipliers:
            state = state_at(g, float(s) * m, rel_floor, scale)
            gap = float(view_angles(u, u - float(s) * residual).mean()) if s > 0 else 0.0
            out.append({"multiplier": float(s), "gap": gap, **state})
        return out
    u_hat, e_hat, theta = target_directions(u, point.target)
    scale = (operand_scale if operand_scale is not None
             else _parts(head, z, point.objective, point.target, reading, scale=True)[2])
    # the two terms from two exact evaluations at the ANCHORS angles (at θ = π/2 itself the tangential reading's
    # loss curvature vanishes and the engine's check of the declared form has nothing to compare against)
    (a1, a2) = ANCHORS["angle"]
    g1, m1, _ = _parts(head, z, point.objective, math.cos(a1) * u_hat + math.sin(a1) * e_hat, reading)
    g2, m2, _ = _parts(head, z, point.objective, math.cos(a2) * u_hat + math.sin(a2) * e_hat, reading)
    basis = torch.tensor([[math.cos(a1), math.sin(a1)], [math.cos(a2), math.sin(a2)]], dtype=torch.float64)
    inverse = torch.linalg.inv(basis)
    g_a, g_b = (inverse[i, 0] * g1 + inverse[i, 1] * g2 for i in range(2))
    m_a, m_b = (inverse[i, 0] * m1 + inverse[i, 1] * m2 for i in range(2))
    for s in multipliers:
        angle = float(s) * theta
        cos, sin = torch.cos(angle)[:, None, None], torch.sin(angle)[:, None, None]
        state = state_at(cos * g_a + sin * g_b, cos * m_a + sin * m_b, rel_floor, scale)
        gap = float(view_angles(u, torch.cos(angle)[:, None] * u_hat + torch.sin(angle)[:, None] * e_hat).mean())
        out.append({"multiplier": float(s), "gap": gap, **state})
    return out

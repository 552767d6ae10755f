"""The operand scale of the pullback metric: S = max_i ‖A_i‖₂ · ‖J_i‖₂², the floor's other reference.

G_i = J_iᵀ A_i J_i (docs/paper.md §1) is summed from terms as large as ‖A_i‖₂‖J_i‖₂², A_i the
ambient per-sample block of ∇²_u L (before any reading's projection) and J_i the head's Jacobian at
z_i. When those terms cancel (the tangential reading P_i A_i P_i of a head whose Jacobian maps almost
onto the radial direction û_i, so P_i J_i ≈ 0) the result is tiny and carries round-off of order
eps · S, far above eps · max|λ(G)|. A sign floor relative to the result alone then counts that
round-off as curvature; :func:`headgeom.geometry.spectrum` takes ``scale=S`` so that the
floor is rel_floor · max(max|λ|, S) (docs/paper.md §4 pitfall 2).

S covers G's operands only. M = Σ_i ρ_i ∇²_z h_i is computed from the head's second derivatives
without any projection, so it has no such cancellation, and its operands are not part of S.

Norms here are estimates good enough for a floor, never used as results:
- ‖J_i‖₂² by power steps on J_iᵀJ_i, all samples at once (one jvp and one vjp of the batch per
  step; for a row-wise head row i of J V is J_i v_i), stopped when every sample's estimate
  moved by at most ``rtol`` or after ``steps`` steps. Power steps converge from below.
- ‖A_i‖₂ exactly from a declared identity-plus-low-rank form (the r×r problem), else by power steps
  on the loss HVP of the whole batch, all samples at once for a separable loss, or of the whole loss
  Hessian for a loss that couples samples (an upper bound of every ‖A_ii‖₂: conservative).
- the product is rounded up by ``MARGIN`` (10 %), so S is at least the exact scale whenever the
  power steps reached 1/MARGIN of the norms, and at most MARGIN times it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import Tensor
from torch.func import vjp

from .loss_curvature import LowRankCurvature, curvature_for
from .readings import jvp_or_double_vjp, loss_hvp

MARGIN = 1.1  # the estimate is rounded up by this factor (power steps converge from below)
STEPS = 20
RTOL = 1e-3


@dataclass(frozen=True)
class PowerNorms:
    """Estimates of ‖B_i‖₂ of a block-diagonal operator B (or of the whole B), from below."""

    values: Tensor  # (N,) per block; one entry repeated N times for a whole operator
    steps: int
    converged: bool


@dataclass(frozen=True)
class OperandScale:
    """S = MARGIN · max_i ‖A_i‖₂ · ‖J_i‖₂² and how each factor was obtained (module docstring)."""

    value: float
    loss_norm_max: float  # max_i ‖A_i‖₂ (estimate)
    jacobian_norm_max: float  # max_i ‖J_i‖₂ (estimate)
    loss_how: str
    jacobian_how: str
    steps: dict[str, int]
    converged: bool

    def record(self) -> dict[str, Any]:
        """Plain-Python record for run metadata."""
        return {"value": self.value, "definition": DEFINITION, "margin": MARGIN,
                "loss_norm_max": self.loss_norm_max, "jacobian_norm_max": self.jacobian_norm_max,
                "loss_how": self.loss_how, "jacobian_how": self.jacobian_how,
                "steps": dict(self.steps), "converged": self.converged}


DEFINITION = (f"S = {MARGIN:g} * max_i |A_i|_2 |J_i|_2^2, A_i the per-sample block of the ambient loss Hessian "
              "(before the reading's projection), J_i the head Jacobian at z_i; norms by power steps (from below) "
              "or exactly from a declared low-rank form, rounded up by the margin; it covers G's operands "
              "(M is computed without projection)")


def power_norms(apply: Callable[[Tensor], Tensor], v0: Tensor, *, per_row: bool = True, steps: int = STEPS,
                rtol: float = RTOL) -> PowerNorms:
    """‖B_i‖₂ of a symmetric block-diagonal operator B given as ``apply(V)`` on (N, ...) tensors whose
    row i is B_i v_i; with ``per_row=False`` ‖B‖₂ of the whole operator (repeated N times).

    Power steps v ← B v / ‖B v‖ (per row), estimate ‖B v‖; they increase towards max|λ(B_i)|.
    Stops when every estimate moved by at most rtol (relative) or after ``steps`` steps.
    """
    n = v0.shape[0]
    dims = tuple(range(1, v0.ndim)) if per_row else tuple(range(v0.ndim))

    def unit(x: Tensor) -> tuple[Tensor, Tensor]:
        norm = x.norm(dim=dims, keepdim=True)
        return x / norm.clamp_min(torch.finfo(x.dtype).tiny), norm

    v, _ = unit(v0)
    est = torch.zeros(n if per_row else 1, dtype=v0.dtype, device=v0.device)
    done = False
    step = 0
    for step in range(1, steps + 1):
        v, norm = unit(apply(v))
        new = norm.reshape(-1)
        done = bool(((new - est).abs() <= rtol * new).all())
        est = new
        if done:
            break
    values = est if per_row else est.expand(n)
    return PowerNorms(values.detach(), step, done)


def low_rank_norms(curv: LowRankCurvature, k: int) -> Tensor:
    """‖α_i I + U_i B_i U_iᵀ (+ diag δ_i)‖₂ per sample, (N,): exact from the r×r problem
    (U_i = Q_i R_i: the eigenvalues are α_i + eig(R_i B_i R_iᵀ) on span U_i and α_i beside it);
    with a diagonal, the bound max_j |α_i + δ_ij| + ‖R_i B_i R_iᵀ‖₂."""
    alpha = curv.alpha
    base = (alpha[:, None] + curv.diag).abs().amax(-1) if curv.diag is not None else alpha.abs()
    if curv.U is None:
        return base
    q, r = torch.linalg.qr(curv.U)  # (N, k, r), (N, r, r)
    small = r @ curv.B @ r.transpose(1, 2)
    small = 0.5 * (small + small.transpose(1, 2))
    if curv.diag is not None:
        return base + torch.linalg.matrix_norm(small, 2)
    lam = torch.linalg.eigvalsh(alpha[:, None, None] * torch.eye(small.shape[-1], dtype=small.dtype,
                                                                 device=small.device) + small)
    exact = lam.abs().amax(-1)
    return torch.maximum(exact, alpha.abs()) if curv.rank < k else exact


def operand_scale(jacobian: PowerNorms, loss: Tensor, loss_how: str, jacobian_how: str,
                  loss_steps: int, loss_converged: bool) -> OperandScale:
    """S = MARGIN · max_i ‖A_i‖₂ ‖J_i‖₂² from per-sample norms: ``jacobian.values`` are ‖J_i‖₂²
    estimates, ``loss`` the ‖A_i‖₂ (N,)."""
    prod = loss * jacobian.values
    return OperandScale(
        value=MARGIN * float(prod.max()), loss_norm_max=float(loss.max()),
        jacobian_norm_max=float(jacobian.values.max().sqrt()), loss_how=loss_how, jacobian_how=jacobian_how,
        steps={"jacobian": jacobian.steps, "loss": loss_steps}, converged=jacobian.converged and loss_converged)


def measure_operand_scale(fn: Callable[[Tensor], Tensor], z: Tensor, u: Tensor, loss: Callable[[Tensor], Tensor],
                          row_wise: bool, separable: bool) -> OperandScale:
    """S of the head ``fn`` (output ``u`` at ``z``) and ``loss`` (the module docstring says how).

    ‖J_i‖₂ by batched power steps (a head that couples samples: of the whole J, an upper bound);
    ‖A_i‖₂ exactly from a declared low-rank form, else by power steps on the ambient loss HVP,
    per sample for a separable loss, of the whole loss Hessian otherwise (an upper bound)."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    _, pull = vjp(fn, z)
    jac = power_norms(lambda v: pull(jvp_or_double_vjp(fn, z, v))[0],
                      torch.randn(z.shape, generator=gen, dtype=z.dtype).to(z.device), per_row=row_wise)
    j_how = ("power steps on J_i^T J_i, every sample at once" if row_wise else
             "power steps on the whole J^T J (the head couples samples): an upper bound of every |J_i|")
    curv = curvature_for(loss, u, "ambient") if separable else None
    if curv is not None:
        a, a_how, a_steps, a_ok = low_rank_norms(curv, u.shape[1]), "exact from the declared low-rank form", 0, True
    else:
        pn = power_norms(loss_hvp(loss, u, "ambient"),
                         torch.randn(u.shape, generator=gen, dtype=u.dtype).to(u.device), per_row=separable)
        a, a_steps, a_ok = pn.values, pn.steps, pn.converged
        a_how = ("power steps on the loss HVP, every sample at once" if separable else
                 "power steps on the whole loss Hessian (the loss couples samples): an upper bound")
    return operand_scale(jac, a, a_how, j_how, a_steps, a_ok)

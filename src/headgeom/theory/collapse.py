"""Collapsed states of a projection head, built exactly (Thm 4.1; docs/paper.md §2 C4).

A *collapsed equilibrium* is a batch whose representations all coincide, z_i = z̄, at which
the representation gradient vanishes, ∇_{z_i} L = J_h(z̄)ᵀ ρ_i = 0, while the residual
gradient ρ_i = ∇_{u_i} L does not. With k > d the head's Jacobian J = J_h(z̄) (k, d) has a
left null space of dimension ≥ k − d, and the targets are chosen so that every ρ_i lies in it:

- ``mse`` (L = mean_i ½‖u_i − c_i‖², the MSE premise): c_i = u − N ρ_i, so ρ_i = (u − c_i)/N
  exactly, with ‖u − c_i‖ = ``residual``.
- ``negative_cosine`` (L = −mean_i cos(u_i, c_i), SimSiam/BYOL): the gradient of −cos is
  always tangent to the sphere at u, so r_i is drawn from the left null space of [J, u]
  (Jᵀr = 0 and uᵀr = 0) and c_i = cos θ û + sin θ r_i, giving
  ρ_i = −sin θ / (N‖u‖) · r_i (θ = ``angle``).

A *pseudo-collapsed* point is the paper's initialisation (projector Linear weights ×0.1, see
``headgeom.heads.scale_linear_weights_``) at ordinary representations: nearly collapsed
outputs, but no equilibrium; :func:`equilibrium_residual` says how far it is from one.

All functions are pure: the head is evaluated, never changed, and random directions come from
the ``generator`` given (a fresh one seeded with 0 when None), never from torch's global one.
Batches are (N, d) / (N, k) and the losses are batch means (headgeom's convention), so ρ carries a
factor 1/N.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import grad, jacfwd, vmap

from headgeom.objectives import analysis_loss
from headgeom.rng import own_generator

OBJECTIVES = ("mse", "negative_cosine")

__all__ = [
    "OBJECTIVES", "CollapsedPoint", "head_jacobian", "left_null_basis", "collapsed_equilibrium",
    "pseudo_collapsed_point", "representation_gradient", "equilibrium_residual",
]


@dataclass(frozen=True)
class CollapsedPoint:
    """A batch and its stop-gradient targets for one objective.

    z: (N, d) representations; target: (N, k) stop-gradient targets c_i; u: (N, k) = h(z);
    rho: (N, k) residual gradient ∇_u L (as designed for an equilibrium, from autograd
    otherwise); null_dim: dimension of the null space ρ was drawn from (None if not built);
    equilibrium: built to satisfy ∇_z L = 0.
    """

    z: Tensor
    target: Tensor
    objective: str
    u: Tensor
    rho: Tensor
    null_dim: int | None
    equilibrium: bool

    def loss(self) -> Callable[[Tensor], Tensor]:
        """u ↦ L(u) (N, k) -> scalar, the targets held fixed."""
        return analysis_loss(self.objective, self.target)


def _check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    return objective


def _evaluate(head: nn.Module | Callable[[Tensor], Tensor], z: Tensor) -> Tensor:
    try:
        return head(z)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"the head could not be evaluated at z of shape {tuple(z.shape)}: {err}") from err


def head_jacobian(head: nn.Module | Callable[[Tensor], Tensor], z_point: Tensor) -> Tensor:
    """J_h(z̄) of shape (k, d) at one representation z̄ of shape (d,)."""
    if not isinstance(z_point, Tensor) or z_point.ndim != 1 or not z_point.dtype.is_floating_point:
        raise ValueError(f"z_point must be a floating tensor of shape (d,); got {getattr(z_point, 'shape', z_point)!r}")
    return jacfwd(lambda x: head(x[None])[0])(z_point)  # d forward passes: cheaper than k backward ones (k > d)


def left_null_basis(a: Tensor, rtol: float = 1e-10) -> Tensor:
    """Orthonormal basis (k, m) of {r ∈ R^k : aᵀ r = 0} for a of shape (k, c), by full SVD.

    Singular values at or below ``rtol`` · σ_max count as zero, so m = k − numerical rank.
    """
    if a.ndim != 2:
        raise ValueError(f"a must be a matrix (k, c); got shape {tuple(a.shape)}")
    u, s, _ = torch.linalg.svd(a, full_matrices=True)
    tol = rtol * float(s.max()) if s.numel() else 0.0
    rank = int((s > tol).sum())
    return u[:, rank:]


def _null_directions(a: Tensor, n: int, generator: torch.Generator, rtol: float) -> tuple[Tensor, int]:
    """n random unit vectors (n, k) uniform on the unit sphere of {r : aᵀr = 0}, and its dimension.

    A standard Gaussian projected onto a subspace is a standard Gaussian of that subspace, so
    projecting out the column space of a (QR, then the SVD of R for the rank; twice, for
    round-off) draws the same directions as Gaussian coefficients on an orthonormal null
    basis, without forming the (k, k − rank) basis, large for the paper's 2048-wide heads.
    """
    q, r_factor = torch.linalg.qr(a)  # (k, c), (c, c): a's singular values are R's
    s = torch.linalg.svdvals(r_factor)
    rank = int((s > rtol * float(s.max())).sum()) if s.numel() else 0
    null_dim = a.shape[0] - rank
    if null_dim == 0:
        return a.new_zeros(n, a.shape[0]), 0
    if rank == a.shape[1]:
        col = q
    else:  # rank-deficient a: the column space is spanned by Q U_R[:, :rank], R = U_R S V_Rᵀ
        col = q @ torch.linalg.svd(r_factor)[0][:, :rank]
    r = torch.randn(n, a.shape[0], generator=generator, dtype=a.dtype)
    for _ in range(2):
        r = r - (r @ col) @ col.T
    return r / r.norm(dim=1, keepdim=True), null_dim


def collapsed_equilibrium(
    head: nn.Module | Callable[[Tensor], Tensor],
    z_point: Tensor,
    n: int,
    objective: str,
    *,
    residual: float = 1.0,
    angle: float = math.pi / 4,
    generator: torch.Generator | None = None,
    rtol: float = 1e-10,
) -> CollapsedPoint:
    """All N representations at z̄ (d,), targets chosen so that ∇_z L = 0 with ρ ≠ 0.

    residual: ‖u − c_i‖ for ``mse``; angle: θ = ∠(u, c_i) in radians, in (0, π), for
    ``negative_cosine``. ρ_i are independent random directions in the admissible null space, drawn
    from ``generator`` (None: a fresh one seeded with 0).
    """
    _check_objective(objective)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n (the batch size) must be a positive int; got {n!r}")
    if not (residual > 0 and math.isfinite(residual)):
        raise ValueError(f"residual must be a positive finite number (‖u − c‖); got {residual!r}")
    if not (0 < angle < math.pi):
        raise ValueError(f"angle must lie in (0, π) so that the target differs from u; got {angle!r}")
    jac = head_jacobian(head, z_point).detach()  # (k, d)
    z = z_point.detach()[None].expand(n, -1).clone()
    with torch.no_grad():
        u = _evaluate(head, z)
    u0 = u[0]
    constraints = jac if objective == "mse" else torch.cat([jac, u0[:, None]], dim=1)
    r, null_dim = _null_directions(constraints, n, own_generator(generator), rtol)
    if null_dim == 0:
        k, d = jac.shape
        raise ValueError(
            f"no collapsed equilibrium with rho != 0 exists here: the left null space of "
            f"{'J_h' if objective == 'mse' else '[J_h, u]'} ({tuple(constraints.shape)}) is trivial "
            f"(head {d} -> {k}); use an expander head with k > d{' + 1' if objective != 'mse' else ''}"
        )
    if objective == "mse":
        rho = residual * r / n
        target = u - n * rho
    else:
        norm_u = float(u0.norm())
        if norm_u == 0.0:
            raise ValueError("the head output at z_point is zero, where the cosine loss is undefined; move z_point")
        u_hat = u0 / norm_u
        target = math.cos(angle) * u_hat[None] + math.sin(angle) * r
        rho = -math.sin(angle) / (n * norm_u) * r
    return CollapsedPoint(z=z, target=target, objective=objective, u=u, rho=rho,
                          null_dim=null_dim, equilibrium=True)


def pseudo_collapsed_point(
    head: nn.Module | Callable[[Tensor], Tensor],
    z: Tensor,
    objective: str,
    *,
    view_noise: float = 0.1,
    generator: torch.Generator | None = None,
) -> CollapsedPoint:
    """A near-collapsed, non-equilibrium point: representations z (N, d) as given, targets the
    head's outputs on a second view z + view_noise · ε (held fixed, like SimSiam's stop-gradient
    branch). Pair it with a head scaled by ``scale_linear_weights_(head, 0.1)``. ε is drawn from
    ``generator`` (None: a fresh one seeded with 0)."""
    _check_objective(objective)
    if not isinstance(z, Tensor) or z.ndim != 2:
        raise ValueError(f"z must be a tensor of shape (N, d); got {getattr(z, 'shape', z)!r}")
    if not (view_noise >= 0 and math.isfinite(view_noise)):
        raise ValueError(f"view_noise must be a finite number >= 0; got {view_noise!r}")
    z = z.detach()
    eps = torch.randn(z.shape, generator=own_generator(generator), dtype=z.dtype)
    with torch.no_grad():
        u = _evaluate(head, z)
        target = _evaluate(head, z + view_noise * eps)
    rho = grad(analysis_loss(objective, target))(u)
    return CollapsedPoint(z=z, target=target, objective=objective, u=u, rho=rho,
                          null_dim=None, equilibrium=False)


def representation_gradient(head: nn.Module | Callable[[Tensor], Tensor], point: CollapsedPoint) -> Tensor:
    """∇_z L(h(z)) at point.z, shape (N, d)."""
    loss = point.loss()
    return grad(lambda z: loss(head(z)))(point.z)


def equilibrium_residual(head: nn.Module | Callable[[Tensor], Tensor], point: CollapsedPoint) -> dict[str, float]:
    """How far ``point`` is from an equilibrium.

    grad_norm = ‖∇_z L‖_F; rho_norm = ‖ρ‖_F (ρ from autograd); jac_norm = max_i ‖J_h(z_i)‖_2;
    relative = grad_norm / (jac_norm · rho_norm), the size of Jᵀρ against its natural scale
    (0 at an exact equilibrium, up to round-off); rho_design_error = ‖ρ_autograd − ρ_design‖ /
    ‖ρ_design‖ (0 for points that were not built as equilibria, whose ρ is autograd's).
    """
    g = representation_gradient(head, point).detach()
    rho = grad(point.loss())(point.u).detach()
    distinct = torch.unique(point.z, dim=0)  # a collapsed batch has one distinct row
    jacs = vmap(jacfwd(lambda x: head(x[None])[0]))(distinct).detach()  # (M, k, d)
    gram = jacs.transpose(1, 2) @ jacs  # ‖J‖₂² = λ_max(JᵀJ): a (d, d) eigh instead of a (k, d) SVD
    jac_norm = float(torch.linalg.eigvalsh(gram)[:, -1].clamp_min(0).max().sqrt())
    grad_norm, rho_norm = float(g.norm()), float(rho.norm())
    scale = jac_norm * rho_norm
    design = float(point.rho.norm())
    return {
        "grad_norm": grad_norm,
        "rho_norm": rho_norm,
        "jac_norm": jac_norm,
        "relative": grad_norm / scale if scale > 0 else float("inf") if grad_norm > 0 else 0.0,
        "rho_design_error": float((rho - point.rho).norm()) / design if design > 0 else 0.0,
    }

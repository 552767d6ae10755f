"""Fisher information under a stated Gaussian observation model, and numerical rank (Thm 5.3; docs/paper.md §2 C7).

Observation model (stated in every output): an observation y of a smooth map g at parameter θ
with isotropic Gaussian noise,

    y = g(θ) + ε,   ε ~ N(0, σ² I_m)   ⇒   I(θ) = J_g(θ)ᵀ J_g(θ) / σ²      (n × n, n = dim θ).

C7 uses it twice on one data manifold θ ↦ x(θ): the representation g = f∘x gives I_z, the head
output g = h∘f∘x gives I_h; and once in representation space, g = h with θ = z, giving the
information the head output carries about z, J_hᵀJ_h/σ² (the pullback metric G up to 1/σ²).

Numerical rank counts eigenvalues of the PSD matrix I (= its singular values) above
``rel_tol · λ_max(I)``. The eigenvalues are computed as s²/σ² from the singular values s of J
(float64): the SVD resolves s down to about eps · s_max, i.e. eigenvalues down to eps² · λ_max,
where eigh of a formed JᵀJ stops at about eps · λ_max.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import jacfwd, vmap

__all__ = [
    "GaussianObservation", "fisher_information", "fisher_eigen", "numerical_rank", "fisher_rank",
    "null_space_fraction", "per_sample_jacobian",
]


@dataclass(frozen=True)
class GaussianObservation:
    """y = g(θ) + ε, ε ~ N(0, σ² I): Fisher information I(θ) = J_gᵀ J_g / σ²."""

    sigma: float = 1.0

    def __post_init__(self) -> None:
        if not self.sigma > 0:
            raise ValueError(f"the observation noise sigma must be > 0; got {self.sigma}")

    def describe(self, what: str = "g(theta)") -> str:
        return f"y = {what} + eps, eps ~ N(0, {self.sigma:g}^2 I); I(theta) = J^T J / {self.sigma:g}^2"


def _check_jac(jac: Tensor) -> None:
    if not isinstance(jac, Tensor) or jac.ndim < 2:
        raise ValueError(f"a Jacobian must be a tensor (..., m, n) (outputs × parameters); got "
                         f"{getattr(jac, 'shape', type(jac).__name__)}")


def fisher_information(jac: Tensor, sigma: float = 1.0) -> Tensor:
    """I = Jᵀ J / σ² for Jacobians (..., m, n) -> (..., n, n)."""
    _check_jac(jac)
    GaussianObservation(sigma)
    return jac.transpose(-1, -2) @ jac / sigma ** 2


def fisher_eigen(jac: Tensor, sigma: float = 1.0) -> tuple[Tensor, Tensor]:
    """Eigenvalues (..., n) descending and eigenvectors (..., n, n) (columns) of I = JᵀJ/σ².

    From the full SVD of J: I = V diag(s²) Vᵀ / σ², with zeros beyond min(m, n).
    """
    _check_jac(jac)
    GaussianObservation(sigma)
    _, s, vh = torch.linalg.svd(jac, full_matrices=True)
    n = jac.shape[-1]
    lam = torch.zeros(*jac.shape[:-2], n, dtype=jac.dtype, device=jac.device)
    lam[..., : s.shape[-1]] = s.square() / sigma ** 2
    return lam, vh.transpose(-1, -2)


def numerical_rank(values: Tensor, rel_tol: float) -> Tensor:
    """Number of values above rel_tol · max (per row of (..., n)); 0 for an all-zero row.

    Pass singular values (or eigenvalues of a PSD matrix). The tolerance is relative to the
    largest value of the same row, so the rank does not depend on σ or on overall scale.
    """
    if not 0 <= rel_tol < 1:
        raise ValueError(f"rel_tol must be in [0, 1); got {rel_tol}")
    v = values.abs()
    top = v.amax(dim=-1, keepdim=True)
    return ((v > rel_tol * top) & (top > 0)).sum(dim=-1)


def fisher_rank(jac: Tensor, rel_tol: float, sigma: float = 1.0) -> Tensor:
    """Numerical rank of I = JᵀJ/σ²: eigenvalues above rel_tol · λ_max(I); (..., m, n) -> (...)."""
    return numerical_rank(fisher_eigen(jac, sigma)[0], rel_tol)


def null_space_fraction(jac: Tensor, v: Tensor, rel_tol: float) -> Tensor:
    """‖P_null v‖ / ‖v‖ for directions v (..., k, n) in parameter space; (...,k).

    P_null projects onto the eigenvectors of I = JᵀJ with eigenvalue ≤ rel_tol · λ_max (the
    numerical null space at that tolerance): 1 when v carries no information, 0 when it lies
    in the informative subspace.
    """
    lam, vecs = fisher_eigen(jac)
    top = lam.amax(dim=-1, keepdim=True)
    null = (lam <= rel_tol * top).to(vecs.dtype)  # (..., n)
    coeff = v @ vecs  # (..., k, n): coordinates in the eigenbasis
    frac = (coeff.square() * null.unsqueeze(-2)).sum(-1) / coeff.square().sum(-1)
    return frac.sqrt()


def per_sample_jacobian(fn: Callable[[Tensor], Tensor], x: Tensor) -> Tensor:
    """Jacobians of a row-wise map fn: (N, n) -> (N, m) at each row: (N, m, n), forward mode."""
    if x.ndim != 2:
        raise ValueError(f"per_sample_jacobian needs x of shape (N, n); got {tuple(x.shape)}")
    return vmap(jacfwd(lambda r: fn(r.unsqueeze(0)).squeeze(0)))(x)

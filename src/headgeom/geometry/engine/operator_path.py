"""H_eff, G and M as matrix-free products and as dense matrices: functions of the measured facts.

Matvecs are forward-over-reverse (never dense): M v is the Hessian-vector product of
⟨sg(ρ), h(z)⟩, G v = Jᵀ ∇²_u L (J v) under the reading, H_eff v of the ambient reading the HVP of
L(h(z)) itself (else G v + M v). The dense matrices (``dense``, ``gauss_newton_dense``,
``interaction_dense``) are for N·d up to the analysis's ``max_dense``, which the caller checks.
"""
from __future__ import annotations

from typing import Callable

from torch import Tensor
from torch.func import hessian, jacfwd, jacrev, vjp, vmap

from .analysis_facts import AnalysisFacts
from .readings import jvp_or_double_vjp


def as_flat(facts: AnalysisFacts, v: Tensor) -> tuple[Tensor, tuple[int, ...]]:
    """v of shape (N·d,) or (N, d), flat in the analysis dtype, and its shape as given."""
    if v.shape not in ((facts.dim,), (facts.n, facts.d)):
        raise ValueError(f"v must have shape ({facts.dim},) or ({facts.n}, {facts.d}); got {tuple(v.shape)}")
    return v.reshape(-1).to(facts.z.dtype), tuple(v.shape)


def _flat_head(facts: AnalysisFacts) -> Callable[[Tensor], Tensor]:
    return lambda zf: facts.head.fn(zf.reshape(facts.n, facts.d))


def interaction_matvec(facts: AnalysisFacts, v: Tensor) -> Tensor:
    """M v, with M = Σ_i ρ_i ∇²_z h_i (ρ held constant)."""
    flat, shape = as_flat(facts, v)
    return facts.contracted_hvp(flat).reshape(shape)


def gauss_newton_matvec(facts: AnalysisFacts, v: Tensor) -> Tensor:
    """G v = Jᵀ ∇²_u L (J v) under the chosen reading."""
    flat, shape = as_flat(facts, v)
    h, x = _flat_head(facts), facts.z.reshape(-1)
    jv = jvp_or_double_vjp(h, x, flat)
    hjv = facts.loss_hvp()(jv)
    return vjp(h, x)[1](hjv)[0].reshape(shape)


def matvec(facts: AnalysisFacts, v: Tensor) -> Tensor:
    """H_eff v for v of shape (N·d,) or (N, d)."""
    if facts.reading == "ambient":
        flat, shape = as_flat(facts, v)
        return facts.full_hvp(flat).reshape(shape)
    return gauss_newton_matvec(facts, v) + interaction_matvec(facts, v)


def _dense_hessian(facts: AnalysisFacts, f: Callable[[Tensor], Tensor]) -> Tensor:
    """Dense Hessian of a scalar function of flat z: forward-over-reverse, else reverse-over-reverse."""
    x = facts.z.reshape(-1)
    try:
        return hessian(f)(x)
    except (NotImplementedError, RuntimeError):
        return jacrev(jacrev(f))(x)


def gauss_newton_dense(facts: AnalysisFacts) -> Tensor:
    """(N·d, N·d) G = Jᵀ ∇²_u L J under the chosen reading."""
    h = lambda zf: facts.head.fn(zf.reshape(facts.n, facts.d)).reshape(-1)  # noqa: E731
    x = facts.z.reshape(-1)
    try:
        jac = jacfwd(h)(x)
    except (NotImplementedError, RuntimeError):
        jac = jacrev(h)(x)
    cols = jac.T.reshape(facts.dim, facts.n, facts.k)  # column c of J as an (N, k) tangent
    hj = vmap(facts.loss_hvp(), chunk_size=max(1, 4 * facts.settings.chunk_size))(cols).reshape(facts.dim, -1)
    return jac.T @ hj.T


def interaction_dense(facts: AnalysisFacts) -> Tensor:
    """(N·d, N·d) M = Σ_i ρ_i ∇²_z h_i, from the head's second derivatives."""
    return _dense_hessian(facts, lambda zf: (facts.rho * facts.head.fn(zf.reshape(facts.n, facts.d))).sum())


def dense(facts: AnalysisFacts) -> Tensor:
    """(N·d, N·d) H_eff: the Hessian of L(h(z)) in the ambient reading, else G + M."""
    if facts.reading == "ambient":
        return _dense_hessian(facts, lambda zf: facts.loss(facts.head.fn(zf.reshape(facts.n, facts.d))))
    return gauss_newton_dense(facts) + interaction_dense(facts)

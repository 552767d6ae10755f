"""Local subspace whitening (Thm 3.1 of the paper; docs/paper.md §2, claim C1): pure functions.

At a fixed point u0 let A = ∇²_{u_i} L (k × k) be one sample's loss-Hessian block and
A₊ = U_r Λ_r U_rᵀ its positive part (eigenvalues above ``floor = rel_tol · max|λ|``). For a
subspace S ⊂ R^d with orthonormal basis B (d × r), r = rank A₊ ≤ min(k, d), the linear head

    W = U_r Λ_r^{-1/2} Bᵀ                                   (k × d)

has M = 0 (∇²h = 0) and H_eff = Wᵀ A W = B Bᵀ, so vᵀ H_eff v = ‖v‖² on S and H_eff = 0 on S⊥.

Measured here:
- isotropy error  ε_S = max_{v ∈ S, ‖v‖=1} |vᵀHv − 1| = ‖BᵀHB − I_r‖₂ (BᵀHB − I is symmetric);
- leakage         ‖H B_⊥‖₂ = ‖H P_⊥‖₂, B_⊥ an orthonormal basis of S⊥, P_⊥ = I − BBᵀ.

Where A is indefinite the construction whitens only A₊; using all non-zero eigenvalues with
|Λ| (``part="nonzero"``) gives BᵀHB = diag(±1): vᵀHv = −‖v‖² on the directions of S mapped
into A's negative eigenspace. No W does better: by Sylvester's law of inertia BᵀWᵀAWB has at
most n₊(A) positive eigenvalues, so for dim S > n₊(A) some unit v ∈ S has vᵀHv ≤ 0 and
ε_S ≥ 1 (:func:`inertia_lower_bound`; :func:`best_fit_isotropy` searches for a W numerically).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from scipy.optimize import minimize
from torch import Tensor
from torch.func import vmap

from headgeom.geometry.engine.readings import loss_hvp
from headgeom.rng import own_generator

PARTS = ("positive", "nonzero")


def sample_loss_block(loss: Callable[[Tensor], Tensor], u: Tensor, i: int, reading: str = "ambient") -> Tensor:
    """[∇²_u L]_ii (k, k): the block of sample i of the loss Hessian at u (N, k) under ``reading``.

    One loss HVP per unit tangent e_{i,c} (vmapped); column c of the result is A e_c.
    """
    if u.ndim != 2:
        raise ValueError(f"u must be a batch of head outputs (N, k); got shape {tuple(u.shape)}")
    n, k = u.shape
    if not 0 <= i < n:
        raise ValueError(f"sample index i={i} is outside the batch of N={n} rows")
    tangents = torch.zeros(k, n, k, dtype=u.dtype, device=u.device)
    tangents[:, i, :] = torch.eye(k, dtype=u.dtype, device=u.device)
    cols = vmap(loss_hvp(loss, u, reading))(tangents)  # (k, N, k): cols[c] = ∇²L e_{i,c}
    return cols[:, i, :].T.contiguous()


@dataclass(frozen=True)
class EigenSplit:
    """Eigen-decomposition of a symmetric A (k, k) split by sign against a relative floor.

    eigenvalues (k,) ascending and eigenvectors (k, k) (columns) in float64;
    floor = rel_tol · max|λ|: λ > floor is positive, λ < −floor negative, else zero.
    """

    eigenvalues: Tensor
    eigenvectors: Tensor
    rel_tol: float
    floor: float

    @property
    def n_positive(self) -> int:
        return int((self.eigenvalues > self.floor).sum())

    @property
    def n_negative(self) -> int:
        return int((self.eigenvalues < -self.floor).sum())

    @property
    def n_zero(self) -> int:
        return self.eigenvalues.numel() - self.n_positive - self.n_negative

    @property
    def rank(self) -> int:
        """rank A: eigenvalues with |λ| > floor, of either sign."""
        return self.n_positive + self.n_negative

    def part(self, which: str = "positive") -> tuple[Tensor, Tensor]:
        """(U (k, r), λ (r,)) of the positive part, or of every non-zero eigenvalue (signed λ)."""
        if which not in PARTS:
            raise ValueError(f"part must be one of {PARTS}; got {which!r}")
        lam = self.eigenvalues
        keep = lam > self.floor if which == "positive" else lam.abs() > self.floor
        return self.eigenvectors[:, keep], lam[keep]

    def condition_positive(self) -> float | None:
        """λ_max / λ_min over the positive part (None if A₊ = 0): round-off of W scales with it."""
        _, lam = self.part("positive")
        return float(lam.max() / lam.min()) if lam.numel() else None


def split_eigen(a: Tensor, rel_tol: float = 1e-10, sym_tol: float = 1e-8) -> EigenSplit:
    """Exact eigh of a symmetric (k, k) matrix in float64, with the sign floor rel_tol · max|λ|.

    Raises if A is not symmetric to ``sym_tol`` relative to max|A| (a loss Hessian always is;
    asymmetry means the block was assembled wrongly).
    """
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be a square (k, k) matrix; got shape {tuple(a.shape)}")
    if not rel_tol > 0:
        raise ValueError(f"rel_tol must be > 0 (e.g. 1e-10); got {rel_tol}")
    a = a.detach().to(torch.float64)
    if not torch.isfinite(a).all():
        raise ValueError("A has non-finite entries; the loss Hessian is undefined at this point")
    scale = float(a.abs().max())
    asym = float((a - a.T).abs().max())
    if asym > sym_tol * max(scale, 1e-300):
        raise ValueError(f"A is not symmetric: max|A − Aᵀ| = {asym:.3e} against max|A| = {scale:.3e}")
    lam, vec = torch.linalg.eigh(0.5 * (a + a.T))
    floor = rel_tol * float(lam.abs().max()) if lam.numel() else 0.0
    return EigenSplit(lam, vec, rel_tol, floor)


def random_subspace(d: int, r: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """A uniformly random r-dim subspace of R^d: (B (d, r), B_⊥ (d, d − r)), together orthonormal, drawn
    from ``generator`` (None: a fresh one seeded with 0; never torch's global generator)."""
    if not 0 <= r <= d:
        raise ValueError(f"a subspace of R^{d} has dimension 0..{d}; got r={r}")
    g = torch.randn(d, d, generator=own_generator(generator), dtype=torch.float64)
    q, _ = torch.linalg.qr(g)
    return q[:, :r].contiguous(), q[:, r:].contiguous()


def whitening_head(split: EigenSplit, basis: Tensor, part: str = "positive") -> Tensor:
    """W = U_r |Λ_r|^{-1/2} Bᵀ (k, d) for basis B (d, r) of S; dim S must equal r of ``part``."""
    u, lam = split.part(part)
    r = lam.numel()
    if basis.ndim != 2 or basis.shape[1] != r:
        raise ValueError(
            f"dim S must equal r = {r} (the number of {part} eigenvalues of A above the floor "
            f"{split.floor:.3e}); the basis has shape {tuple(basis.shape)}. For dim S > r no W "
            "makes H_eff isotropic on S (see inertia_lower_bound)"
        )
    if r > basis.shape[0]:
        raise ValueError(f"r = {r} exceeds d = {basis.shape[0]}: S cannot have dimension r")
    return (u * lam.abs().rsqrt()) @ basis.to(u.dtype).T


def linear_effective_hessian(w: Tensor, a: Tensor) -> Tensor:
    """H_eff = Wᵀ A W (d, d) of the linear head u = W z (M = 0) for loss-Hessian block A (k, k)."""
    if w.ndim != 2 or a.shape != (w.shape[0], w.shape[0]):
        raise ValueError(f"need W (k, d) and A (k, k); got W {tuple(w.shape)} and A {tuple(a.shape)}")
    return w.T @ a.to(w.dtype) @ w


def restricted(h: Tensor, basis: Tensor) -> Tensor:
    """BᵀHB (r, r), symmetrised: the quadratic form of H on S in the basis B."""
    m = basis.T @ h @ basis
    return 0.5 * (m + m.T)


def isotropy_error(h: Tensor, basis: Tensor) -> float:
    """max over unit v ∈ S of |vᵀHv − ‖v‖²| = ‖BᵀHB − I‖₂ (0.0 for an empty S)."""
    if basis.shape[1] == 0:
        return 0.0
    m = restricted(h, basis) - torch.eye(basis.shape[1], dtype=h.dtype, device=h.device)
    return float(torch.linalg.eigvalsh(m).abs().max())


def leakage(h: Tensor, basis_perp: Tensor) -> float:
    """‖H B_⊥‖₂: the largest gain of H on S⊥ (0.0 when S = R^d)."""
    if basis_perp.shape[1] == 0:
        return 0.0
    return float(torch.linalg.matrix_norm(h @ basis_perp, ord=2))


def inertia_lower_bound(n_positive: int, dim_s: int) -> float:
    """Lower bound on ε_S over every W: 1 if dim S > n₊(A) (Sylvester's inertia), else 0."""
    return 1.0 if dim_s > n_positive else 0.0


def best_fit_isotropy(a: Tensor, dim_s: int, restarts: int = 2, seed: int = 0, maxiter: int = 200,
                      rel_tol: float = 1e-10) -> float:
    """Smallest ε_S found over W for a dim_s-dim S: minimise ‖VᵀAV − I‖_F² over V = W B (k, s).

    ε_S depends on W only through V = W B, so S can be the first s coordinates; and VᵀAV only
    on V's part in the non-zero eigenspace, so V = U |Λ|^{-1/2} X (X (rank A, s)) is an exact,
    well-conditioned parametrisation: VᵀAV = Xᵀ diag(sign λ) X. L-BFGS from ``restarts`` random
    X; returns the best spectral error ‖XᵀDX − I‖₂ reached (1.0 for A = 0). A numerical search,
    the complement of :func:`inertia_lower_bound`.
    """
    if dim_s < 1 or restarts < 1:
        raise ValueError(f"need dim_s >= 1 and restarts >= 1; got {dim_s}, {restarts}")
    split = split_eigen(a, rel_tol)
    _, lam = split.part("nonzero")
    if lam.numel() == 0:
        return 1.0  # VᵀAV = 0 for every V
    sign = np.sign(lam.cpu().numpy())
    m = sign.size
    eye = np.eye(dim_s)
    rng = np.random.default_rng(seed)

    def error(x: np.ndarray) -> np.ndarray:
        x = x.reshape(m, dim_s)
        return x.T @ (sign[:, None] * x) - eye

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        e = error(x)
        grad = 4.0 * (sign[:, None] * x.reshape(m, dim_s)) @ e
        return float((e * e).sum()), grad.ravel()

    best = np.inf
    for _ in range(restarts):
        x0 = rng.standard_normal(m * dim_s) / math.sqrt(m)
        res = minimize(objective, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": maxiter, "ftol": 1e-14, "gtol": 1e-10})
        e = error(res.x)
        best = min(best, float(np.abs(np.linalg.eigvalsh(0.5 * (e + e.T))).max()))
    return best

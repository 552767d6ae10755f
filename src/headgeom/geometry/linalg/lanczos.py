"""Lanczos at both ends of the spectrum of a symmetric operator.

Replaces the authors' power iteration on (H − λ_max I), which returns the wrong end when
the largest-magnitude eigenvalue is negative (docs/paper.md §4 pitfall 1): the Krylov space
gives the lowest and the highest Ritz values at once. Full reorthogonalisation (classical
Gram-Schmidt, twice) keeps the basis orthonormal to working precision, so there are no
spurious copies of converged Ritz values; no restarts, so memory is (max_iter + 1) · n
entries of the operator's dtype (float64 by default, pitfall 2), on the operator's device.

Stopping rules (Golub & Van Loan §10.1; Parlett, "The Symmetric Eigenvalue Problem" §13):
the residual of Ritz pair (θ_j, Q s_j) is ‖A Q s_j − θ_j Q s_j‖ = |β_m s_{m,j}|; it stops when
the k lowest and/or k highest satisfy |β_m s_{m,j}| ≤ tol · max|θ|, when β_m ≈ 0 (the Krylov
space is invariant: its Ritz values are exact eigenvalues), or when m = n (exact).

Limitation (any single-vector Krylov method): an eigenvalue of multiplicity > 1 appears once
among the Ritz values until m = n, so `lowest`/`highest` are the k extreme *distinct*
eigenvalues of a spectrum with exact repeats; λ_min and λ_max are unaffected.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.linalg import eigh_tridiagonal
from torch import Tensor

from headgeom.geometry.linalg.operators import as_operator

__all__ = ["LanczosResult", "LanczosNotConvergedWarning", "lanczos_extremes"]

_WHICH = ("both", "lowest", "highest")


class LanczosNotConvergedWarning(RuntimeWarning):
    """Lanczos hit max_iter before the requested Ritz values met the residual tolerance."""


@dataclass(frozen=True)
class LanczosResult:
    """Extreme Ritz values of a symmetric operator.

    lowest / highest: (≤k,) ascending, on the operator's device and dtype (None if not
        requested). They overlap when the Krylov dimension m < 2k.
    lowest_residuals / highest_residuals: matching residual bounds |β_m s_{m,j}|; every
        interval [θ − r, θ + r] contains an eigenvalue of the operator.
    ritz_values / ritz_residuals: all m Ritz values (ascending) and their bounds.
    iterations: m, the Krylov dimension reached (= number of matvecs).
    converged: requested ends met tol (always True when exact).
    exact: the Krylov space became invariant (β ≈ 0) or spans the whole space. With a random
        start vector every distinct eigenvalue is then a Ritz value (almost surely);
        multiplicities are resolved only when m = n.
    lowest_vectors / highest_vectors: (n, ≤k) Ritz vectors if requested, else None.
    """

    lowest: Tensor | None
    highest: Tensor | None
    lowest_residuals: Tensor | None
    highest_residuals: Tensor | None
    ritz_values: Tensor
    ritz_residuals: Tensor
    iterations: int
    converged: bool
    exact: bool
    n: int
    tol: float
    which: str
    lowest_vectors: Tensor | None = None
    highest_vectors: Tensor | None = None

    @property
    def lambda_min(self) -> float | None:
        return None if self.lowest is None else float(self.lowest[0])

    @property
    def lambda_max(self) -> float | None:
        return None if self.highest is None else float(self.highest[-1])

    def extremes(self) -> Tensor:
        """The union of the requested lowest and highest Ritz values, ascending, no overlap."""
        m = self.iterations
        k_lo = 0 if self.lowest is None else self.lowest.numel()
        k_hi = 0 if self.highest is None else self.highest.numel()
        idx = sorted(set(range(k_lo)) | set(range(m - k_hi, m)))
        return self.ritz_values[idx]


def _check_args(k: Any, tol: Any, max_iter: Any, which: Any, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int (Ritz values per end), got {k!r}.")
    if not isinstance(tol, (int, float)) or not tol > 0:
        raise ValueError(f"tol must be a positive float (relative residual bound), got {tol!r}.")
    if which not in _WHICH:
        raise ValueError(f"which must be one of {_WHICH}, got {which!r}.")
    if max_iter is None:
        return min(n, 600)
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive int or None (= min(n, 600)), got {max_iter!r}.")
    return min(int(max_iter), n)


def _ritz(alphas: list[float], betas: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of the m×m tridiagonal T_m (float64 on cpu; O(m²))."""
    d = np.asarray(alphas, dtype=np.float64)
    if d.size == 1:
        return d.copy(), np.ones((1, 1))
    return eigh_tridiagonal(d, np.asarray(betas[: d.size - 1], dtype=np.float64))


@torch.no_grad()
def lanczos_extremes(
    op: Any,
    k: int = 6,
    tol: float = 1e-10,
    max_iter: int | None = None,
    seed: int = 0,
    which: str = "both",
    return_vectors: bool = False,
) -> LanczosResult:
    """The k lowest and/or k highest eigenvalues of a symmetric operator by Lanczos.

    Args:
        op: SymmetricOperator, or any object with `.matvec(v)` and square `.shape` (n, n).
        k: Ritz values wanted at each requested end.
        tol: stop when every wanted Ritz pair has |β_m s_{m,j}| ≤ tol · max|θ|.
        max_iter: Krylov dimension cap, default min(n, 600); reaching it without
            convergence warns (LanczosNotConvergedWarning) and sets converged=False.
        seed: seeds the Gaussian start vector (drawn on cpu in float64, so the result does
            not depend on the device).
        which: "both", "lowest" or "highest".
        return_vectors: also return the (n, k) Ritz vectors.
    """
    op = as_operator(op)
    n, dtype, device = op.n, op.dtype, op.device
    m_max = _check_args(k, tol, max_iter, which, n)
    k = int(k)
    want_lo, want_hi = which in ("both", "lowest"), which in ("both", "highest")
    # β ≈ 0 relative to ‖A‖: a few ulps of the working precision.
    breakdown = 100.0 * torch.finfo(dtype).eps

    gen = torch.Generator().manual_seed(int(seed))
    q = torch.randn(n, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)
    Q = torch.empty(m_max + 1, n, dtype=dtype, device=device)  # rows: orthonormal basis
    Q[0] = q / torch.linalg.vector_norm(q)
    alphas: list[float] = []
    betas: list[float] = []
    anorm = 0.0
    exact = converged = False
    theta = S = None
    resid = np.zeros(0)

    for j in range(m_max):
        w = op.matvec(Q[j])
        if not bool(torch.isfinite(w).all()):
            raise ValueError(
                f"the operator's matvec returned non-finite values at Lanczos step {j}; "
                "check the operator (e.g. a NaN in the model or the loss)."
            )
        anorm = max(anorm, float(torch.linalg.vector_norm(w)))
        alpha = float(torch.dot(Q[j], w))
        w = w - alpha * Q[j]
        if j > 0:
            w = w - betas[-1] * Q[j - 1]
        basis = Q[: j + 1]
        for _ in range(2):  # classical Gram-Schmidt twice ("twice is enough", Parlett)
            w = w - basis.T @ (basis @ w)
        beta = float(torch.linalg.vector_norm(w))
        alphas.append(alpha)
        betas.append(beta)
        m = j + 1

        invariant = beta <= breakdown * max(anorm, torch.finfo(dtype).tiny)
        full = m == n
        # Checking is O(m²) (tridiagonal eigensolver) against an O(n·m) step; check every
        # step while small, then every 5th to keep the checks a small share.
        check = invariant or full or m == m_max or (m >= min(k, n) and (m <= 50 or m % 5 == 0))
        if check:
            theta, S = _ritz(alphas, betas)
            resid = np.abs(beta * S[-1, :])
            if invariant or full:
                exact = converged = True
                break
            scale = float(np.abs(theta).max())
            kk = min(k, m)
            ok_lo = not want_lo or bool((resid[:kk] <= tol * scale).all())
            ok_hi = not want_hi or bool((resid[m - kk :] <= tol * scale).all())
            if ok_lo and ok_hi:
                converged = True
                break
        Q[m] = w / beta

    assert theta is not None and S is not None
    m = len(alphas)
    kk = min(k, m)
    to_t = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float64).to(dtype=dtype, device=device)  # noqa: E731
    ritz, rres = to_t(theta), to_t(resid)
    lo_idx, hi_idx = list(range(kk)), list(range(m - kk, m))

    vecs: dict[str, Tensor | None] = {"lo": None, "hi": None}
    if return_vectors:
        S_t = to_t(S)
        if want_lo:
            vecs["lo"] = Q[:m].T @ S_t[:, lo_idx]
        if want_hi:
            vecs["hi"] = Q[:m].T @ S_t[:, hi_idx]

    if not converged:
        parts = []
        if want_lo:
            parts.append(f"lowest {theta[:kk].tolist()} with residuals {resid[:kk].tolist()}")
        if want_hi:
            parts.append(f"highest {theta[m - kk:].tolist()} with residuals {resid[m - kk:].tolist()}")
        warnings.warn(
            f"Lanczos did not converge in max_iter={m_max} steps (n={n}, tol={tol:g} · max|θ| = "
            f"{tol * float(np.abs(theta).max()):.3e}): " + "; ".join(parts)
            + ". Raise max_iter, loosen tol, or use exact eigh on small or block-diagonal problems.",
            LanczosNotConvergedWarning,
            stacklevel=2,
        )

    return LanczosResult(
        lowest=ritz[lo_idx] if want_lo else None,
        highest=ritz[hi_idx] if want_hi else None,
        lowest_residuals=rres[lo_idx] if want_lo else None,
        highest_residuals=rres[hi_idx] if want_hi else None,
        ritz_values=ritz,
        ritz_residuals=rres,
        iterations=m,
        converged=converged,
        exact=exact,
        n=n,
        tol=float(tol),
        which=which,
        lowest_vectors=vecs["lo"],
        highest_vectors=vecs["hi"],
    )

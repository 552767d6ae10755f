"""Symmetric linear operators: the matrix-free form of curvature objects (H_eff, G, M).

Follows the curvlinops interface (f-dangel/curvlinops): an operator is a matvec closure
with a shape, a dtype and a device; `matmat` batches it; `to_scipy()` exports it to
`scipy.sparse.linalg`; `dense()` materialises it for tests and small problems (house rule 3, docs/design.md#house-rules).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from scipy.sparse.linalg import LinearOperator
from torch import Tensor

MatVec = Callable[[Tensor], Tensor]

__all__ = ["SymmetricOperator", "as_operator", "check_symmetric"]


CHECK_ELEMENTS = 1 << 21  # entries of the temporaries check_symmetric forms at once (16 MiB in float64)


def check_symmetric(A: Tensor, name: str = "A", rtol: float | None = None, scale: float | None = None) -> None:
    """Raise ValueError if the square (n, n) or batched (N, d, d) `A` is not symmetric.

    Tolerance: max|A − Aᵀ| ≤ rtol · max(max|A|, scale) per matrix, with rtol = max(1e-8, 10 ·
    eps(dtype)) by default (1e-8 for float64; float32 roundoff alone exceeds 1e-8). ``scale``: the
    size of the operands A was summed from, when A is small by cancellation (the pullback metric
    under the tangential reading, :mod:`headgeom.geometry.engine.operand_scale`): its round-off asymmetry is
    of order eps · scale, not eps · max|A|.
    """
    if rtol is None:
        rtol = max(1e-8, 10.0 * torch.finfo(A.dtype).eps)
    blocks = A if A.ndim == 3 else A[None]
    step = max(1, CHECK_ELEMENTS // max(1, blocks[0].numel()))  # a few blocks at a time: bounded temporaries
    asym = torch.cat([torch.sub(b, b.transpose(-1, -2)).abs_().amax(dim=(-1, -2))
                      for b in blocks.split(step)]).reshape(A.shape[:-2])
    size = torch.cat([b.abs().amax(dim=(-1, -2)) for b in blocks.split(step)]).reshape(A.shape[:-2])
    ref = size if scale is None else size.clamp_min(scale)
    bad = asym > rtol * ref
    if bool(bad.any()):
        rel = (asym / ref.clamp_min(torch.finfo(A.dtype).tiny)).max().item()
        where = ""
        if A.ndim == 3:
            idx = torch.nonzero(bad).flatten().tolist()
            where = f" in blocks {idx[:10]}{' ...' if len(idx) > 10 else ''} ({len(idx)} of {A.shape[0]})"
        raise ValueError(
            f"{name} is not symmetric{where}: max|A - A^T| / {'max|A|' if scale is None else 'max(max|A|, scale)'}"
            f" = {rel:.3e} > {rtol:.1e}. "
            "Pass a symmetric matrix (e.g. a Hessian), or symmetrise it yourself if the "
            "asymmetry is expected."
        )


class SymmetricOperator:
    """A symmetric n×n linear operator given by a torch matvec closure.

    Args:
        matvec: v (n,) -> A v (n,), in `dtype` on `device`.
        n: dimension.
        dtype, device: of the vectors the closure takes and returns (float64 by default:
            docs/paper.md §4 pitfall 2).
        matmat: optional V (n, m) -> A V (n, m); without it columns are stacked matvecs.

    Symmetry is the caller's promise (it is what Lanczos needs); `from_dense` checks it.
    """

    def __init__(
        self,
        matvec: MatVec,
        n: int,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str = "cpu",
        matmat: MatVec | None = None,
    ) -> None:
        if not callable(matvec):
            raise TypeError(f"matvec must be callable (v -> A v), got {type(matvec).__name__}.")
        if matmat is not None and not callable(matmat):
            raise TypeError(f"matmat must be callable (V -> A V) or None, got {type(matmat).__name__}.")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n must be a positive int (the operator's dimension), got {n!r}.")
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}.")
        self._matvec = matvec
        self._matmat = matmat
        self.n = int(n)
        self.dtype = dtype
        self.device = torch.device(device)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def __repr__(self) -> str:
        return f"SymmetricOperator(n={self.n}, dtype={self.dtype}, device={self.device})"

    def _check_input(self, v: Tensor, ndim: int, what: str) -> None:
        if not isinstance(v, Tensor):
            raise TypeError(f"{what} expects a torch.Tensor, got {type(v).__name__}.")
        if v.ndim != ndim or v.shape[0] != self.n:
            want = f"({self.n},)" if ndim == 1 else f"({self.n}, m)"
            raise ValueError(f"{what} expects shape {want}, got {tuple(v.shape)}.")

    def matvec(self, v: Tensor) -> Tensor:
        """A v for v of shape (n,); returns (n,)."""
        self._check_input(v, 1, "matvec")
        out = self._matvec(v.to(dtype=self.dtype, device=self.device))
        if not isinstance(out, Tensor) or tuple(out.shape) != (self.n,):
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"the matvec closure must return shape ({self.n},), returned {got}.")
        return out

    def matmat(self, V: Tensor) -> Tensor:
        """A V for V of shape (n, m); returns (n, m)."""
        self._check_input(V, 2, "matmat")
        V = V.to(dtype=self.dtype, device=self.device)
        if self._matmat is not None:
            out = self._matmat(V)
        elif V.shape[1] == 0:
            out = V.clone()
        else:
            out = torch.stack([self.matvec(V[:, j]) for j in range(V.shape[1])], dim=1)
        if not isinstance(out, Tensor) or tuple(out.shape) != tuple(V.shape):
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"the matmat closure must return shape {tuple(V.shape)}, returned {got}.")
        return out

    def __matmul__(self, x: Tensor) -> Tensor:
        if isinstance(x, Tensor) and x.ndim == 1:
            return self.matvec(x)
        if isinstance(x, Tensor) and x.ndim == 2:
            return self.matmat(x)
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"operator @ x needs x of shape ({self.n},) or ({self.n}, m), got {shape}.")

    def dense(self) -> Tensor:
        """Materialise A as an (n, n) tensor via matmat on the identity (tests, small n only)."""
        return self.matmat(torch.eye(self.n, dtype=self.dtype, device=self.device))

    def to_scipy(self) -> LinearOperator:
        """Export as a `scipy.sparse.linalg.LinearOperator` (float64 numpy in and out).

        rmatvec = matvec since the operator is symmetric, so `eigsh`, `lobpcg`, `cg` all apply.
        """

        def mv(x: np.ndarray) -> np.ndarray:
            t = torch.as_tensor(np.asarray(x, dtype=np.float64).reshape(self.n))
            return self.matvec(t).detach().to("cpu", torch.float64).numpy()

        def mm(X: np.ndarray) -> np.ndarray:
            t = torch.as_tensor(np.asarray(X, dtype=np.float64))
            return self.matmat(t).detach().to("cpu", torch.float64).numpy()

        return LinearOperator(
            shape=self.shape, matvec=mv, rmatvec=mv, matmat=mm, rmatmat=mm, dtype=np.float64
        )

    @classmethod
    def from_dense(cls, A: Tensor) -> "SymmetricOperator":
        """Wrap a dense symmetric (n, n) tensor; checks shape, finiteness and symmetry."""
        if not isinstance(A, Tensor):
            raise TypeError(f"from_dense expects a torch.Tensor, got {type(A).__name__}.")
        if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
            raise ValueError(f"from_dense expects a non-empty square (n, n) tensor, got {tuple(A.shape)}.")
        if not A.dtype.is_floating_point:
            raise TypeError(f"from_dense expects a floating tensor, got {A.dtype}.")
        n_bad = int((~torch.isfinite(A)).sum())
        if n_bad:
            raise ValueError(f"from_dense: A has {n_bad} non-finite entries (NaN or inf).")
        check_symmetric(A, "from_dense: A")
        return cls(lambda v: A @ v, A.shape[0], A.dtype, A.device, matmat=lambda V: A @ V)


def as_operator(obj: Any) -> SymmetricOperator:
    """A SymmetricOperator as is; any object with `matvec` and a square `shape` wrapped.

    dtype/device are read from the object when present (float64 / cpu otherwise).
    """
    if isinstance(obj, SymmetricOperator):
        return obj
    if isinstance(obj, Tensor):
        raise TypeError("as_operator got a tensor; use SymmetricOperator.from_dense(A) for dense matrices.")
    if isinstance(obj, LinearOperator):  # numpy in/out: convert at the boundary, float64 on cpu
        n = int(obj.shape[0])
        if obj.shape != (n, n):
            raise ValueError(f"a symmetric operator must be square, got shape {obj.shape}.")

        def np_mv(v: Tensor) -> Tensor:
            out = obj.matvec(v.detach().cpu().numpy())
            return torch.as_tensor(np.asarray(out, dtype=np.float64)).reshape(n)

        return SymmetricOperator(np_mv, n, torch.float64, "cpu")
    if not callable(getattr(obj, "matvec", None)) or not hasattr(obj, "shape"):
        raise TypeError(
            f"expected a SymmetricOperator or an object with .matvec and .shape, got {type(obj).__name__}."
        )
    shape = tuple(obj.shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"a symmetric operator must be square, got shape {shape}.")
    dtype = getattr(obj, "dtype", torch.float64)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"operator dtype must be a torch.dtype, got {dtype!r}.")
    device = getattr(obj, "device", "cpu")
    if not isinstance(device, (torch.device, str)):
        device = "cpu"
    matmat = getattr(obj, "matmat", None)
    return SymmetricOperator(obj.matvec, int(shape[0]), dtype, device, matmat=matmat if callable(matmat) else None)

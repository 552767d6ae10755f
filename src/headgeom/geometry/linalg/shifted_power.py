"""The paper's λ_min estimator: float32 shifted power iteration with a fixed iteration count.

The authors estimate λ_min of the Hessian of the SimSiam batch loss w.r.t. z1 (docs/paper.md §3,
Hessian tracking) in two power iterations on Hessian-vector products, in the model's float32:

1. from a random unit vector, ``iterations`` steps of v ← Hv / (‖Hv‖ + ε); the shift
   μ = vᵀHv is the Rayleigh quotient of the result, an estimate of the *dominant* eigenvalue
   (largest |λ|, of either sign);
2. from a fresh random unit vector, ``iterations`` steps of v ← (H − μI)v / (‖(H − μI)v‖ + ε);
   the estimate is vᵀHv (the Rayleigh quotient on H, not on the shifted matrix).

No convergence test. Step 2 converges to the eigenvector of λ_min only when μ ≈ λ_max > 0
(so λ_min − μ is the dominant eigenvalue of H − μI), and only as fast as the ratio
max_{λ ≠ λ_min} |λ − μ| / |λ_min − μ| allows: a close gap at the bottom of the spectrum leaves
a mixture of the lowest eigenvectors after a fixed number of steps, whose Rayleigh quotient lies
above λ_min. When the most negative eigenvalue dominates (|λ_min| > λ_max), μ ≈ λ_min and step 2
converges to λ_max instead: the sign of the estimate can be wrong. And the normalisation by
‖·‖ + ε (ε = 1e-8) shrinks v by ‖H‖/ε per step when ‖H‖ ≪ ε, so a Hessian at that scale (a
collapsed head's, ~1e-11) reads λ_min = 0 whatever its spectrum.

headgeom computes λ_min exactly (per-sample blocks, float64 eigh); this estimator exists to put the
paper's number beside the exact one (C8) and count where they disagree. Written from the
description above; it shares no code with the authors' scripts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

__all__ = ["ShiftedPowerEstimate", "shifted_power_lambda_min"]


@dataclass(frozen=True)
class ShiftedPowerEstimate:
    """lambda_min: the estimate vᵀHv after step 2; shift: μ, the step-1 Rayleigh quotient (the
    dominant eigenvalue's estimate); iterations per step; dtype of the iteration."""

    lambda_min: float
    shift: float
    iterations: int
    dtype: str


def _unit(v: Tensor, eps: float) -> Tensor:
    return v / (v.norm() + eps)


def shifted_power_lambda_min(matvec: Callable[[Tensor], Tensor], shape: tuple[int, ...], *,
                             iterations: int = 20, dtype: torch.dtype = torch.float32, eps: float = 1e-8,
                             seed: int = 0, device: torch.device | str | None = None) -> ShiftedPowerEstimate:
    """Estimate λ_min of the symmetric operator ``matvec`` (acting on tensors of ``shape``) the way
    the paper's authors do (module docstring): two runs of ``iterations`` power steps, the second
    shifted by the first's Rayleigh quotient, in ``dtype`` (their float32), normalising by
    ‖·‖ + ``eps``. The random starts come from a generator seeded with ``seed`` (theirs used the
    global RNG); the vectors are drawn in float64 on the CPU and then cast, so the same seed gives the
    same starts on every device and dtype.
    """
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an integer >= 1 (the authors use 20); got {iterations!r}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype (the authors' is torch.float32); got {dtype}")
    gen = torch.Generator().manual_seed(seed)
    starts = [torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype=dtype, device=device)
              for _ in range(2)]

    def hv(v: Tensor) -> Tensor:
        return matvec(v).to(dtype)

    v = _unit(starts[0], eps)
    for _ in range(iterations):
        v = _unit(hv(v), eps)
    shift = (v * hv(v)).sum()
    w = _unit(starts[1], eps)
    for _ in range(iterations):
        w = _unit(hv(w) - shift * w, eps)
    estimate = (w * hv(w)).sum()
    return ShiftedPowerEstimate(float(estimate), float(shift), iterations, str(dtype).replace("torch.", ""))

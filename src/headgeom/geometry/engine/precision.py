"""The error of a reduced-precision (float32) analysis, measured against float64 on the same problem.

A float32 analysis of H_eff (docs/paper.md §1) is faster, and on a GPU much faster, but its
blocks carry rounding error that depends on the head and the loss (depth, widths, activations,
how close the loss is to a cancellation). Rather than quote a formula, the engine measures it:
the same head, loss and representation are set up in float64, and

- ``u``: ‖u₃₂ − u₆₄‖ / ‖u₆₄‖, the head output;
- ``Hv``: ‖H₃₂v − H₆₄v‖ / ‖H₆₄v‖ for a fixed random direction v (one matvec in each precision,
  through the same head and loss code as every other result);
- ``bound``: ``BOUND_FACTOR`` × the ``Hv`` error (at least the unit roundoff), the bound stated for the blocks' error
  ‖B₃₂ − B₆₄‖_F / ‖B₆₄‖_F over the batch. The factor is empirical, not a theorem: on MLP heads
  (ReLU, SiLU, GELU, Tanh; depths 2-3; widths 5-128) with cosine, MSE and VICReg losses the
  blocks' error was 0.8-1.8 × the Hv error and the worst single block's 1-3.6 ×;
  tests/geometry/test_precision.py checks it on such cases against a dense float64 reference.

The float64 set-up costs one more (cached) head copy and two matvecs, paid on the first
``info()`` of a non-float64 analysis only.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

BOUND_FACTOR = 10.0


def _rel(a: Tensor, b: Tensor) -> float:
    b = b.to(torch.float64)
    scale = float(b.norm())
    return float((a.to(torch.float64) - b).norm()) / (scale if scale > 0 else 1.0)


def measured_error(analysis: Any, reference: Callable[[], Any]) -> dict[str, Any]:
    """The error record of ``analysis`` (an EffectiveHessian in a reduced dtype) against
    ``reference()`` (the same problem in float64); ``{"measured": False, "why": ...}`` when the
    float64 problem cannot be set up (a callable head or loss that only runs in float32)."""
    record: dict[str, Any] = {
        "against": "float64, same head, loss and z",
        "unit_roundoff": torch.finfo(analysis.z.dtype).eps / 2,
        "bound_applies_to": "||B - B64||_F / ||B64||_F over all blocks (G, M and H_eff alike)",
        "bound_factor": BOUND_FACTOR,
    }
    try:
        ref = reference()
        gen = torch.Generator(device="cpu").manual_seed(0)
        v = torch.randn(ref.n, ref.d, generator=gen, dtype=torch.float64).to(ref.z.device)
        hv64 = ref.matvec(v)
        hv = analysis.matvec(v.to(analysis.z.dtype))
    except (RuntimeError, TypeError, ValueError) as err:
        return {**record, "measured": False, "why": f"the float64 reference failed: {err}"}
    u_err, hv_err = _rel(analysis.u, ref.u), _rel(hv, hv64)
    return {**record, "measured": True, "u": u_err, "Hv": hv_err, "bound": BOUND_FACTOR * max(hv_err, record["unit_roundoff"])}

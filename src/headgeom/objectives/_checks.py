"""Input checks shared by the objectives: shapes, batch sizes and positive scalars.

Every check looks only at shapes and Python scalars, never at tensor values, so the losses
stay usable inside ``torch.func.hessian`` / ``jvp`` / ``vmap``.
"""
from __future__ import annotations

import math

from torch import Tensor


def check_2d(name: str, x: object) -> Tensor:
    """Raise unless ``x`` is a 2-D floating-point tensor (N, D); return it."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (N, D); got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(
            f"{name} must be 2-D (N, D) with one row per sample; got shape {tuple(x.shape)}. "
            "Flatten extra dimensions first, e.g. x.flatten(1)."
        )
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor; got dtype {x.dtype}")
    return x


def check_pair(name_a: str, a: object, name_b: str, b: object) -> tuple[Tensor, Tensor]:
    """Raise unless ``a`` and ``b`` are 2-D tensors of the same shape."""
    a, b = check_2d(name_a, a), check_2d(name_b, b)
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape (N, D); got {name_a} "
            f"{tuple(a.shape)} and {name_b} {tuple(b.shape)}"
        )
    return a, b


def check_batch(loss: str, x: Tensor, minimum: int = 2) -> None:
    """Raise for losses built from batch statistics when N < ``minimum``."""
    n = x.shape[0]
    if n < minimum:
        raise ValueError(
            f"{loss} uses batch statistics and needs a batch of at least {minimum} samples; "
            f"got batch size {n} (input shape {tuple(x.shape)})"
        )


def check_positive(name: str, value: float) -> float:
    """Raise unless the Python scalar ``value`` is finite and > 0 (temperatures)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a Python float; got {type(value).__name__}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


def check_nonnegative(name: str, value: float) -> float:
    """Raise unless the Python scalar ``value`` is finite and >= 0 (eps, coefficients)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a Python float; got {type(value).__name__}")
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")
    return float(value)

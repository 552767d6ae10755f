"""Spectra of curvature objects (H_eff, G, M): dense, block-diagonal, or matrix-free.

    spectrum(H)                        # (n, n): exact eigh
    spectrum(blocks)                   # (N, d, d): batched eigh, per-sample summaries
    spectrum(op)                       # SymmetricOperator: Lanczos at both ends
    spectrum(H, decomposition={"G": G, "M": M})   # adds ‖part‖ / ‖H‖ ratios

Conventions (docs/paper.md §4):
- Dense and block spectra are computed in float64 (pitfall 2), whatever the input dtype.
- floor = rel_floor · max|λ|, or rel_floor · max(max|λ|, S) when the caller passes the scale S of
  the operands the matrix was summed from (``scale=``; for G and H_eff the engine's
  ``operand_scale()``, :mod:`headgeom.geometry.engine.operand_scale`): a result that is tiny because large
  terms cancelled carries round-off of order eps · S, not eps · max|λ|. An eigenvalue counts as
  negative only if λ < −floor, as zero if |λ| ≤ floor. The default rel_floor = 1e-10 sits far above float64 roundoff of a symmetric
  eigensolver (~n · 1e-16 · max|λ|), so a −1e-16 eigenvalue beside order-1 ones is zero, and far
  below the −1e-6 curvature the paper tracks, so that one is negative (pitfall 2).
- The condition number is max|λ| / min|λ| over eigenvalues with |λ| > floor, never a clamped
  λ_min (pitfall 3); None when no eigenvalue exceeds the floor. Blocks share one floor, that
  of the whole block-diagonal matrix, so per-block counts add up to the totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from headgeom.io import json_safe
from headgeom.geometry.linalg.lanczos import LanczosResult, lanczos_extremes
from headgeom.geometry.linalg.operators import as_operator, check_symmetric

__all__ = ["Spectrum", "spectrum"]

_COND = "max|λ| / min|λ| over eigenvalues with |λ| > floor, floor = rel_floor · max(max|λ|, operand scale if given); None if no eigenvalue exceeds the floor"
_COND_OP = _COND + (
    "; for an operator known only at its ends it is defined only when the ends fix min|λ| "
    "(both extremes beyond the floor on the same side, or an exact Krylov space), else None"
)


@dataclass
class Spectrum:
    """The spectrum of a symmetric matrix, a batch of blocks, or an operator.

    eigenvalues: dense (n,) ascending; blocks (N, d) ascending per row; operator: the
        computed extreme Ritz values (≤2k,) ascending. float64.
    n_negative / n_zero / n_positive: counts against the floor; None for operators (the
        interior is unknown) unless the Krylov space spanned the whole space.
    per_block: blocks only: {"lambda_min", "lambda_max", "n_negative", "n_zero",
        "n_positive", "condition_number"} -> (N,) tensors (NaN where undefined).
    per_sample: blocks only: {name: {"min", "median", "max"}} of each per_block scalar over
        the N samples (NaN entries left out; "n_undefined" counts them).
    norm_ratios: {part: {"fro", "spectral"}} of ‖part‖ / ‖x‖ (None if ‖x‖ = 0 or not
        computable, e.g. Frobenius of an operator); blocks also carry "per_sample" summaries.
    """

    kind: str
    n: int
    eigenvalues: Tensor
    lambda_min: float
    lambda_max: float
    rel_floor: float
    floor: float
    floor_relative_to: str  # "result" (rel_floor · max|λ|) or "operands" (rel_floor · scale, the larger)
    operand_scale: float | None  # the scale passed, or None
    n_negative: int | None
    n_zero: int | None
    n_positive: int | None
    condition_number: float | None
    condition_definition: str
    method: dict[str, Any]
    n_blocks: int | None = None
    per_block: dict[str, Tensor] | None = None
    per_sample: dict[str, dict[str, float | int | None]] | None = None
    norm_ratios: dict[str, dict[str, Any]] | None = None
    lanczos: LanczosResult | None = field(default=None, repr=False)

    def summary(self) -> dict[str, Any]:
        """Headline scalars for a printed table (plain Python)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "n": self.n,
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "n_negative": self.n_negative,
            "n_zero": self.n_zero,
            "n_positive": self.n_positive,
            "condition_number": self.condition_number,
            "floor": self.floor,
            "floor_relative_to": self.floor_relative_to,
            "method": self.method["name"],
        }
        if self.kind == "operator":
            out["method"] = f"lanczos(m={self.method['iterations']}, converged={self.method['converged']})"
        if self.n_blocks is not None:
            out["n_blocks"] = self.n_blocks
        for part, r in (self.norm_ratios or {}).items():
            out[f"{part}_ratio_fro"] = r["fro"]
            out[f"{part}_ratio_spectral"] = r["spectral"]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-serialisable plain Python (tensors -> lists; NaN and ±inf as
        :func:`headgeom.io.json_safe` writes them: null and "inf"/"-inf")."""
        out = {
            "kind": self.kind,
            "n": self.n,
            "n_blocks": self.n_blocks,
            "eigenvalues": self.eigenvalues,
            "lambda_min": self.lambda_min,
            "lambda_max": self.lambda_max,
            "rel_floor": self.rel_floor,
            "floor": self.floor,
            "floor_relative_to": self.floor_relative_to,
            "operand_scale": self.operand_scale,
            "n_negative": self.n_negative,
            "n_zero": self.n_zero,
            "n_positive": self.n_positive,
            "condition_number": self.condition_number,
            "condition_definition": self.condition_definition,
            "method": self.method,
            "per_block": self.per_block,
            "per_sample": self.per_sample,
            "norm_ratios": self.norm_ratios,
        }
        return json_safe(out)


def _floor(rel_floor: float, result_scale: float, scale: float | None) -> dict[str, Any]:
    """floor = rel_floor · max(max|λ|, scale) and which of the two set it."""
    operands = scale is not None and scale > result_scale
    return {"floor": rel_floor * (scale if operands else result_scale),
            "floor_relative_to": "operands" if operands else "result", "operand_scale": scale}


def _counts(lam: Tensor, floor: float) -> tuple[Tensor, Tensor, Tensor]:
    """(neg, zero, pos) counts along the last axis."""
    return (lam < -floor).sum(-1), (lam.abs() <= floor).sum(-1), (lam > floor).sum(-1)


def _condition(lam: Tensor, floor: float) -> Tensor:
    """max|λ| / min|λ| over |λ| > floor along the last axis; NaN where none exceeds it."""
    a = lam.abs()
    above = a > floor
    big = torch.where(above, a, torch.zeros_like(a)).amax(-1)
    small = torch.where(above, a, torch.full_like(a, float("inf"))).amin(-1)
    return torch.where(above.any(-1), big / small, torch.full_like(big, float("nan")))


def _summary(v: Tensor) -> dict[str, float | int | None]:
    """min / median / max over samples of a (N,) tensor, NaN entries left out (numpy median)."""
    a = v.detach().cpu().double().numpy()
    ok = a[np.isfinite(a)]
    if ok.size == 0:
        return {"min": None, "median": None, "max": None, "n_undefined": int(a.size)}
    return {"min": float(ok.min()), "median": float(np.median(ok)), "max": float(ok.max()),
            "n_undefined": int(a.size - ok.size)}


def _check_dense(x: Tensor, name: str, scale: float | None = None) -> Tensor:
    """Validate an (n, n) or (N, d, d) tensor; return its float64 symmetrised copy (symmetry to
    round-off of max(max|x|, scale): :func:`headgeom.geometry.linalg.operators.check_symmetric`)."""
    if not x.dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating tensor, got {x.dtype}.")
    if x.ndim not in (2, 3) or x.shape[-1] != x.shape[-2] or x.numel() == 0:
        raise ValueError(
            f"{name} must be a square matrix (n, n) or a batch of square blocks (N, d, d), "
            f"got shape {tuple(x.shape)}."
        )
    bad = ~torch.isfinite(x)
    if bool(bad.any()):
        if x.ndim == 3:
            blocks = torch.nonzero(bad.flatten(1).any(1)).flatten().tolist()
            raise ValueError(
                f"{name} has {int(bad.sum())} non-finite entries (NaN/inf) in blocks "
                f"{blocks[:10]}{' ...' if len(blocks) > 10 else ''} ({len(blocks)} of {x.shape[0]})."
            )
        first = tuple(torch.nonzero(bad)[0].tolist())
        raise ValueError(f"{name} has {int(bad.sum())} non-finite entries (NaN/inf), the first at {first}.")
    check_symmetric(x, name, scale=scale)
    x = x.detach().to(torch.float64)
    return torch.add(x, x.transpose(-1, -2)).mul_(0.5)  # one (N, d, d) copy, no second temporary


BLOCK_ELEMENTS = 1 << 21  # entries of the blocks a LAPACK call copies at once (16 MiB in float64)


def _by_blocks(fn, x: Tensor) -> Tensor:
    """``fn`` of a dense (n, n) matrix, or of a batch of blocks a few blocks at a time (each block's
    result is the same as in one batched call; the solver's copies stay small)."""
    if x.ndim == 2:
        return fn(x)
    step = max(1, BLOCK_ELEMENTS // max(1, x[0].numel()))
    return torch.cat([fn(b) for b in x.split(step)])


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0.0 else num / den


def _decomp_dense(x: Tensor, parts: Mapping[str, Any], scale: float | None) -> dict[str, dict[str, Any]]:
    """‖part‖ / ‖x‖ in Frobenius and spectral norm for dense (n, n) or blocks (N, d, d)."""
    fro_x = torch.linalg.matrix_norm(x, "fro")
    sp_x = _by_blocks(lambda b: torch.linalg.matrix_norm(b, 2), x)
    out: dict[str, dict[str, Any]] = {}
    for name, p in parts.items():
        if not isinstance(p, Tensor) or tuple(p.shape) != tuple(x.shape):
            got = tuple(p.shape) if isinstance(p, Tensor) else type(p).__name__
            raise ValueError(f"decomposition part {name!r} must be a tensor of shape {tuple(x.shape)} like x, got {got}.")
        p = _check_dense(p, f"decomposition part {name!r}", scale).to(x.device)
        fro_p, sp_p = torch.linalg.matrix_norm(p, "fro"), _by_blocks(lambda b: torch.linalg.matrix_norm(b, 2), p)
        if x.ndim == 2:
            out[name] = {"fro": _ratio(float(fro_p), float(fro_x)), "spectral": _ratio(float(sp_p), float(sp_x))}
            continue
        nan = torch.full_like(fro_x, float("nan"))
        per_fro = torch.where(fro_x > 0, fro_p / fro_x, nan)
        per_sp = torch.where(sp_x > 0, sp_p / sp_x, nan)
        # The block-diagonal matrix: ‖·‖_F² adds over blocks, ‖·‖_2 is the largest block's.
        out[name] = {
            "fro": _ratio(float(fro_p.square().sum().sqrt()), float(fro_x.square().sum().sqrt())),
            "spectral": _ratio(float(sp_p.max()), float(sp_x.max())),
            "per_sample": {"fro": _summary(per_fro), "spectral": _summary(per_sp)},
        }
    return out


def _spectrum_dense(x: Tensor, rel_floor: float, decomposition: Mapping[str, Any] | None,
                    scale: float | None) -> Spectrum:
    in_dtype = x.dtype
    xs = _check_dense(x, "x", scale)
    lam = _by_blocks(torch.linalg.eigvalsh, xs)  # ascending; (n,) or (N, d)
    fl = _floor(rel_floor, float(lam.abs().max()), scale)
    floor = fl["floor"]
    neg, zero, pos = _counts(lam, floor)
    cond = _condition(lam.reshape(-1), floor)
    method = {"name": "eigh", "dtype": "float64", "input_dtype": str(in_dtype).replace("torch.", "")}
    common = dict(
        lambda_min=float(lam.min()), lambda_max=float(lam.max()), rel_floor=float(rel_floor), **fl,
        n_negative=int(neg.sum()), n_zero=int(zero.sum()), n_positive=int(pos.sum()),
        condition_number=None if bool(torch.isnan(cond)) else float(cond),
        condition_definition=_COND, method=method,
        norm_ratios=None if decomposition is None else _decomp_dense(xs, decomposition, scale),
    )
    if xs.ndim == 2:
        return Spectrum(kind="dense", n=xs.shape[0], eigenvalues=lam, **common)
    per_block = {
        "lambda_min": lam[:, 0], "lambda_max": lam[:, -1],
        "n_negative": neg, "n_zero": zero, "n_positive": pos,
        "condition_number": _condition(lam, floor),
    }
    return Spectrum(
        kind="blocks", n=xs.shape[0] * xs.shape[1], eigenvalues=lam, n_blocks=xs.shape[0],
        per_block=per_block, per_sample={k: _summary(v) for k, v in per_block.items()}, **common,
    )


def _spectrum_operator(
    x: Any, rel_floor: float, decomposition: Mapping[str, Any] | None, k: int, tol: float,
    max_iter: int | None, seed: int, scale: float | None,
) -> Spectrum:
    op = as_operator(x)
    res = lanczos_extremes(op, k=k, tol=tol, max_iter=max_iter, seed=seed, which="both")
    lam = res.extremes().to(torch.float64)
    lo, hi = float(lam[0]), float(lam[-1])
    fl = _floor(rel_floor, max(abs(lo), abs(hi)), scale)
    floor = fl["floor"]
    full = res.exact and res.iterations == op.n  # all n eigenvalues, with multiplicity
    counts: tuple[int | None, ...] = (None, None, None)
    if full:
        counts = tuple(int(c) for c in _counts(res.ritz_values.to(torch.float64), floor))
    if res.exact or lo > floor or hi < -floor:
        # Exact space: every (distinct) eigenvalue is a Ritz value; definite: min|λ| is an end.
        c = _condition((res.ritz_values if res.exact else lam).to(torch.float64), floor)
        cond = None if bool(torch.isnan(c)) else float(c)
    else:
        cond = None
    method = {
        "name": "lanczos", "iterations": res.iterations, "converged": res.converged, "exact": res.exact,
        "k": k, "tol": tol, "seed": seed, "dtype": str(op.dtype).replace("torch.", ""),
        "lowest_residuals": res.lowest_residuals, "highest_residuals": res.highest_residuals,
    }
    ratios = None
    if decomposition is not None:
        ratios = {}
        norm_x = max(abs(lo), abs(hi))
        for name, p in decomposition.items():
            if isinstance(p, Tensor):
                raise TypeError(
                    f"decomposition part {name!r} is a tensor but x is an operator; pass parts of the "
                    "same kind as x (wrap dense parts with SymmetricOperator.from_dense)."
                )
            pop = as_operator(p)
            if pop.n != op.n:
                raise ValueError(f"decomposition part {name!r} has shape {pop.shape}, x has {op.shape}.")
            r = lanczos_extremes(pop, k=1, tol=tol, max_iter=max_iter, seed=seed, which="both")
            norm_p = max(abs(r.lambda_min), abs(r.lambda_max))
            ratios[name] = {"fro": None, "spectral": _ratio(norm_p, norm_x),
                            "converged": r.converged, "iterations": r.iterations}
    return Spectrum(
        kind="operator", n=op.n, eigenvalues=lam, lambda_min=lo, lambda_max=hi,
        rel_floor=float(rel_floor), **fl, n_negative=counts[0], n_zero=counts[1],
        n_positive=counts[2], condition_number=cond, condition_definition=_COND_OP,
        method=method, norm_ratios=ratios, lanczos=res,
    )


def spectrum(
    x: Any,
    rel_floor: float = 1e-10,
    *,
    decomposition: Mapping[str, Any] | None = None,
    k: int = 6,
    tol: float = 1e-10,
    max_iter: int | None = None,
    seed: int = 0,
    scale: float | None = None,
) -> Spectrum:
    """Spectrum of a symmetric (n, n) tensor, an (N, d, d) batch of blocks, or an operator.

    Args:
        x: dense symmetric matrix (exact eigh, float64), block batch (batched eigh), or a
            SymmetricOperator / object with `.matvec` and `.shape` (Lanczos at both ends).
        rel_floor: floor = rel_floor · max|λ| for counting signs and for the condition number;
            1e-10 by default (module docstring, docs/paper.md §4 pitfall 2).
        scale: the scale S of the operands x was computed from (e.g. ``eh.operand_scale().value``
            for H_eff or G blocks); the floor becomes rel_floor · max(max|λ|, S), and the result
            says which applied (``floor_relative_to``), and x (with its decomposition parts) need be
            symmetric only to round-off of max(max|x|, S): blocks tiny by cancellation carry an
            asymmetry of order eps · S. None: relative to the result alone.
        decomposition: named parts of the same kind as x (e.g. {"G": G, "M": M} for
            x = H_eff), reported as ‖part‖ / ‖x‖ in Frobenius and spectral norm.
        k, tol, max_iter, seed: Lanczos settings (operators only), see `lanczos_extremes`.
    """
    if not isinstance(rel_floor, (int, float)) or isinstance(rel_floor, bool) or not (0 <= rel_floor < 1):
        raise ValueError(f"rel_floor must be a float in [0, 1), got {rel_floor!r} (default 1e-10).")
    if decomposition is not None and not isinstance(decomposition, Mapping):
        raise TypeError(f"decomposition must be a dict of named parts, got {type(decomposition).__name__}.")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (0 <= scale < float("inf")):
            raise ValueError(f"scale must be None or a finite float >= 0 (the operands' scale), got {scale!r}.")
        scale = float(scale)
    if isinstance(x, Tensor):
        return _spectrum_dense(x, rel_floor, decomposition, scale)
    if callable(getattr(x, "matvec", None)) and hasattr(x, "shape"):
        return _spectrum_operator(x, rel_floor, decomposition, k, tol, max_iter, seed, scale)
    raise TypeError(
        f"spectrum expects a tensor (n, n) or (N, d, d), or an operator with .matvec and .shape; "
        f"got {type(x).__name__}."
    )

"""The per-sample structure of a loss that declares nothing, found from batched HVPs and verified.

A user's ``lambda u: -F.cosine_similarity(u, c).mean()`` declares no Hessian form
(:class:`headgeom.objectives.AnalysisLoss`), so without this module the engine would multiply
by its Hessian once per column of the sandwich's last weight (hundreds of memory-bound loss
HVPs). Everything here is exact up to round-off, and nothing is used unverified.

Separability. ∇²_u L is block-diagonal over samples when no tangent on one row moves another
row's HVP. ⌈log₂ N⌉ probes, the b-th carrying random directions on the rows whose index has bit
b set, separate every pair of rows (two indices differ in some bit), so an exact zero on the
other rows of every probe means block-diagonal: autograd gives structural zeros where a row
does not depend on another. :func:`is_block_diagonal`.

Structure. For a block-diagonal Hessian one HVP whose tangent carries a direction on every row
gives H_i w_i for all N samples at once (H_i = [∇²_u L]_ii, k × k). With p random directions
per row Ω_i (k × p) and Y_i = H_i Ω_i: if H_i = α_i I + L_i with rank L_i ≤ p, then
range L_i = range L_i Ω_i ⊂ span(Ω_i, Y_i) ⊂ span Q_i (Q_i orthonormal, k × 2p), a direction
g_i ⊥ Q_i has H_i g_i = α_i g_i, and

    H_i = α_i I + Q_i (Q_iᵀ H_i Q_i − α_i I) Q_iᵀ

exactly: 3p + 1 HVPs for all samples, in two batched calls (:func:`discover_curvature`). When k ≤ 2p the blocks
themselves come from k HVPs (Q_i = I, α_i = 0). The result is a
:class:`headgeom.geometry.engine.loss_curvature.LowRankCurvature`, the form a declaration takes, and
like a declaration it is used only after it reproduces the exact HVP on fresh random tangents
on every row (:func:`reproduces`). A per-sample Hessian that is not a scaled identity plus rank
≤ p (a softmax cross-entropy's diag(p) − ppᵀ) fails that check, and the engine keeps its HVP path.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.func import vmap

from .loss_curvature import LowRankCurvature

# Random directions per sample: low-rank parts up to rank PROBES are found (negative cosine:
# rank 2 ambient, 3 tangential), at 3·PROBES + 1 loss HVPs plus 2 to verify.
PROBES = 4
_SEED = 4321


def _batched(hvp: Callable[[Tensor], Tensor], tangents: Tensor) -> Tensor:
    """hvp of each (N, k) tangent in ``tangents`` (T, N, k), ~4M tangent entries at a time."""
    n, k = tangents.shape[1:]
    return vmap(hvp, chunk_size=max(1, (1 << 22) // max(1, n * k)))(tangents)


def _randn(shape: tuple[int, ...], like: Tensor, seed: int) -> Tensor:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=like.dtype).to(like.device)


def is_block_diagonal(hvp: Callable[[Tensor], Tensor], u: Tensor) -> bool:
    """Whether w ↦ ``hvp(w)`` (w of u's shape (N, k)) is block-diagonal over the N rows:
    ⌈log₂ N⌉ batched probes with random directions, every pair of rows separated by one."""
    n, k = u.shape
    if n < 2:
        return True
    rows = torch.arange(n, device=u.device)
    on = torch.stack([(rows >> b) & 1 == 1 for b in range((n - 1).bit_length())])  # (bits, N)
    w = _randn((n, k), u, _SEED)
    out = _batched(hvp, w[None] * on[:, :, None].to(u.dtype))
    leaked = torch.where(on[:, :, None], torch.zeros_like(out), out)  # NaN counts as leaked
    return bool((leaked == 0).all())


def reproduces(curv: LowRankCurvature, w: Tensor, exact: Tensor) -> bool:
    """Whether ``curv`` gives the exact block-diagonal HVPs ``exact`` (T, N, k) of random tangents
    ``w`` (T, N, k) drawn independently of it, row by row, to 1e-8 relative in float64 (1e-3 in
    lower precision), the rule that declarations are checked by
    (:mod:`headgeom.geometry.engine.loss_curvature`)."""
    tol = 1e-8 if w.dtype == torch.float64 else 1e-3
    got = torch.stack([curv.apply(wj) for wj in w])
    if not (torch.isfinite(got).all() and torch.isfinite(exact).all()):
        return False
    err = (got - exact).abs().amax(dim=(0, 2))  # per row
    scale = torch.maximum(exact.abs().amax(dim=(0, 2)), got.abs().amax(dim=(0, 2)))
    floor = 1e-3 * float(scale.max())  # a row whose Hessian is ~0 is judged on the batch's scale
    return bool((err <= tol * scale.clamp(min=floor)).all())


def discover_curvature(hvp: Callable[[Tensor], Tensor], u: Tensor, probes: int = PROBES) -> LowRankCurvature | None:
    """The blocks of a block-diagonal w ↦ ``hvp(w)`` as α_i I + Q_i B_i Q_iᵀ (module docstring),
    verified against the HVPs of two independent random tangents; None when they are not a
    scaled identity plus rank ≤ ``probes``.

    ``hvp`` must be block-diagonal over the rows of u (check with :func:`is_block_diagonal`);
    the verification would refuse a coupled one too. The HVPs go in two batched calls (each
    call has a fixed cost well above its per-tangent cost): [Ω, verification tangents], then
    [Q's columns, g].
    """
    n, k = u.shape
    w = _randn((2, n, k), u, _SEED + 3)  # verification tangents, independent of everything below
    if k <= 2 * probes:  # the blocks themselves, one HVP per basis direction on every row
        q = torch.eye(k, dtype=u.dtype, device=u.device).expand(n, k, k)
        alpha = torch.zeros(n, dtype=u.dtype, device=u.device)
        out = _batched(hvp, torch.cat([q.permute(2, 0, 1), w]))
        hq, hw = out[:k], out[k:]
    else:
        omega = _randn((probes, n, k), u, _SEED + 1)
        out = _batched(hvp, torch.cat([omega, w]))
        y, hw = out[:probes], out[probes:]
        q, _ = torch.linalg.qr(torch.cat([omega, y]).permute(1, 2, 0))  # (N, k, 2p), spans Ω_i and Y_i
        g = _randn((n, k), u, _SEED + 2)
        for _ in range(2):  # twice: orthogonal to Q_i to round-off
            g = g - (q @ (q.transpose(1, 2) @ g[:, :, None]))[:, :, 0]
        out = _batched(hvp, torch.cat([q.permute(2, 0, 1), g[None]]))
        hq, hg = out[:-1], out[-1]
        alpha = (g * hg).sum(1) / (g * g).sum(1)
    c = torch.einsum("nkr,snk->nrs", q, hq)  # Q_iᵀ H_i Q_i; hq[s] is H_i applied to column s of Q_i
    c = 0.5 * (c + c.transpose(1, 2))
    b = c - alpha[:, None, None] * torch.eye(c.shape[-1], dtype=u.dtype, device=u.device)
    curv = LowRankCurvature(alpha, q, b)
    return curv if reproduces(curv, w, hw) else None

"""Per-sample loss-Hessian blocks in the form "scaled identity plus low rank".

For the separable losses of the theory (docs/paper.md §1) each block of ∇²_u L has the form

    [∇²_u L]_ii = α_i I_k + U_i B_i U_iᵀ,        α_i scalar, U_i (k, r), B_i (r, r), r ≪ k

optionally plus a diagonal diag(δ_i) (the DINO loss: (diag p_i − p_i p_iᵀ)/(N T²), p_i the student
softmax), declared as a fourth element of ``hessian_structure``.

- MSE loss ½‖u − c‖², batch mean:  α_i = 1/N, no low-rank part.
- negative cosine −mean_i cos(u_i, c_i), with n = ‖u_i‖, û = u_i/n, ĉ = c_i/‖c_i‖, s = ûᵀĉ:
      ∇²(−cos) = (1/n²) [ s I + ĉûᵀ + ûĉᵀ − 3 s ûûᵀ ]
  so α_i = s/(N n²), U_i = [û, ĉ], B_i = 1/(N n²) [[−3s, 1], [1, 0]].
- tangential reading P A P with P = I − ûûᵀ:  α_i I − α_i ûûᵀ + (P U_i) B_i (P U_i)ᵀ.

A loss declares its form as an :class:`headgeom.objectives.AnalysisLoss` whose
``hessian_structure(u)`` returns (alpha, U, B) (``headgeom.objectives.analysis_loss`` gives it
to the MSE and cosine losses). The engine
then needs no loss-Hessian products at all: W_Lᵀ [∇²L]_ii W_L = α_i W_LᵀW_L + (W_LᵀU_i) B_i (…)ᵀ.
A declaration is never trusted blindly: :func:`curvature_for` checks it against the exact
HVP on a random probe (reverse-over-reverse autograd, :func:`headgeom.geometry.engine.readings.autograd_loss_hvp`)
and refuses a disagreement.

A batch-coupled loss (NT-Xent: every row is a negative of every other) has no block-diagonal
Hessian, but the pullback metric's per-sample blocks need only its diagonal blocks. Such a loss
declares them as the AnalysisLoss's ``diagonal_blocks(u) -> (N, k, k)``;
:func:`coupled_blocks_for` checks them against HVPs on tangents supported on single rows and
applies the reading.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from headgeom.objectives.declared import AnalysisLoss, as_analysis_loss

from .readings import Loss, autograd_loss_hvp
from ..linalg.weighted_gram import weighted_gram


@dataclass
class LowRankCurvature:
    """[∇²_u L]_ii = alpha[i] I + U[i] B[i] U[i]ᵀ for i = 1..N.

    alpha: (N,); U: (N, k, r) or None; B: (N, r, r) or None (both None: scaled identity).
    """

    alpha: Tensor
    U: Tensor | None = None
    B: Tensor | None = None
    diag: Tensor | None = None  # (N, k): + diag(diag[i]) in block i

    @property
    def rank(self) -> int:
        return 0 if self.U is None else self.U.shape[-1]

    def rows(self, sel: slice) -> "LowRankCurvature":
        """The blocks of the samples ``sel``."""
        return LowRankCurvature(self.alpha[sel], None if self.U is None else self.U[sel],
                                None if self.B is None else self.B[sel],
                                None if self.diag is None else self.diag[sel])

    def apply(self, w: Tensor) -> Tensor:
        """Block-diagonal product: row i of the result is [∇²L]_ii w_i, for w (N, k)."""
        out = self.alpha[:, None] * w
        if self.diag is not None:
            out = out + self.diag * w
        if self.U is not None:
            coef = torch.einsum("nkr,nk->nr", self.U, w)
            out = out + torch.einsum("nkr,nrs,ns->nk", self.U, self.B, coef)
        return out

    def sandwich(self, w: Tensor | None, gram: Tensor | None, k: int, scale: Tensor | None = None,
                 out: Tensor | None = None, wt: Tensor | None = None) -> Tensor:
        """(N, m, m) blocks S_i Wᵀ [∇²L]_ii W S_i for a constant W (k, m), given gram = WᵀW, with
        S_i = diag(scale[i]) (scale (N, m); None: S_i = I).

        w None means W = I (m = k). gram may be None when every alpha is 0 (the DINO loss).
        A declared diagonal's Wᵀ diag(δ_i) W is a weighted Gram of W for all samples at once
        (:mod:`headgeom.geometry.linalg.weighted_gram`: row tiles of the upper triangle, no (N, m, k)
        temporary; ``wt`` = Wᵀ contiguous if the caller keeps it). The blocks are written into
        ``out`` (N, m, m) if given: the scaled identity part in two element-wise passes and the
        low-rank part added in place by one batched product, with no (N, m, m) temporary.
        """
        n = self.alpha.shape[0]
        m = k if w is None else w.shape[1]
        kw = dict(dtype=self.alpha.dtype, device=self.alpha.device)
        if out is None:
            out = torch.empty(n, m, m, **kw)
        alpha_s = self.alpha[:, None] if scale is None else self.alpha[:, None] * scale  # (N, 1 or m)
        if w is not None and gram is None and bool((self.alpha != 0).any()):
            raise ValueError("LowRankCurvature.sandwich needs gram = WᵀW when some alpha is not 0")
        if self.diag is not None and w is not None:
            weighted_gram(w.T.contiguous() if wt is None else wt, self.diag, out=out)
            if scale is not None:
                out.mul_(scale[:, :, None]).mul_(scale[:, None, :])
            if gram is not None:
                ss = alpha_s[:, :, None] if scale is None else alpha_s[:, :, None] * scale[:, None, :]
                out.addcmul_(gram.expand(n, m, m), ss.expand(n, m, m))
        elif w is not None and gram is not None:
            torch.mul(gram, alpha_s[:, :, None], out=out)
            if scale is not None:
                out.mul_(scale[:, None, :])
        else:  # W = I, or W with every alpha 0 and no diagonal
            out.zero_()
            if w is None:
                diag = alpha_s.expand(n, m) if scale is None else alpha_s * scale
                if self.diag is not None:
                    diag = diag + (self.diag if scale is None else self.diag * scale * scale)
                out.diagonal(dim1=1, dim2=2).add_(diag)
        if self.U is not None:
            v = self.U if w is None else pulled_columns(w, self.U)  # (N, m, r)
            if scale is not None:
                v = v * scale[:, :, None]
            out.baddbmm_(v @ self.B, v.transpose(1, 2))
        return out


def pulled_columns(w: Tensor, u: Tensor) -> Tensor:
    """(N, m, r) Wᵀ U_i for W (k, m) and U (N, k, r), as one (N·r, k) × (k, m) GEMM.

    (``einsum("km,nkr->nmr")`` took a strided batched path: at the DINO head's W (65,536 × 256)
    and N = 8 it ran at about 1 % of the GEMM rate.)
    """
    n, k, r = u.shape
    return (u.transpose(1, 2).reshape(n * r, k) @ w).view(n, r, -1).transpose(1, 2)


def tangential(curv: LowRankCurvature, u: Tensor) -> LowRankCurvature:
    """P A P per sample, P = I − ûûᵀ (the ``tangential`` reading), still identity + low rank
    (+ the same diagonal: P D P = D − û vᵀ − v ûᵀ + (ûᵀv) ûûᵀ with v = D û)."""
    u_hat = u / u.norm(dim=-1, keepdim=True)
    n = u.shape[0]
    cols = [u_hat[:, :, None]]
    blocks = [(-curv.alpha)[:, None, None]]
    if curv.diag is not None:
        v = curv.diag * u_hat
        uv = (u_hat * v).sum(-1)
        cols = [torch.stack([u_hat, v], dim=-1)]
        two = torch.zeros(n, 2, 2, dtype=u.dtype, device=u.device)
        two[:, 0, 0] = uv - curv.alpha
        two[:, 0, 1] = two[:, 1, 0] = -1.0
        blocks = [two]
    if curv.U is not None:
        pu = curv.U - u_hat[:, :, None] * torch.einsum("nk,nkr->nr", u_hat, curv.U)[:, None, :]
        cols.append(pu)
        blocks.append(curv.B)
    r = sum(c.shape[-1] for c in cols)
    b = torch.zeros(n, r, r, dtype=u.dtype, device=u.device)
    at = 0
    for blk in blocks:
        q = blk.shape[-1]
        b[:, at:at + q, at:at + q] = blk
        at += q
    return LowRankCurvature(curv.alpha, torch.cat(cols, dim=-1), b, curv.diag)


def curvature_for(loss: AnalysisLoss | Loss, u: Tensor, reading: str, *, check: bool = True) -> LowRankCurvature | None:
    """The loss-Hessian blocks at u under ``reading`` in low-rank form, or None if unknown.

    ``ambient``/``tangential`` use the loss's declared ``hessian_structure`` (a plain callable
    declares none). With ``check`` the declared form is compared with the exact HVP of the loss on
    a fixed random probe; a mismatch raises (a wrong declaration must never turn into a wrong Hessian).
    """
    loss = as_analysis_loss(loss)
    declare = loss.hessian_structure
    if declare is None:
        return None
    alpha, U, B, *diag = declare(u)  # an optional fourth element: the diagonal (N, k)
    diag = diag[0] if diag else None
    curv = LowRankCurvature(alpha.to(u.dtype), None if U is None else U.to(u.dtype), None if B is None else B.to(u.dtype),
                            None if diag is None else diag.to(u.dtype))
    if reading == "tangential":
        curv = tangential(curv, u)
    if check:
        gen = torch.Generator(device="cpu").manual_seed(1234)
        w = torch.randn(u.shape, generator=gen, dtype=u.dtype).to(u.device)
        exact = autograd_loss_hvp(loss, u, reading)(w)
        err = float((curv.apply(w) - exact).abs().max())
        scale = float(exact.abs().max()) or 1.0
        tol = 1e-8 if u.dtype == torch.float64 else 1e-3
        if err > tol * scale:
            raise ValueError(
                f"the loss's declared hessian_structure disagrees with its exact Hessian-vector product "
                f"(max error {err:.3e} against max |Hv| {scale:.3e}); fix or remove the declaration"
            )
    return curv


def coupled_blocks_for(loss: AnalysisLoss | Loss, u: Tensor, reading: str, *, check: bool = True) -> Tensor | None:
    """The diagonal blocks [∇²_u L]_ii (N, k, k) of a batch-coupled loss under ``reading``, from
    its declared ``diagonal_blocks(u)``, or None if it declares none. With ``check`` the blocks
    of three rows are compared with exact HVPs on a random tangent supported on that row alone;
    a mismatch raises."""
    loss = as_analysis_loss(loss)
    declare = loss.diagonal_blocks
    if declare is None:
        return None
    n, k = u.shape
    blocks = declare(u).to(u.dtype)
    if tuple(blocks.shape) != (n, k, k):
        raise ValueError(f"the loss's declared diagonal_blocks have shape {tuple(blocks.shape)}; "
                         f"expected (N, k, k) = {(n, k, k)}")
    if reading == "tangential":
        u_hat = u / u.norm(dim=-1, keepdim=True)
        proj = torch.eye(k, dtype=u.dtype, device=u.device) - u_hat[:, :, None] * u_hat[:, None, :]
        blocks = proj @ blocks @ proj
    if check:
        hvp = autograd_loss_hvp(loss, u, reading)
        gen = torch.Generator(device="cpu").manual_seed(1234)
        tol = 1e-8 if u.dtype == torch.float64 else 1e-3
        for i in sorted({0, n // 2, n - 1}):
            w = torch.randn(k, generator=gen, dtype=u.dtype).to(u.device)
            tangent = torch.zeros_like(u)
            tangent[i] = w
            exact = hvp(tangent)[i]
            err = float((blocks[i] @ w - exact).abs().max())
            scale = float(exact.abs().max()) or 1.0
            if err > tol * scale:
                raise ValueError(
                    f"the loss's declared diagonal_blocks disagree with its exact Hessian-vector "
                    f"product at row {i} (max error {err:.3e} against max |Hv| {scale:.3e}); fix "
                    f"or remove the declaration")
    return blocks

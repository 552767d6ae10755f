"""LayerNorm and L2-normalisation as per-sample maps with closed-form first and second derivatives.

Both normalise each row x (width w) by a scalar of the row itself (docs/paper.md §1: what M
needs is ∇²⟨g, y(x)⟩ for the residual gradient g at the layer's output):

- ``ln``: y = x̄/σ, x̄ = x − mean(x), σ = √(|x̄|²/w + eps), x̂ = y. (LayerNorm's γ, β are split off
  as a :class:`ChannelAffine` that the affine folding merges into the next Linear.)
      J = (1/σ) (I − 11ᵀ/w − x̂x̂ᵀ/w)
      ∇²⟨g, y⟩ = (1/(wσ²)) [ −(a x̂ᵀ + x̂ aᵀ) − t (I − 11ᵀ/w) + 3t x̂x̂ᵀ/w ],  a = g − mean(g), t = aᵀx̂
- ``l2``: y = x / max(r, eps), r = ‖x‖, ŷ = x/r (F.normalize; rows with r ≤ eps are linear, x/eps)
      J = (1/r) (I − ŷŷᵀ)
      ∇²⟨g, y⟩ = (1/r²) [ −(g ŷᵀ + ŷ gᵀ) − s I + 3 s ŷŷᵀ ],  s = gᵀŷ

Both Jacobians are symmetric, J = c (I − E Eᵀ) with E (w, q), q ≤ 2, and both second
derivatives are β (I − F Fᵀ) + V Bv Vᵀ with V (w, 2): applying them to a batch of transposed
Jacobians costs a few rank-one updates, not a w × w product per sample (:class:`RowNormPass`, the
layer protocol of :mod:`headgeom.geometry.layers.base`). The rules: ``nn.LayerNorm`` and
``F.layer_norm`` over the last dim become RowNorm("ln") and their γ, β a ChannelAffine;
headgeom's ``L2Normalize`` and ``F.normalize(x, p=2, dim=-1)`` become RowNorm("l2").
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from headgeom.heads.build import L2Normalize

from ..linalg.low_rank import add_low_rank_
from ..linalg.workspace import Workspace
from .affine import channel_affine
from .base import ChainLayer, LayerPass
from .registry import NotAChain, as_is, call_arguments, chain_layer, function_rule, module_rule


class RowNorm(nn.Module):
    """The normalisation part of LayerNorm (``kind="ln"``, no affine) or of F.normalize (``"l2"``)."""

    def __init__(self, kind: str, eps: float) -> None:
        super().__init__()
        if kind not in ("ln", "l2"):
            raise ValueError(f"RowNorm kind must be 'ln' or 'l2'; got {kind!r}")
        self.kind, self.eps = kind, eps

    def forward(self, x: Tensor) -> Tensor:  # (N, w) -> (N, w)
        if self.kind == "ln":
            return F.layer_norm(x, (x.shape[-1],), eps=self.eps)
        return F.normalize(x, p=2.0, dim=-1, eps=self.eps)

    def extra_repr(self) -> str:
        return f"kind={self.kind}, eps={self.eps}"


@dataclass
class RowNormPass(LayerPass):
    """The per-sample state of a RowNorm over s rows: J = c (I − E Eᵀ); after :meth:`backward`,
    the second derivative ∇²⟨g, y⟩ = β (I − F Fᵀ) + V Bv Vᵀ. ``second_scale`` multiplies the l2
    form's second derivative (1 for F.normalize; RMSNorm's is the l2 form scaled, see
    :mod:`headgeom.geometry.layers.rms_norm`)."""

    y: Tensor  # (s, w) output
    c: Tensor  # (s,)
    e: Tensor  # (s, w, q)
    f: Tensor | None = None  # (w, 1) for ln (shared), None for l2
    beta: Tensor | None = None  # (s,)
    v: Tensor | None = None  # (s, w, 2)
    bv: Tensor | None = None  # (s, 2, 2)
    second_scale: float = 1.0

    def rows(self, sel: slice | Tensor) -> "RowNormPass":
        """The state of the samples ``sel``."""
        pick = lambda t: None if t is None else t[sel]  # noqa: E731
        return RowNormPass(y=self.y[sel], c=self.c[sel], e=self.e[sel], f=self.f, beta=pick(self.beta),
                           v=pick(self.v), bv=pick(self.bv), second_scale=self.second_scale)

    def sandwich(self, k: Tensor) -> Tensor:
        """(s, w, w) Jᵀ K J for K (s, w, w), by rank-q updates: c² (I − EEᵀ) K (I − EEᵀ)."""
        e = self.e
        ek = e.transpose(1, 2) @ k  # (s, q, w)
        ke = k @ e  # (s, w, q)
        out = k - e @ ek - ke @ e.transpose(1, 2) + e @ (ek @ e) @ e.transpose(1, 2)
        return out * (self.c * self.c)[:, None, None]

    def pull_jt(self, pre: Tensor) -> Tensor:
        """pre @ Jᵀ for transposed Jacobians pre (d, w) shared or (s, d, w) per sample."""
        c = self.c[:, None, None]
        proj = torch.matmul(pre, self.e).mul_(c)  # (s, d, q), c folded in
        return add_low_rank_(pre * c, proj, self.e, value=-1.0)  # c P − (c P E) Eᵀ

    def vjp(self, g: Tensor) -> Tensor:
        """Jᵀ g for g (s, w) (J is symmetric)."""
        return (g - torch.einsum("swq,sq->sw", self.e, torch.einsum("swq,sw->sq", self.e, g))) * self.c[:, None]

    def dense_jacobian(self) -> Tensor:
        """(s, w, w) J."""
        s, w, _ = self.e.shape
        eye = torch.eye(w, dtype=self.e.dtype, device=self.e.device)
        return (eye - self.e @ self.e.transpose(1, 2)) * self.c[:, None, None]

    def dense_second(self) -> Tensor:
        """(s, w, w) ∇²⟨g, y⟩ (needs :meth:`backward`)."""
        w = self.e.shape[1]
        eye = torch.eye(w, dtype=self.e.dtype, device=self.e.device)
        base = eye if self.f is None else eye - self.f @ self.f.T
        return self.beta[:, None, None] * base + self.v @ self.bv @ self.v.transpose(1, 2)

    def interaction(self, pre: Tensor, gram: Tensor | None = None) -> Tensor:
        """(s, d, d) pre ∇²⟨g, y⟩ preᵀ for pre (d, w) shared or (s, d, w); ``gram`` = pre preᵀ if known."""
        if gram is None:
            gram = torch.matmul(pre, pre.transpose(-1, -2))
        base = gram
        if self.f is not None:
            pf = torch.matmul(pre, self.f)  # (…, d, 1)
            base = gram - pf @ pf.transpose(-1, -2)
        pv = torch.matmul(pre, self.v)  # (s, d, 2)
        return self.beta[:, None, None] * base + pv @ self.bv @ pv.transpose(1, 2)

    def interaction_into(self, pre: Tensor, out: Tensor, accumulate: bool = False, gram: Tensor | None = None,
                         workspace: Workspace | None = None) -> None:
        term = self.interaction(pre, gram)
        if accumulate:
            out.add_(term)
        else:
            out.copy_(term)

    def backward(self, g: Tensor) -> Tensor:
        """Record the second derivative for the gradient g (s, w) at the output; return Jᵀ g."""
        two = torch.zeros(g.shape[0], 2, 2, dtype=g.dtype, device=g.device)
        if self.f is not None:  # ln: x̂ = y, a = g − mean(g)
            w = g.shape[1]
            a = g - g.mean(dim=1, keepdim=True)
            t = (a * self.y).sum(dim=1)
            k = self.c * self.c / w
            self.beta = -t * k
            self.v = torch.stack([a, self.y], dim=-1)
            two[:, 0, 1] = two[:, 1, 0] = -k
            two[:, 1, 1] = 3.0 * t * k / w
        else:  # l2: ŷ = e[..., 0] (zero on the rows in the linear branch, where the term vanishes)
            yhat = self.e[..., 0]
            s = (g * yhat).sum(dim=1)
            k = self.c * self.c * self.second_scale
            self.beta = -s * k
            self.v = torch.stack([g, yhat], dim=-1)
            two[:, 0, 1] = two[:, 1, 0] = -k
            two[:, 1, 1] = 3.0 * s * k
        self.bv = two
        return self.vjp(g)


def row_norm_pass(layer: RowNorm, x: Tensor) -> RowNormPass:
    """Forward state of ``layer`` on rows x (s, w)."""
    s, w = x.shape
    if layer.kind == "ln":
        xbar = x - x.mean(dim=1, keepdim=True)
        inv = torch.rsqrt((xbar * xbar).sum(dim=1) / w + layer.eps)  # 1/σ, σ² the biased variance + eps
        y = xbar * inv[:, None]
        ones = torch.full((s, w), 1.0 / math.sqrt(w), dtype=x.dtype, device=x.device)
        e = torch.stack([ones, y / math.sqrt(w)], dim=-1)
        f = torch.full((w, 1), 1.0 / math.sqrt(w), dtype=x.dtype, device=x.device)
        return RowNormPass(y=y, c=inv, e=e, f=f)
    r = x.norm(dim=1)
    active = r > layer.eps  # F.normalize divides by max(r, eps): linear (x/eps) below eps
    denom = torch.where(active, r, torch.full_like(r, layer.eps))
    y = x / denom[:, None]
    yhat = torch.where(active[:, None], y, torch.zeros_like(y))
    return RowNormPass(y=y, c=1.0 / denom, e=yhat[..., None])


@chain_layer(RowNorm)
class RowNormLayer(ChainLayer):
    """LayerNorm's normalisation or L2-normalisation of each row."""

    def forward(self, x: Tensor) -> RowNormPass:
        return row_norm_pass(self.module, x)


module_rule(RowNorm)(as_is)


@module_rule(nn.LayerNorm)
def _layer_norm(module: nn.LayerNorm) -> list[nn.Module]:
    return _layer_norm_layers(tuple(module.normalized_shape), module.weight, module.bias, module.eps)


@function_rule(F.layer_norm)
def _layer_norm_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = call_arguments(args, kwargs, ("normalized_shape", "weight", "bias", "eps"),
                       {"weight": None, "bias": None, "eps": 1e-5}, "F.layer_norm")
    shape = a["normalized_shape"]
    return _layer_norm_layers(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,),
                              a["weight"], a["bias"], a["eps"])


def _layer_norm_layers(shape: tuple, weight: Tensor | None, bias: Tensor | None, eps: float) -> list[nn.Module]:
    """RowNorm("ln") and, when LayerNorm has γ or β, a ChannelAffine (folded into the next Linear)."""
    if len(shape) != 1:
        raise NotAChain(f"LayerNorm over {len(shape)} trailing dims (the chain normalises each row)")
    return [RowNorm("ln", eps), *channel_affine(weight, bias, shape[0])]


@module_rule(L2Normalize)
def _l2_module(module: L2Normalize) -> list[nn.Module]:
    return [RowNorm("l2", module.eps)]


@function_rule(F.normalize)
def _normalize_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    a = call_arguments(args, kwargs, ("p", "dim", "eps", "out"), {"p": 2.0, "dim": 1, "eps": 1e-12, "out": None},
                       "F.normalize")
    if a["p"] != 2 or a["dim"] not in (1, -1) or a["out"] is not None:
        raise NotAChain(f"F.normalize with p={a['p']}, dim={a['dim']} (the chain has the L2 norm over the features)")
    return [RowNorm("l2", float(a["eps"]))]

"""Per-sample H_eff blocks of MLP heads under separable losses, sandwiched at the last activation.

Write the (affine-folded) head as u = W_L σ_L(a_L) + b_L with a_L = a_L(z) the pre-activation of
the last activation and B_i = ∂a_L/∂z_i (m × d). With D_i = diag σ_L'(a_L), K_i = W_Lᵀ [∇²L]_ii W_L
and c_l = σ_l''(a_l) ⊙ g_l (g_l the residual gradient ρ back-propagated to σ_l's output):

    G_i = B_iᵀ (D_i K_i D_i) B_i,       M_i = B_iᵀ diag(c_L) B_i + Σ_{l<L} A_lᵀ diag(c_l) A_l

so H_eff's block is B_iᵀ (D_i K_i D_i + diag c_L) B_i plus the earlier layers' terms: one m × m
sandwich instead of propagating J through W_L (k × m) and forming Jᵀ(∇²L J) at width k.
K_i costs nothing when the loss declares α_i I + U_i B_i U_iᵀ blocks
(:mod:`headgeom.geometry.engine.loss_curvature`); otherwise it comes from m loss HVPs and one GEMM.

A term A_lᵀ diag(c_l) A_l whose Jacobian A_l is the same for every sample (the first Linear)
is formed by row tiles of the upper triangle, each one GEMM over the chunk's samples: about
half the work of per-sample products, as large matrix products
(:mod:`headgeom.geometry.linalg.weighted_gram`).

A RowNorm (LayerNorm, L2-normalisation) takes the place of an activation with its own J_l and
second derivative (:mod:`headgeom.geometry.layers.row_norm`): D_i K_i D_i becomes J_lᵀ K_i J_l and
diag c_l becomes ∇²⟨g_l, y_l⟩. A DINO head (MLP → L2 → weight-normed b → 65,536 Linear) is
sandwiched at the bottleneck width b: K_i = Wᵀ [∇²L]_ii W (b × b) and g = Wᵀρ, and nothing of
width 65,536 is formed per sample beyond the loss HVPs' tangents.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import vmap

from .loss_curvature import LowRankCurvature
from ..layers.registry import is_elementwise
from .chain import _activation_derivatives
from ..layers.row_norm import RowNorm, RowNormPass, row_norm_pass
from ..linalg.weighted_gram import GRAM_TILE, SYMMETRIC_TILE, symmetric_bmm, upper_fraction, weighted_gram


@dataclass
class VectorPass:
    """u and, per nonlinearity (in order), σ'(a), σ''(a) and c = σ''(a) ⊙ g for all samples; a
    RowNorm (LayerNorm, L2-normalisation) has its RowNormPass in ``norms`` and None in the lists."""

    u: Tensor  # (N, k)
    act_index: list[int]  # position of each nonlinearity in the layer list
    d1: list[Tensor | None]  # (N, w_l)
    d2: list[Tensor | None]
    c: list[Tensor | None] | None  # None when ρ was not given
    norms: dict[int, RowNormPass]  # nonlinearity position j -> its state (second derivative set given ρ)


def chain_output(layers: list[nn.Module], z: Tensor) -> Tensor:
    """u = the chain applied to z (forward values only: no derivatives, no autograd)."""
    x = z
    for layer in layers:
        x = layer(x)
    return x


def vector_pass(layers: list[nn.Module], z: Tensor, rho: Tensor | None) -> VectorPass:
    """Forward values and backward residual gradients of a Linear/activation chain (vectors only)."""
    x = z
    act_index, d1s, d2s = [], [], []
    norms: dict[int, RowNormPass] = {}
    for idx, layer in enumerate(layers):
        if isinstance(layer, nn.Linear):
            x = nn.functional.linear(x, layer.weight, layer.bias)
        elif isinstance(layer, RowNorm):
            norms[len(act_index)] = state = row_norm_pass(layer, x)
            x = state.y
            act_index.append(idx)
            d1s.append(None)
            d2s.append(None)
        else:
            x, d1, d2 = _activation_derivatives(layer, x)
            act_index.append(idx)
            d1s.append(d1)
            d2s.append(d2)
    cs = None
    if rho is not None:
        cs = [None] * len(act_index)
        g = rho
        pos = {idx: j for j, idx in enumerate(act_index)}
        for idx in range(len(layers) - 1, -1, -1):
            layer = layers[idx]
            if isinstance(layer, nn.Linear):
                g = g @ layer.weight
            elif pos[idx] in norms:
                g = norms[pos[idx]].backward(g)
            else:
                j = pos[idx]
                cs[j] = d2s[j] * g
                g = g * d1s[j]
    return VectorPass(u=x, act_index=act_index, d1=d1s, d2=d2s, c=cs, norms=norms)


def is_linear_chain(layers: list[nn.Module]) -> bool:
    """Only Linear layers, element-wise activations and RowNorms (what fuse_affine_runs leaves)."""
    return all(isinstance(layer, (nn.Linear, RowNorm)) or is_elementwise(layer) for layer in layers)


def tail_curvature(w_tail: Tensor | None, k: int, hvp: Callable[[Tensor], Tensor], n: int,
                   like: Tensor) -> Tensor:
    """(N, m, m) K_i = W_Lᵀ [∇²L]_ii W_L from m loss HVPs; W_L None means the identity (m = k)."""
    m = k if w_tail is None else w_tail.shape[1]
    cols = torch.eye(k, dtype=like.dtype, device=like.device) if w_tail is None else w_tail
    out = torch.empty(n, m, m, dtype=like.dtype, device=like.device)
    step = max(1, min(m, (1 << 22) // max(1, n * k)))  # bounded tangent memory
    for c0 in range(0, m, step):
        c1 = min(c0 + step, m)
        tangents = cols[:, c0:c1].T[:, None, :].expand(c1 - c0, n, k)  # column c on every row
        y = vmap(hvp)(tangents).transpose(0, 1)  # (N, cc, k): [∇²L]_ii w_c
        out[:, c0:c1, :] = y if w_tail is None else y @ w_tail
    return out


# A loss HVP is memory-bound: tens of element-wise passes over its (N, k) tangent. Counted as
# this many FLOP-equivalents per element when the two paths are compared (measured order of
# magnitude for the cosine loss on CPU; only the choice of path depends on it).
HVP_COST_PER_ELEMENT = 64.0


def tail_width(layers: list[nn.Module], k: int) -> int:
    """m, the width at which the sandwich is formed: the input of the affine map after the last
    activation (k when the chain ends in an activation; d for a head without activations)."""
    acts = [i for i, layer in enumerate(layers) if not isinstance(layer, nn.Linear)]
    tail = [layer for layer in layers[(acts[-1] + 1 if acts else 0):] if isinstance(layer, nn.Linear)]
    return tail[0].in_features if tail else k


def block_costs(layers: list[nn.Module], d: int, k: int, declared: bool, merged: bool = True,
                diagonal: bool = False) -> dict[str, float]:
    """FLOPs per sample of the blocks of H_eff by the sandwich and the Jacobian path.

    declared: the loss-Hessian blocks are known in low-rank form (no HVPs on the sandwich path).
    merged: only H_eff = G + M is wanted (the last activation's M term rides in the sandwich).
    diagonal: the declared form has a diagonal diag(δ_i) (the DINO loss): on the sandwich path
    W_Lᵀ diag(δ_i) W_L is a weighted Gram (about half of 2·k·m²), on the Jacobian path a scaling.
    Symmetric products count the share of the full product their row tiles multiply.
    """
    acts = [i for i, layer in enumerate(layers) if not isinstance(layer, nn.Linear)]
    widths = [layers[i - 1].out_features if i and isinstance(layers[i - 1], nn.Linear) else None for i in acts]
    lin_after_first = [layer for layer in layers[(acts[0] + 1 if acts else len(layers)):] if isinstance(layer, nn.Linear)]
    tail = [layer for layer in layers[(acts[-1] + 1 if acts else 0):] if isinstance(layer, nn.Linear)]
    m = tail_width(layers, k)
    jac_mid = sum(2.0 * d * lin.in_features * lin.out_features for lin in lin_after_first if lin not in tail)
    act_w = [w if w is not None else d for w in widths]
    # sandwich path
    ours = jac_mid
    gram, sym = upper_fraction(d, GRAM_TILE), upper_fraction(d, SYMMETRIC_TILE)  # symmetric products by row tiles
    if acts:
        ours += 2.0 * act_w[0] * d * d * gram  # the first term (weighted_gram)
        ours += sum(2.0 * w * d * d * sym for w in act_w[1:-1])
        if len(acts) > 1 and not merged:
            ours += 2.0 * act_w[-1] * d * d * sym
        ours += 2.0 * m * m * d + 2.0 * m * d * d * sym
    ours += 4.0 * m * m if declared else 2.0 * k * m * m + HVP_COST_PER_ELEMENT * k * m
    if declared and diagonal and tail:
        ours += 2.0 * k * m * m * upper_fraction(m, GRAM_TILE)
    # Jacobian path
    theirs = jac_mid + sum(2.0 * d * lin.in_features * lin.out_features for lin in tail if acts)
    theirs += sum(2.0 * w * d * d * sym for w in act_w)
    theirs += 2.0 * k * d * d * sym + HVP_COST_PER_ELEMENT * k * d
    if declared and diagonal:
        theirs += 2.0 * k * d
    return {"sandwich": ours, "jacobian": theirs}


def _linears_between(layers: list[nn.Module], lo: int, hi: int) -> list[nn.Linear]:
    return [layer for layer in layers[lo:hi] if isinstance(layer, nn.Linear)]


@dataclass
class ChainProducts:
    """What a chain's blocks share across samples and calls, from its weights alone.

    shared (d, w_0): P_0 = the first activation's pre-activation Jacobianᵀ (the identity when no
    Linear comes first);
    w_tail (k, m): the affine map after the last activation (None: the identity). Their Grams are
    formed on first use and kept with the analysis copy (its :class:`~headgeom.geometry.engine.head_facts.HeadFacts`):
    a tracker's :class:`~headgeom.geometry.engine.head_cache.HeadCache` hands the same copy out at every step
    while the weights are unchanged.
    """

    shared: Tensor
    w_tail: Tensor | None

    @cached_property
    def tail_gram(self) -> Tensor:
        """W_Lᵀ W_L (m, m)."""
        return self.w_tail.T @ self.w_tail

    @cached_property
    def tail_t(self) -> Tensor | None:
        """W_Lᵀ contiguous (m, k): the rows the weighted Gram of a declared diagonal reads."""
        return None if self.w_tail is None else self.w_tail.T.contiguous()

    @cached_property
    def shared_gram(self) -> Tensor:
        """P_0 P_0ᵀ (d, d)."""
        return self.shared @ self.shared.T


def chain_products(layers: list[nn.Module], d: int, like: Tensor) -> ChainProducts:
    """The chain's shared Jacobian P_0 and tail map W_L (products of its Linear weights)."""
    acts = [i for i, layer in enumerate(layers) if not isinstance(layer, nn.Linear)]
    w_tail = None
    for lin in _linears_between(layers, (acts[-1] + 1) if acts else 0, len(layers)):
        w_tail = lin.weight if w_tail is None else lin.weight @ w_tail
    shared = None
    for lin in _linears_between(layers, 0, acts[0] if acts else 0):
        shared = lin.weight.T.contiguous() if shared is None else shared @ lin.weight.T
    if shared is None:
        shared = torch.eye(d, dtype=like.dtype, device=like.device)
    return ChainProducts(shared, w_tail)


def sandwich_blocks(layers: list[nn.Module], z: Tensor, rho: Tensor, curvature: LowRankCurvature | None,
                    hvp: Callable[[Tensor], Tensor], want_g: bool, want_m: bool,
                    chunk_size: int, merged: bool = False,
                    products: ChainProducts | None = None) -> tuple[Tensor | None, Tensor | None]:
    """(G blocks, M blocks), each (N, d, d) or None, of a Linear/activation chain whose loss
    Hessian is block-diagonal over samples (``hvp`` multiplies by it; ``curvature`` is its
    declared low-rank form or None). Jacobians are kept transposed: P_j (d, w_j) = A_jᵀ.

    merged (needs want_g and want_m): only the sum matters, so the last activation's M term
    is added inside the sandwich, B(DKD + diag c)Bᵀ; the first output then holds G plus that
    term and the second the other M terms. ``products``: the chain's :class:`ChainProducts`
    when the caller keeps them across calls (built here otherwise).
    """
    merged = merged and want_g and want_m
    n, d = z.shape
    dtype, device = z.dtype, z.device
    vp = vector_pass(layers, z, rho if want_m else None)
    k = vp.u.shape[1]
    acts = vp.act_index
    p = len(acts)
    if products is None:
        products = chain_products(layers, d, z)
    w_tail, shared = products.w_tail, products.shared  # a bottleneck may stay unfolded in w_tail

    kmat = gram = None
    if want_g and curvature is None:
        kmat = tail_curvature(w_tail, k, hvp, n, z)
    elif want_g and w_tail is not None and bool((curvature.alpha != 0).any()):  # (the DINO loss: alpha = 0)
        gram = products.tail_gram

    wt = products.tail_t if curvature is not None and curvature.diag is not None else None  # only a diagonal reads it

    def k_rows(rows: slice) -> Tensor:
        return kmat[rows] if kmat is not None else curvature.rows(rows).sandwich(w_tail, gram, k, wt=wt)
    g_out = torch.empty(n, d, d, dtype=dtype, device=device) if want_g else None
    m_out = None
    if want_m:
        if not p:
            m_out = torch.zeros(n, d, d, dtype=dtype, device=device)
        elif 0 in vp.norms:  # the first nonlinearity's M term, with its shared Jacobian
            m_out = vp.norms[0].interaction(shared, gram=products.shared_gram)
        else:
            m_out = torch.empty(n, d, d, dtype=dtype, device=device)
    if not p:  # a linear head: G_i = Wᵀ [∇²L]_ii W, M = 0
        if want_g:
            for start in range(0, n, chunk_size):
                rows = slice(start, min(start + chunk_size, n))
                g_out[rows] = k_rows(rows)
        return g_out, m_out

    scaled_w = None  # (chunk, w_out, w_in) buffer of W diag σ' for the first per-sample Jacobian, reused
    mid_buf = None  # (chunk, m, m) buffer of the sandwich's middle factor, reused
    for start in range(0, n, chunk_size):
        rows = slice(start, min(start + chunk_size, n))
        if want_m and 0 not in vp.norms:
            weighted_gram(shared, vp.c[0][rows], out=m_out[rows])
        pre = shared  # P_j: (d, w) shared for j = 0, then (s, d, w) per sample
        for j in range(1, p):
            lins = _linears_between(layers, acts[j - 1] + 1, acts[j])
            if j - 1 in vp.norms:
                pre = vp.norms[j - 1].rows(rows).pull_jt(pre)
                for lin in lins:
                    pre = pre @ lin.weight.T
            elif pre.ndim == 2 and len(lins) == 1 and lins[0].weight.numel() <= pre.numel():
                # (W diag σ') A with the shared A: scaling W's columns reads contiguous memory,
                # scaling Aᵀ (strided) was ~1.5x slower at equal sizes; keep the transposed view for
                # what follows (a fresh chunk-sized tensor per chunk costs its page faults: ~3x the
                # product itself). A W larger than A (the DINO head: 2048² against 384 × 2048) is
                # not scaled: A's copy is the smaller pass.
                d1 = vp.d1[j - 1][rows]
                w = lins[0].weight
                if scaled_w is None:
                    scaled_w = torch.empty(min(chunk_size, n), *w.shape, dtype=dtype, device=device)
                scaled = scaled_w.view(-1)[:d1.shape[0] * w.numel()].view(d1.shape[0], *w.shape)
                torch.mul(w, d1[:, None, :], out=scaled)
                pre = (scaled @ pre.T).transpose(1, 2)
            else:
                pre = pre * vp.d1[j - 1][rows][:, None, :]
                for lin in lins:
                    pre = pre @ lin.weight.T
            if want_m and not (merged and j == p - 1):
                if j in vp.norms:
                    m_out[rows] += vp.norms[j].rows(rows).interaction(pre)
                else:
                    symmetric_bmm(pre * vp.c[j][rows][:, None, :], pre, m_out[rows], accumulate=True)
        if want_g:
            if p - 1 in vp.norms:  # Jᵀ K J (+ the norm's second derivative when merged)
                state = vp.norms[p - 1].rows(rows)
                mid = state.sandwich(k_rows(rows))
                if merged and p > 1:
                    mid = mid + state.dense_second()
            else:  # D K D (+ diag c) written once into a reused buffer
                d1 = vp.d1[-1][rows]
                if mid_buf is None:
                    mid_buf = torch.empty(min(chunk_size, n) * d1.shape[1] ** 2, dtype=dtype, device=device)
                mid = mid_buf[:d1.shape[0] * d1.shape[1] ** 2].view(d1.shape[0], d1.shape[1], d1.shape[1])
                if kmat is None:
                    curvature.rows(rows).sandwich(w_tail, gram, k, scale=d1, out=mid, wt=wt)
                else:
                    torch.mul(kmat[rows], d1[:, :, None], out=mid).mul_(d1[:, None, :])
                if merged and p > 1:
                    mid.diagonal(dim1=1, dim2=2).add_(vp.c[-1][rows])
            if pre.ndim == 3:  # into the output rows, no fresh (s, d, d) result
                symmetric_bmm(torch.bmm(pre, mid), pre, g_out[rows])
            else:
                g_out[rows] = torch.matmul(torch.matmul(pre, mid), pre.transpose(-1, -2))
    return g_out, m_out

"""Per-sample H_eff blocks of chain heads under separable losses, sandwiched at the last nonlinear layer.

Write the (affine-folded) head as u = W_L f_L(a_L) + b_L with a_L = a_L(z) the input of the last
nonlinear layer f_L and B_i = ∂a_L/∂z_i (m_in × d). With J_L its Jacobian (m × m_in), K_i =
W_Lᵀ [∇²L]_ii W_L (m × m) and S_l = ∇²⟨g_l, f_l(a_l)⟩ (g_l the residual gradient ρ back-propagated to
f_l's output; docs/paper.md §1):

    G_i = B_iᵀ (J_Lᵀ K_i J_L) B_i,       M_i = B_iᵀ S_L B_i + Σ_{l<L} A_lᵀ S_l A_l

so H_eff's block is B_iᵀ (J_Lᵀ K_i J_L + S_L) B_i plus the earlier layers' terms: one m_in × m_in
sandwich instead of propagating J through W_L (k × m) and forming Jᵀ(∇²L J) at width k.
K_i costs nothing when the loss declares α_i I + U_i B_i U_iᵀ blocks
(:mod:`headgeom.geometry.engine.loss_curvature`); otherwise it comes from m loss HVPs and one GEMM.

Every step is a plain loop over the chain's layers through their protocol
(:mod:`headgeom.geometry.layers.base`): ``pull_through`` carries B_i's transpose from one nonlinear
layer to the next, ``interaction_into`` adds A_lᵀ S_l A_l, ``middle`` forms J_Lᵀ K_i J_L (+ S_L).
An element-wise activation (J = diag σ', S = diag(σ'' ⊙ g)) makes these scalings, and its term with
the first Linear's Jacobian, the same for every sample, a weighted Gram by row tiles of the upper
triangle (:mod:`headgeom.geometry.linalg.weighted_gram`); a RowNorm (LayerNorm, L2-normalisation)
applies its low-rank-corrected J and S (:mod:`headgeom.geometry.layers.row_norm`). A DINO head
(MLP → L2 → weight-normed b → 65,536 Linear) is sandwiched at the bottleneck width b: K_i = Wᵀ
[∇²L]_ii W (b × b) and g = Wᵀρ, and nothing of width 65,536 is formed per sample beyond the loss
HVPs' tangents. Large temporaries live in a reused :class:`~headgeom.geometry.linalg.workspace.Workspace`,
and the middle factors of a chunk are formed a few samples at a time (``MIDDLE_BYTES``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import torch
from torch import Tensor, nn
from torch.func import vmap

from ..layers import ChainLayer, LayerPass, TailBlocks
from ..linalg.weighted_gram import GRAM_TILE, SYMMETRIC_TILE, symmetric_bmm, upper_fraction
from ..linalg.workspace import Workspace, work_buffer
from .chain import bind
from .loss_curvature import LowRankCurvature

MIDDLE_BYTES = 1 << 26  # the middle factors (s, m_in, m_in) formed at once: 64 MiB (one sample at least)


@dataclass
class VectorPass:
    """u and, per nonlinear layer (in order), its state over all samples, its second derivative
    recorded when ρ was given."""

    u: Tensor  # (N, k)
    nonlinear: list[int]  # position of each nonlinear layer in the chain
    states: list[LayerPass]  # their states


def vector_pass(chain: list[ChainLayer], z: Tensor, rho: Tensor | None) -> VectorPass:
    """Forward values and backward residual gradients through a chain (vectors only)."""
    x = z
    states = []
    for layer in chain:
        states.append(layer.forward(x))
        x = states[-1].y
    if rho is not None:
        g = rho
        for state in reversed(states):
            g = state.backward(g)
    nonlinear = [i for i, layer in enumerate(chain) if not layer.is_affine]
    return VectorPass(u=x, nonlinear=nonlinear, states=[states[i] for i in nonlinear])


def weights_between(chain: list[ChainLayer], lo: int, hi: int) -> list[Tensor]:
    """The affine layers' weights among chain[lo:hi], in order."""
    return [layer.affine()[0] for layer in chain[lo:hi] if layer.is_affine]


def _nonlinear(chain: list[ChainLayer]) -> list[int]:
    return [i for i, layer in enumerate(chain) if not layer.is_affine]


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


def _widths_in(chain: list[ChainLayer], d: int) -> list[int]:
    """The input width of each nonlinear layer of the chain (inputs of width d)."""
    widths, w = [], d
    for layer in chain:
        if layer.is_affine:
            w = layer.affine()[0].shape[0]
        else:
            widths.append(w)
            w = layer.width_out(w)
    return widths


def tail_width(layers: list[nn.Module], k: int) -> int:
    """m, the width of K_i = W_Lᵀ [∇²L]_ii W_L: the input of the affine map after the last nonlinear
    layer (k when the chain ends in a nonlinear layer; d for a head without one)."""
    chain = bind(layers)
    acts = _nonlinear(chain)
    tail = weights_between(chain, acts[-1] + 1 if acts else 0, len(chain))
    return tail[0].shape[1] if tail else k


def block_costs(layers: list[nn.Module], d: int, k: int, declared: bool, merged: bool = True,
                diagonal: bool = False) -> dict[str, float]:
    """FLOPs per sample of the blocks of H_eff by the sandwich and the Jacobian path.

    declared: the loss-Hessian blocks are known in low-rank form (no HVPs on the sandwich path).
    merged: only H_eff = G + M is wanted (the last nonlinear layer's M term rides in the sandwich).
    diagonal: the declared form has a diagonal diag(δ_i) (the DINO loss): on the sandwich path
    W_Lᵀ diag(δ_i) W_L is a weighted Gram (about half of 2·k·m²), on the Jacobian path a scaling.
    Symmetric products count the share of the full product their row tiles multiply; each nonlinear
    layer is counted as a diagonal one (its own structure costs are of lower order).
    """
    chain = bind(layers)
    acts = _nonlinear(chain)
    act_w = _widths_in(chain, d)
    linears = [(i, layer.affine()[0]) for i, layer in enumerate(chain) if layer.is_affine]
    lin_after_first = [w for i, w in linears if i > (acts[0] if acts else len(chain))]
    tail = [w for i, w in linears if i > (acts[-1] if acts else -1)]
    m = tail_width(layers, k)
    m_in = act_w[-1] if acts else m  # the middle factor's width: the last nonlinear layer's input
    tail_ids = {id(w) for w in tail}
    jac_mid = sum(2.0 * d * w.shape[1] * w.shape[0] for w in lin_after_first if id(w) not in tail_ids)
    # sandwich path
    ours = jac_mid
    gram, sym = upper_fraction(d, GRAM_TILE), upper_fraction(d, SYMMETRIC_TILE)  # symmetric products by row tiles
    if acts:
        ours += 2.0 * act_w[0] * d * d * gram  # the first term (weighted_gram)
        ours += sum(2.0 * w * d * d * sym for w in act_w[1:-1])
        if len(acts) > 1 and not merged:
            ours += 2.0 * act_w[-1] * d * d * sym
        ours += 2.0 * m_in * m_in * d + 2.0 * m_in * d * d * sym
    ours += 4.0 * m * m if declared else 2.0 * k * m * m + HVP_COST_PER_ELEMENT * k * m
    if declared and diagonal and tail:
        ours += 2.0 * k * m * m * upper_fraction(m, GRAM_TILE)
    # Jacobian path
    theirs = jac_mid + sum(2.0 * d * w.shape[1] * w.shape[0] for w in tail if acts)
    theirs += sum(2.0 * w * d * d * sym for w in act_w)
    theirs += 2.0 * k * d * d * sym + HVP_COST_PER_ELEMENT * k * d
    if declared and diagonal:
        theirs += 2.0 * k * d
    return {"sandwich": ours, "jacobian": theirs}


@dataclass
class ChainProducts:
    """What a chain's blocks share across samples and calls, from its weights alone.

    shared (d, w_0): P_0 = the first nonlinear layer's input Jacobianᵀ (the identity when no
    Linear comes first);
    w_tail (k, m): the affine map after the last nonlinear layer (None: the identity). Their Grams are
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
    """The chain's shared Jacobian P_0 and tail map W_L (products of its affine weights)."""
    chain = bind(layers)
    acts = _nonlinear(chain)
    w_tail = None
    for w in weights_between(chain, (acts[-1] + 1) if acts else 0, len(chain)):
        w_tail = w if w_tail is None else w @ w_tail
    shared = None
    for w in weights_between(chain, 0, acts[0] if acts else 0):
        shared = w.T.contiguous() if shared is None else shared @ w.T
    if shared is None:
        shared = torch.eye(d, dtype=like.dtype, device=like.device)
    return ChainProducts(shared, w_tail)


def _tail_blocks(rows: slice, kmat: Tensor | None, curvature: LowRankCurvature | None, w_tail: Tensor | None,
                 gram: Tensor | None, k: int, wt: Tensor | None) -> TailBlocks:
    """(scale, out) ↦ S K_i S for the samples ``rows``: from the HVP-formed kmat or the declared form."""
    if kmat is not None:
        def from_hvps(scale: Tensor | None, out: Tensor | None) -> Tensor:
            block = kmat[rows]
            if scale is None:
                return block if out is None else out.copy_(block)
            if out is None:
                return block * scale[:, :, None] * scale[:, None, :]
            return torch.mul(block, scale[:, :, None], out=out).mul_(scale[:, None, :])
        return from_hvps
    declared = curvature.rows(rows)
    return lambda scale, out: declared.sandwich(w_tail, gram, k, scale=scale, out=out, wt=wt)


def _add_sandwich(pre: Tensor, mid: Tensor, out: Tensor, accumulate: bool, workspace: Workspace | None) -> None:
    """out (s, d, d) (+)= pre mid preᵀ, pre (s, d, m) per sample or (d, m) shared, mid (s, m, m) symmetric."""
    s, d, m = mid.shape[0], pre.shape[-2], pre.shape[-1]
    pm = work_buffer(workspace, "pre-middle", s * d * m, mid).view(s, d, m)
    if pre.ndim == 3:  # into the output rows, no fresh (s, d, d) result
        symmetric_bmm(torch.bmm(pre, mid, out=pm), pre, out, accumulate=accumulate)
        return
    torch.matmul(pre, mid, out=pm)
    pm = pm.view(s * d, m)  # one GEMM for all rows: (s·d, m) × (m, d)
    flat = out.view(s * d, d)
    if accumulate:
        flat.addmm_(pm, pre.T)
    else:
        torch.mm(pm, pre.T, out=flat)


def sandwich_blocks(layers: list[nn.Module], z: Tensor, rho: Tensor, curvature: LowRankCurvature | None,
                    hvp: Callable[[Tensor], Tensor], want_g: bool, want_m: bool,
                    chunk_size: int, merged: bool = False, products: ChainProducts | None = None,
                    workspace: Workspace | None = None) -> tuple[Tensor | None, Tensor | None]:
    """(G blocks, M blocks), each (N, d, d) or None, of a chain whose loss Hessian is block-diagonal
    over samples (``hvp`` multiplies by it; ``curvature`` is its declared low-rank form or None).
    Jacobians are kept transposed: P_j (d, w_j) = A_jᵀ.

    merged (needs want_g and want_m): only the sum matters, so every term is added into one
    output (returned first, with None) and the last nonlinear layer's M term rides inside the
    sandwich, B(JᵀKJ + S)Bᵀ. ``products``: the chain's :class:`ChainProducts` when the caller keeps
    them across calls (built here otherwise); ``workspace``: reused work buffers.
    """
    merged = merged and want_g and want_m
    n, d = z.shape
    dtype, device = z.dtype, z.device
    chain = bind(layers)
    vp = vector_pass(chain, z, rho if want_m else None)
    k = vp.u.shape[1]
    acts, states = vp.nonlinear, vp.states
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

    def tail(rows: slice) -> TailBlocks:
        return _tail_blocks(rows, kmat, curvature, w_tail, gram, k, wt)

    g_out = torch.empty(n, d, d, dtype=dtype, device=device) if want_g else None
    m_out = g_out if merged else (torch.empty(n, d, d, dtype=dtype, device=device) if want_m else None)
    if not p:  # a linear head: G_i = Wᵀ [∇²L]_ii W, M = 0
        for start in range(0, n, chunk_size):
            rows = slice(start, min(start + chunk_size, n))
            if want_g:
                tail(rows)(None, g_out[rows])
        if want_m and not merged:
            m_out.zero_()
        return (g_out, None) if merged else (g_out, m_out)

    if want_m:  # the first nonlinear layer's term, with the shared Jacobian P_0 (written, not added), for every
        # sample at once: a weighted Gram's row tiles are then GEMMs over all N samples (2x faster at N = 128
        # than four chunks of 32: the shared operand is read once per tile, not once per chunk)
        states[0].interaction_into(shared, m_out, gram=products.shared_gram, workspace=workspace)
    for start in range(0, n, chunk_size):
        rows = slice(start, min(start + chunk_size, n))
        pre = shared  # P_j: (d, w) shared for j = 0, then (s, d, w) per sample
        for j in range(1, p):
            pre = states[j - 1].rows(rows).pull_through(pre, weights_between(chain, acts[j - 1] + 1, acts[j]),
                                                        workspace)
            if want_m and not (merged and j == p - 1):
                states[j].rows(rows).interaction_into(pre, m_out[rows], accumulate=True, workspace=workspace)
        if want_g:  # the middle factors a few samples at a time (MIDDLE_BYTES)
            m_in = pre.shape[-1]
            step = max(1, MIDDLE_BYTES // (m_in * m_in * z.element_size()))
            for s0 in range(rows.start, rows.stop, step):
                sub = slice(s0, min(s0 + step, rows.stop))
                mid = states[p - 1].rows(sub).middle(tail(sub), merged and p > 1, workspace)
                part = pre if pre.ndim == 2 else pre[s0 - rows.start:sub.stop - rows.start]
                _add_sandwich(part, mid, g_out[sub], merged, workspace)
    return (g_out, None) if merged else (g_out, m_out)

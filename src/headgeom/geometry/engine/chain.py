"""The structured block path for MLP heads: exact per-sample J, and the second-order term.

For a head that is a chain of Linear layers, eval-mode BatchNorm (an affine map per channel)
and element-wise activations σ, the per-sample blocks follow the layer structure:

    J_i   = ∂u_i/∂z_i                      (forward propagation of the d-dim identity)
    M_i   = Σ_l  A_lᵀ diag(σ_l''(a_l) ⊙ g_l) A_l

where a_l is the pre-activation of the l-th activation, A_l = ∂a_l/∂z its Jacobian, and
g_l = ∂⟨ρ, u⟩/∂σ_l(a_l) the residual gradient back-propagated to that activation's output
(linear and affine layers have no second derivative). This costs a few dense matrix products
per layer and sample, instead of the d reverse passes of a generic Hessian. σ' and σ'' come
from autograd on the activation module itself, so every element-wise module is exact,
including ReLU (σ'' = 0) and thresholded softplus.

LayerNorm and L2-normalisation (DINO's bottleneck) are row-wise nonlinearities with dense but
low-rank-structured J and ∇²: their term is A_lᵀ ∇²⟨g_l, y_l⟩ A_l, in closed form from
:mod:`headgeom.geometry.layers.row_norm`. A weight-normed Linear is a Linear with W = g·V/‖V‖.

Jacobians are kept transposed, Jt_i = J_iᵀ of shape (d, width), so that a Linear layer is one
large matrix product (s·d, w_in) @ (w_in, w_out) for a chunk of s samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.weight_norm import WeightNorm

from .discovery import discover
from ..layers.registry import fixed_linear
from ..layers.row_norm import ChannelAffine, RowNorm, row_norm_pass
from ..linalg.weighted_gram import symmetric_bmm

def flatten_layers(module: nn.Module, input_shape: tuple[int, ...] | None = None) -> list[nn.Module] | None:
    """The layers of a chain head in forward order, or None if it is not such a chain.

    Found by :func:`headgeom.geometry.engine.discovery.discover` (an nn.Sequential walked, any other
    module's forward traced; ``input_shape`` is the batch's, for forwards that check it) from the
    rules of :mod:`headgeom.geometry.layers.registry`: a LayerNorm over the last dim becomes
    RowNorm("ln") followed by its γ, β as a ChannelAffine; L2-normalisation becomes RowNorm("l2");
    a weight-normed Linear (either torch API) is a Linear whose weight is read as g·V/‖V‖
    (:func:`effective_weight`). The caller checks numerically that the chain reproduces the head's output.
    """
    return discover(module, input_shape).layers


def effective_weight(linear: nn.Linear) -> Tensor:
    """The weight a Linear multiplies by now: g·V/‖V‖ for a weight-normed one.

    With torch.nn.utils.parametrizations.weight_norm ``linear.weight`` is computed on access;
    the older torch.nn.utils.weight_norm stores a tensor refreshed only by a forward pre-hook
    (stale after an update of weight_v or a cast of the module), so it is recomputed here.
    """
    for hook in linear._forward_pre_hooks.values():
        if isinstance(hook, WeightNorm) and hook.name == "weight":
            return hook.compute_weight(linear)
    return linear.weight


def _affine_of(layer: nn.Module) -> tuple[Tensor, Tensor] | None:
    """(W, b) of an affine leaf layer (Linear, eval-mode BatchNorm, ChannelAffine), else None."""
    if isinstance(layer, ChannelAffine):
        return torch.diag(layer.scale), layer.shift
    if isinstance(layer, nn.Linear):
        w = effective_weight(layer)
        b = layer.bias if layer.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype, device=w.device)
        return w, b
    if isinstance(layer, nn.BatchNorm1d):
        scale, shift = _bn_affine(layer)
        return torch.diag(scale), shift
    return None


def fuse_affine_runs(layers: list[nn.Module]) -> list[nn.Module]:
    """Fold consecutive affine layers (Linear, eval BatchNorm, Identity) into one Linear.

    Every affine layer comes out as a plain Linear holding its weight as it is now (a
    weight-normed layer's g·V/‖V‖ fixed at analysis time).
    Between two activations the head is one affine map, so its Jacobian is a single product
    per sample. Two maps are folded when the folded width product w_in·w_out is no larger
    than the sum of the separate ones (a 2048→2048→512 pair becomes one 2048→512 map; a
    2048→8→2048 bottleneck stays as it is). Exact up to float rounding of the reassociation.
    """
    out: list[nn.Module] = []
    pending: tuple[Tensor, Tensor] | None = None
    pending_cost = 0

    def flush() -> None:
        nonlocal pending, pending_cost
        if pending is not None:
            w, b = pending
            out.append(fixed_linear(w, b))
        pending, pending_cost = None, 0

    for layer in layers:
        if isinstance(layer, nn.Identity):
            continue
        wb = _affine_of(layer)
        if wb is None:
            flush()
            out.append(layer)
            continue
        w, b = wb
        if pending is None:
            pending, pending_cost = (w, b), w.numel()
            continue
        pw, pb = pending
        if w.shape[0] * pw.shape[1] <= pending_cost + w.numel():
            pending, pending_cost = (w @ pw, w @ pb + b), w.shape[0] * pw.shape[1]
        else:
            flush()
            pending, pending_cost = (w, b), w.numel()
    flush()
    return out


def _bn_affine(bn: nn.BatchNorm1d) -> tuple[Tensor, Tensor]:
    """Eval-mode BatchNorm as x * scale + shift."""
    scale = torch.rsqrt(bn.running_var + bn.eps)
    shift = -bn.running_mean * scale
    if bn.affine:
        scale, shift = scale * bn.weight, shift * bn.weight + bn.bias
    return scale, shift


def _activation_derivatives(act: nn.Module, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """σ(a), σ'(a), σ''(a) element-wise, from autograd on the module itself."""
    with torch.enable_grad():
        a_ = a.detach().requires_grad_(True)
        y = act(a_)
        (d1,) = torch.autograd.grad(y.sum(), a_, create_graph=True)
        if d1.requires_grad:
            (d2,) = torch.autograd.grad(d1.sum(), a_, allow_unused=True)
        else:
            d2 = None
    d2 = torch.zeros_like(a) if d2 is None else d2.detach()
    return y.detach(), d1.detach(), d2


@dataclass
class ChainPass:
    """Outputs of one structured pass over a chunk of s samples."""

    u: Tensor  # (s, k)
    jt: Tensor  # (s, d, k): J_iᵀ
    interaction: Tensor | None  # (s, d, d): M_i, when ρ was given


def chain_pass(layers: list[nn.Module], z: Tensor, rho: Tensor | None) -> ChainPass:
    """Exact u_i, J_iᵀ and (given ρ_i) M_i for a chunk z (s, d) of a chain head."""
    s, d = z.shape
    x = z
    jt: Tensor | None = None  # None: the identity (no layer yet)
    saved: list[tuple] = []  # (layer index, σ', σ'', A_lᵀ), or (index, RowNormPass, None, A_lᵀ)
    for idx, layer in enumerate(layers):
        if isinstance(layer, nn.Linear):
            w = layer.weight
            x = x @ w.T if layer.bias is None else torch.addmm(layer.bias, x, w.T)
            jt = w.T.expand(s, d, w.shape[0]) if jt is None else jt @ w.T
        elif isinstance(layer, nn.BatchNorm1d):
            scale, shift = _bn_affine(layer)
            x = x * scale + shift
            jt = torch.diag(scale).expand(s, d, d) if jt is None else jt * scale
        elif isinstance(layer, nn.Identity):
            continue
        elif isinstance(layer, RowNorm):
            if jt is None:
                jt = torch.eye(d, dtype=z.dtype, device=z.device).expand(s, d, d)
            state = row_norm_pass(layer, x)
            if rho is not None:
                saved.append((idx, state, None, jt))
            x = state.y
            jt = state.pull_jt(jt)
        else:  # element-wise activation
            if jt is None:
                jt = torch.eye(d, dtype=z.dtype, device=z.device).expand(s, d, d)
            y, d1, d2 = _activation_derivatives(layer, x)
            if rho is not None:
                saved.append((idx, d1, d2, jt))
            x = y
            jt = jt * d1[:, None, :]
    if jt is None:
        jt = torch.eye(d, dtype=z.dtype, device=z.device).expand(s, d, d)
    if rho is None:
        return ChainPass(u=x, jt=jt, interaction=None)

    # back-propagate ρ through the chain, collecting g_l at each activation's output
    interaction = torch.zeros(s, d, d, dtype=z.dtype, device=z.device)
    g = rho
    pending = {idx: (d1, d2, at) for idx, d1, d2, at in saved}
    for idx in range(len(layers) - 1, -1, -1):
        layer = layers[idx]
        if isinstance(layer, nn.Linear):
            g = g @ layer.weight
        elif isinstance(layer, nn.BatchNorm1d):
            g = g * _bn_affine(layer)[0]
        elif idx in pending and isinstance(layer, RowNorm):
            state, _, at = pending.pop(idx)
            g = state.backward(g)
            interaction = interaction + state.interaction(at)
        elif idx in pending:
            d1, d2, at = pending.pop(idx)
            c = d2 * g  # (s, width)
            if bool((c != 0).any()):
                interaction = symmetric_bmm(at * c[:, None, :], at, interaction, accumulate=True)
            g = g * d1
    return ChainPass(u=x, jt=jt, interaction=interaction)

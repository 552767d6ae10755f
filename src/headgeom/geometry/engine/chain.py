"""A head as a chain of layers: found, folded, and passed through for exact per-sample J and M.

For a head that is a chain of layers y_l = f_l(x_l) (docs/paper.md §1), the per-sample blocks follow
the layer structure:

    J_i   = ∂u_i/∂z_i = Π_l J_l                 (forward propagation of the d-dim identity)
    M_i   = Σ_l  A_lᵀ S_l A_l,   S_l = ∇²_x⟨g_l, f_l(x)⟩

where A_l = ∂x_l/∂z is the Jacobian at layer l's input and g_l = ∂⟨ρ, u⟩/∂y_l the residual gradient
back-propagated to its output (affine layers have S_l = 0). This costs a few dense matrix products
per layer and sample, instead of the d reverse passes of a generic Hessian. What J_l and S_l are,
and how they are applied, is each layer's own (the protocol of :mod:`headgeom.geometry.layers.base`):
:func:`chain_pass` is a plain loop over the layers. Jacobians are kept transposed, Jt_i = J_iᵀ of
shape (d, width), so that a Linear layer is one large matrix product; while no nonlinear layer has
been passed they are shared by the samples, (d, width).

:func:`fuse_affine_runs` folds consecutive affine layers into one Linear (between two nonlinear
layers the head is one affine map).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ..layers import ChainLayer, LayerPass, fixed_linear, layer_of
from .discovery import discover


def flatten_layers(module: nn.Module, input_shape: tuple[int, ...] | None = None) -> list[nn.Module] | None:
    """The layers of a chain head in forward order, or None if it is not such a chain.

    Found by :func:`headgeom.geometry.engine.discovery.discover` (an nn.Sequential walked, any other
    module's forward traced; ``input_shape`` is the batch's, for forwards that check it) from the
    rules of :mod:`headgeom.geometry.layers`. The caller checks numerically that the chain
    reproduces the head's output.
    """
    return discover(module, input_shape).layers


def bind(layers: list[nn.Module]) -> list[ChainLayer]:
    """The chain's layers as the passes see them (:func:`headgeom.geometry.layers.layer_of`)."""
    return [layer_of(layer) for layer in layers]


def fuse_affine_runs(layers: list[nn.Module]) -> list[nn.Module]:
    """Fold consecutive affine layers (Linear, eval BatchNorm, a norm's γ and β) into one Linear.

    Every affine layer comes out as a plain Linear holding its weight as it is now (a
    weight-normed layer's g·V/‖V‖ fixed at analysis time).
    Between two nonlinear layers the head is one affine map, so its Jacobian is a single product
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

    for module, layer in zip(layers, bind(layers)):
        if not layer.is_affine:
            flush()
            out.append(module)
            continue
        w, b = layer.affine()
        if b is None:
            b = torch.zeros(w.shape[0], dtype=w.dtype, device=w.device)
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


def chain_output(layers: list[nn.Module], z: Tensor) -> Tensor:
    """u = the chain applied to z (forward values only: no derivatives, no autograd)."""
    x = z
    for layer in layers:
        x = layer(x)
    return x


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
    jt: Tensor | None = None  # None: the identity (no layer yet); (d, w) while shared by the samples
    passes: list[tuple[LayerPass, Tensor]] = []  # each nonlinear layer's state and the Jacobianᵀ at its input
    states: list[LayerPass] = []
    for layer in bind(layers):
        state = layer.forward(x)
        states.append(state)
        if layer.is_affine:
            # Wᵀ laid out row-major: a transposed view would pass its strides on to every per-sample
            # product below (broadcast ops keep the operand's layout), and a matmul of such a
            # (s, d, w) batch cannot fold into one GEMM (a batched product at a third of the rate)
            jt = layer.affine()[0].T.contiguous() if jt is None else state.pull_jt(jt)
        else:
            at = torch.eye(d, dtype=z.dtype, device=z.device) if jt is None else jt
            passes.append((state, at))
            jt = state.pull_jt(at)
        x = state.y
    if jt is None:
        jt = torch.eye(d, dtype=z.dtype, device=z.device)
    if jt.ndim == 2:
        jt = jt.expand(s, *jt.shape)
    if rho is None:
        return ChainPass(u=x, jt=jt, interaction=None)

    # back-propagate ρ through the chain (recording each layer's second derivative along it), then
    # add each nonlinear layer's term A_lᵀ S_l A_l
    g = rho
    for state in reversed(states):
        g = state.backward(g)
    # the first term is written, not added: with the shared Jacobian it is then one weighted Gram of
    # all samples (an element-wise layer), not a batched product against the expanded Jacobian
    interaction = (torch.empty if passes else torch.zeros)(s, d, d, dtype=z.dtype, device=z.device)
    for i, (state, at) in enumerate(passes):
        state.interaction_into(at, interaction, accumulate=i > 0)
    return ChainPass(u=x, jt=jt, interaction=interaction)

"""The layer protocol: what the engine's structured passes ask of one layer of a chain.

A chain is a list of modules; each module's type is registered with a :class:`ChainLayer` class
(:func:`headgeom.geometry.layers.registry.chain_layer`), which the passes bind to the module and ask:

- its **affine form** ``affine() -> (W, b)`` where it has one (Linear, eval BatchNorm, LayerNorm's
  γ, β): affine layers are folded together and their weights shared by every sample;
- its **forward state** on rows x (s, w_in): ``forward(x) -> LayerPass`` holding y (s, w_out) and
  what the derivatives need.

A :class:`LayerPass` (docs/paper.md §1; J = ∂y/∂x (s, w_out, w_in) per row, g the residual
gradient at the output, S = ∇²_x⟨g, y(x)⟩ (s, w_in, w_in) the layer's second derivative along g):

- **backward of a vector**: ``backward(g) -> Jᵀ g`` (s, w_in), recording S for g;
- **backward of a Jacobian**: ``pull_jt(pre) -> pre Jᵀ`` for transposed Jacobians pre (d, w_in)
  shared by the rows or (s, d, w_in) per row, giving (s, d, w_out);
- **its interaction-term contribution**: ``interaction(pre) -> pre S preᵀ`` (s, d, d), the layer's
  term of M_i when pre is the Jacobianᵀ at its input;
- **the sandwich at the last nonlinearity**: ``sandwich(K) -> Jᵀ K J`` (s, w_in, w_in) for K
  (s, w_out, w_out).

Only ``rows``, ``backward``, ``dense_jacobian`` and ``dense_second`` must be written: the other
products default to the dense J and S, which is exact and fine at moderate widths; a layer with
structure (a diagonal J, a low-rank correction) overrides them with that structure. A new kind is one
file: its ChainLayer, its LayerPass, a module rule (:func:`~headgeom.geometry.layers.registry.module_rule`)
that maps a head's module to it, and a test against autograd.
"""
from __future__ import annotations

from typing import Callable, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..linalg.weighted_gram import symmetric_bmm
from ..linalg.workspace import Workspace

RowSelection = slice | Tensor
TailBlocks = Callable[[Tensor | None, Tensor | None], Tensor]
"""(scale (s, m) or None, out (s, m, m) or None) -> S K S: the loss's blocks pulled back to the last
nonlinearity's output, K_i = W_Lᵀ [∇²L]_ii W_L, scaled on both sides by diag(scale_i) when given."""


class LayerPass:
    """The state of one layer's forward pass over s rows (see the module docstring)."""

    y: Tensor  # (s, w_out)

    def rows(self, sel: RowSelection) -> "LayerPass":
        """The state of the rows ``sel`` (after :meth:`backward`: with their second derivative)."""
        raise NotImplementedError

    def backward(self, g: Tensor) -> Tensor:
        """Jᵀ g (s, w_in) for the gradient g (s, w_out) at the output; records S for g."""
        raise NotImplementedError

    def dense_jacobian(self) -> Tensor:
        """(s, w_out, w_in) J."""
        raise NotImplementedError

    def dense_second(self) -> Tensor:
        """(s, w_in, w_in) S = ∇²⟨g, y⟩ (needs :meth:`backward`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ products (dense defaults)
    def pull_jt(self, pre: Tensor) -> Tensor:
        """pre Jᵀ (s, d, w_out) for pre (d, w_in) shared or (s, d, w_in)."""
        return torch.matmul(pre, self.dense_jacobian().transpose(1, 2))

    def pull_through(self, pre: Tensor, weights: list[Tensor], workspace: Workspace | None = None) -> Tensor:
        """pre Jᵀ W₁ᵀ W₂ᵀ ...: through this layer, then the Linear weights that follow it."""
        out = self.pull_jt(pre)
        for w in weights:
            out = out @ w.T
        return out

    def interaction(self, pre: Tensor, gram: Tensor | None = None) -> Tensor:
        """(s, d, d) pre S preᵀ for pre (d, w_in) shared or (s, d, w_in) (``gram``: pre preᵀ, if known)."""
        out = torch.empty(self.y.shape[0], pre.shape[-2], pre.shape[-2], dtype=pre.dtype, device=pre.device)
        self.interaction_into(pre, out, gram=gram)
        return out

    def interaction_into(self, pre: Tensor, out: Tensor, accumulate: bool = False, gram: Tensor | None = None,
                         workspace: Workspace | None = None) -> None:
        """out (s, d, d) = pre S preᵀ, or += with ``accumulate``."""
        ps = torch.matmul(pre, self.dense_second())
        symmetric_bmm(ps, pre.expand(ps.shape[0], *pre.shape[-2:]), out, accumulate=accumulate)

    def sandwich(self, k: Tensor) -> Tensor:
        """(s, w_in, w_in) Jᵀ K J for K (s, w_out, w_out)."""
        j = self.dense_jacobian()
        return j.transpose(1, 2) @ k @ j

    def middle(self, tail: TailBlocks, with_second: bool, workspace: Workspace | None = None) -> Tensor:
        """(s, w_in, w_in) Jᵀ K J (+ S with ``with_second``): the middle factor of the sandwich when
        this layer is the chain's last nonlinearity (``tail`` gives K)."""
        mid = self.sandwich(tail(None, None))
        if with_second:
            mid = mid + self.dense_second()
        return mid


class ChainLayer:
    """One module of a chain as the passes see it, bound to the module (``layer.module``)."""

    is_affine: ClassVar[bool] = False

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def affine(self) -> tuple[Tensor, Tensor | None] | None:
        """(W (w_out, w_in), b (w_out,) or None) of an affine layer, else None."""
        return None

    def width_out(self, w_in: int) -> int:
        """The output width for inputs of width ``w_in``."""
        return w_in

    def forward(self, x: Tensor) -> LayerPass:
        """The layer's state on rows x (s, w_in)."""
        raise NotImplementedError


class AffinePass(LayerPass):
    """y = x Wᵀ + b: J = W for every row, no second derivative."""

    def __init__(self, y: Tensor, weight: Tensor) -> None:
        self.y, self.weight = y, weight

    def rows(self, sel: RowSelection) -> "AffinePass":
        return AffinePass(self.y[sel], self.weight)

    def backward(self, g: Tensor) -> Tensor:
        return g @ self.weight

    def dense_jacobian(self) -> Tensor:
        return self.weight.expand(self.y.shape[0], *self.weight.shape)

    def dense_second(self) -> Tensor:
        w = self.weight.shape[1]
        return self.weight.new_zeros(self.y.shape[0], w, w)

    def pull_jt(self, pre: Tensor) -> Tensor:
        return pre @ self.weight.T  # shared stays shared: (d, w_out)

    def interaction_into(self, pre: Tensor, out: Tensor, accumulate: bool = False, gram: Tensor | None = None,
                         workspace: Workspace | None = None) -> None:
        if not accumulate:
            out.zero_()


class AffineLayer(ChainLayer):
    """A layer that is one affine map for every row; subclasses give :meth:`affine`."""

    is_affine: ClassVar[bool] = True

    def affine(self) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError

    def width_out(self, w_in: int) -> int:
        return self.affine()[0].shape[0]

    def forward(self, x: Tensor) -> AffinePass:
        w, b = self.affine()
        return AffinePass(F.linear(x, w, b), w)

"""``nn.GLU`` (and ``F.glu``) over the features: y = a ⊙ σ(b) for x = [a, b], halving the width.

With s = σ(b), s' = σ'(b), s'' = σ''(b) (element-wise, m = w/2; docs/paper.md §1):

    J = [diag s, diag(a ⊙ s')]                          (m × 2m)
    S = ∇²⟨g, y⟩ = [[0, diag p], [diag p, diag q]],     p = g ⊙ s',  q = g ⊙ a ⊙ s''

Each output depends on one pair (a_i, b_i), so J is two diagonals and S three: a product with J is
two scalings, and for P = [P_a, P_b] the interaction term is P S Pᵀ = Y P_bᵀ + P_b Yᵀ with
Y = P_a diag p + ½ P_b diag q, one matrix product per sample (one GEMM for all samples when P is
shared). The last nonlinearity's middle factor Jᵀ K J is K tiled 2 × 2 and scaled by f fᵀ,
f = [s, a ⊙ s'].
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..linalg.workspace import Workspace
from .base import ChainLayer, LayerPass, RowSelection
from .registry import NotAChain, call_arguments, chain_layer, function_rule, module_rule


class GLUPass(LayerPass):
    """a, s, s', s'' (s rows, m = w/2 each); after :meth:`backward`, p and q."""

    def __init__(self, a: Tensor, sig: Tensor, d1: Tensor, d2: Tensor, p: Tensor | None = None,
                 q: Tensor | None = None) -> None:
        self.a, self.sig, self.d1, self.d2, self.p, self.q = a, sig, d1, d2, p, q
        self.y = a * sig

    def rows(self, sel: RowSelection) -> "GLUPass":
        pick = lambda t: None if t is None else t[sel]  # noqa: E731
        return GLUPass(self.a[sel], self.sig[sel], self.d1[sel], self.d2[sel], pick(self.p), pick(self.q))

    def _factors(self) -> Tensor:
        """f = [s, a ⊙ s'] (s, 2m): J = [diag f_a, diag f_b]."""
        return torch.cat([self.sig, self.a * self.d1], dim=-1)

    def backward(self, g: Tensor) -> Tensor:
        self.p, self.q = g * self.d1, g * self.a * self.d2
        return torch.cat([g * self.sig, self.p * self.a], dim=-1)

    def dense_jacobian(self) -> Tensor:
        return torch.cat([torch.diag_embed(self.sig), torch.diag_embed(self.a * self.d1)], dim=-1)

    def dense_second(self) -> Tensor:
        p, q = torch.diag_embed(self.p), torch.diag_embed(self.q)
        return torch.cat([torch.cat([torch.zeros_like(p), p], -1), torch.cat([p, q], -1)], dim=-2)

    def pull_jt(self, pre: Tensor) -> Tensor:
        """pre Jᵀ = P_a diag s + P_b diag(a ⊙ s') for pre (d, 2m) shared or (s, d, 2m)."""
        pa, pb = pre.chunk(2, dim=-1)
        return pa * self.sig[:, None, :] + pb * (self.a * self.d1)[:, None, :]

    def interaction_into(self, pre: Tensor, out: Tensor, accumulate: bool = False, gram: Tensor | None = None,
                         workspace: Workspace | None = None) -> None:
        pa, pb = pre.chunk(2, dim=-1)
        y = pa * self.p[:, None, :] + pb * (0.5 * self.q)[:, None, :]  # (s, d, m)
        z = torch.matmul(y, pb.transpose(-1, -2))  # (s, d, d): Y P_bᵀ
        if accumulate:
            out.add_(z).add_(z.transpose(1, 2))
        else:
            torch.add(z, z.transpose(1, 2), out=out)

    def sandwich(self, k: Tensor) -> Tensor:
        f = self._factors()
        return k.repeat(1, 2, 2) * f[:, :, None] * f[:, None, :]


@chain_layer(nn.GLU)
class GLULayer(ChainLayer):
    """nn.GLU over the last dim (dim -1 or 1 of rows)."""

    def width_out(self, w_in: int) -> int:
        return w_in // 2

    def forward(self, x: Tensor) -> GLUPass:
        a, b = x.chunk(2, dim=-1)
        sig = torch.sigmoid(b)
        d1 = sig * (1.0 - sig)  # σ' = σ(1 − σ), σ'' = σ'(1 − 2σ)
        return GLUPass(a, sig, d1, d1 * (1.0 - 2.0 * sig))


def _glu_layers(dim: int) -> list[nn.Module]:
    if dim not in (-1, 1):
        raise NotAChain(f"GLU over dim={dim} (the chain's GLU splits the features, dim -1)")
    return [nn.GLU(dim=-1)]


@module_rule(nn.GLU)
def _glu(module: nn.GLU) -> list[nn.Module]:
    return _glu_layers(module.dim)


@function_rule(F.glu)
def _glu_call(args: tuple, kwargs: dict) -> list[nn.Module]:
    return _glu_layers(call_arguments(args, kwargs, ("dim",), {"dim": -1}, "F.glu")["dim"])
